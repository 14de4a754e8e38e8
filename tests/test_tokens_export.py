"""Exports trainers read: `surfer export --per call` rows with each call's token ids
and logprobs (TRL's column names), `--per trajectory` rows joining a role's calls
where they chain, the group and reward of each sample, and the two documented
examples (TRL's rollout_func, verl's agent loop) building what those frameworks take."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import surfer
from surfer.agent.config import AgentConfig, BrowserSettings
from surfer.agent.tokens_record import read_calls
from surfer.apps.cli import app
from surfer.apps.demo.oracle import DEMO_TASK, frame_mapper
from surfer.apps.export import export_records
from surfer.models.standin import StandInServer
from test_batch import VIEWPORT, centres  # noqa: F401 - fixture
from test_tokens_capture import ConversationOracle

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "training"


def _example(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(f"surfer_example_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
async def rollouts_dir(demo_site, centres, tmp_path_factory):  # type: ignore[no-untyped-def]
    """Two samples of the demo task through surfer.rollouts (token capture on by default there), Holo2's turn shape
    (its history turns render as the model generated them: the calls chain through chat completions)."""
    out = tmp_path_factory.mktemp("rollouts")
    with StandInServer(ConversationOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0)), template="qwen3") as server:
        config = AgentConfig(base_url=server.base_url, model=server.model, profile="holo2", max_steps=10,
                             prompt_layout="conversation", policy_version="it-4", browser=BrowserSettings(viewport=VIEWPORT))
        records = [r async for r in surfer.rollouts(config, [{"id": "reg", "task": DEMO_TASK, "url": demo_site.url("index.html")}],
                                                    samples=2, out_dir=out, concurrency=2)]
    assert sorted(r["status"] for r in records) == ["success", "success"]
    return out


def test_call_rows_carry_token_ids_logprobs_and_the_processor(rollouts_dir: Path) -> None:
    rows = export_records(rollouts_dir, "call")
    assert rows and all(r["prompt_ids"] and r["completion_ids"] for r in rows)
    for run_dir in {r["run_dir"] for r in rows}:
        calls = {c.call: c for c in read_calls(run_dir)}
        mine = [r for r in rows if r["run_dir"] == run_dir]
        assert len(mine) == len(calls)
        for row in mine:
            match = next(c for c in calls.values() if c.prompt_ids == row["prompt_ids"])
            assert (row["completion_ids"], row["logprobs"]) == (match.completion_ids, match.logprobs)
            assert row["role"] == match.role
    row = rows[0]
    assert (row["policy"], row["policy_version"], row["finish_reason"]) == ("standin-model", "it-4", "stop")
    assert all(r["dropped_stop"] is None for r in rows) and any(r["extends_previous"] for r in rows)
    assert len(row["logprobs"]) == len(row["completion_ids"])
    assert json.loads(row["processor"])["profile"] == "holo2" and "image" in json.loads(row["processor"])
    assert row["images"] and all(Path(p).exists() for p in row["images"])
    assert {r["group"] for r in rows} == {"reg"} and {r["group_index"] for r in rows} == {0, 1}


def test_trajectory_rows_join_the_policy_calls_and_read_recorded_groups(rollouts_dir: Path, tmp_path: Path) -> None:
    rows = export_records(rollouts_dir, "trajectory")
    policy = [r for r in rows if r["role"] == "policy"]
    assert len(policy) == 2  # one chained sequence per sample
    for row in policy:
        calls = [c for c in read_calls(row["run_dir"]) if c.role == "policy"]
        assert row["calls"] == [c.call for c in calls]
        assert row["prompt_ids"] + row["completion_ids"] == calls[-1].prompt_ids + calls[-1].completion_ids
        assert len(row["completion_mask"]) == len(row["completion_ids"]) == len(row["logprobs"])
        assert 0 in row["completion_mask"] and row["reward"] == 1.0 and row["dropped"] == []
    # a reward a reward function gave (in the batch's results line) is exported with its group's statistics and
    # GRPO advantage, filled in when the lines are read (rewards 0.25 and 1.0: mean 0.625, std 0.375)
    run_dir = Path(policy[0]["run_dir"])
    results = rollouts_dir / "results.jsonl"
    lines = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    for line in lines:
        if (rollouts_dir / line["run_dir"]).resolve() == run_dir.resolve():
            line["reward"], line["reward_source"] = 0.25, "function"
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    again = next(r for r in export_records(rollouts_dir, "trajectory") if r["run_dir"] == str(run_dir) and r["role"] == "policy")
    assert (again["reward"], again["group"], again["group_mean"], again["group_std"], again["advantage"]) == (0.25, "reg", 0.625, 0.375, -1.0)
    out = CliRunner().invoke(app, ["export", str(rollouts_dir), "--per", "trajectory", "--format", "parquet",
                                   "--embed-images", "--out", str(tmp_path / "t.parquet")])
    assert out.exit_code == 0, out.output
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "t.parquet")
    assert {"prompt_ids", "completion_ids", "completion_mask", "logprobs", "dropped", "images", "reward",
            "group"} <= set(table.column_names)
    assert table.num_rows == len(rows)


def test_a_run_without_an_outcome_is_exported_with_no_reward_not_a_failures_zero(rollouts_dir: Path, tmp_path: Path) -> None:
    """A run stopped by Ctrl-C (`interrupted`: its result's reward null) and one killed before its result.json
    have no reward, not the 0 of a failure a trainer would learn from; an older run recording no reward keeps
    1 for success, 0 for another final status."""
    import shutil

    run = sorted((rollouts_dir / "runs").iterdir())[0]
    for name in ("stopped", "killed", "older"):
        shutil.copytree(run, tmp_path / "runs" / name)
    stopped = tmp_path / "runs" / "stopped" / "result.json"
    stopped.write_text(json.dumps({**json.loads(stopped.read_text()), "status": "interrupted", "reward": None,
                                   "reward_source": None}))
    (tmp_path / "runs" / "killed" / "result.json").unlink()
    older = tmp_path / "runs" / "older" / "result.json"
    fields = {k: v for k, v in json.loads(older.read_text()).items() if not k.startswith("reward")}
    older.write_text(json.dumps({**fields, "status": "failed"}))
    for per in ("trajectory", "call"):
        rows = {(Path(r["run_dir"]).name, r["status"], r["reward"]) for r in export_records(tmp_path / "runs", per)}
        assert rows == {("stopped", "interrupted", None), ("killed", "unknown", None), ("older", "failed", 0.0)}


def test_trajectory_rows_of_runs_without_tokens_are_refused_clearly(rollouts_dir: Path, tmp_path: Path) -> None:
    import shutil

    plain = tmp_path / "plain"
    shutil.copytree(rollouts_dir, plain)
    first, *others = sorted(plain.rglob("tokens.jsonl"))
    first.unlink()  # a run made without --record-tokens beside the others: said, not silently left out
    out = CliRunner().invoke(app, ["export", str(plain), "--per", "trajectory", "--out", str(tmp_path / "t.jsonl")])
    assert out.exit_code == 0 and "; 1 run(s) recorded without --record-tokens are not in it" in out.output, out.output
    for path in others:
        path.unlink()
    assert all(r["prompt_ids"] is None for r in export_records(plain, "call"))  # per call: null token columns
    out = CliRunner().invoke(app, ["export", str(plain), "--per", "trajectory"])
    assert out.exit_code == 2 and "--record-tokens" in out.output and "Traceback" not in out.output


def test_the_trl_example_builds_a_rollout_funcs_return(rollouts_dir: Path) -> None:
    trl = _example("trl_rollout_func")
    batch = trl.rows_for_trl(export_records(rollouts_dir, "trajectory"))
    assert set(batch) >= {"prompt_ids", "completion_ids", "logprobs", "env_mask"}
    assert len(batch["prompt_ids"]) == 2
    for ids, logprobs, mask in zip(batch["completion_ids"], batch["logprobs"], batch["env_mask"]):
        assert len(ids) == len(logprobs) == len(mask) and set(mask) == {0, 1}
    rewards = trl.surfer_reward(["p", "p"], ["c", "c"], surfer_reward=batch["surfer_reward"], group=batch["group"])
    assert len(rewards) == 2 and set(rewards) <= {0.25, 1.0}  # (one sample's result.json carries a recorded reward)
    policy = [r for r in export_records(rollouts_dir, "trajectory") if r["role"] == "policy"]
    with pytest.raises(ValueError, match="several sequences"):  # calls that did not chain are not one sample
        trl.rows_for_trl(policy + [{**policy[0], "calls": [99]}])
    # in the prompts' order; an episode with no sequence (it ended before the policy's first call) is named, never
    # skipped: the next prompt would be given its sample
    ids = sorted(r["id"] for r in policy)
    assert trl.rows_for_trl(policy, ids[::-1])["prompt_ids"] == [r["prompt_ids"] for r in sorted(policy, key=lambda r: r["id"])][::-1]
    with pytest.raises(ValueError, match=f"no policy sequence for {ids[0]}: it ended before"):
        trl.rows_for_trl([r for r in policy if r["id"] != ids[0]], ids)


def test_the_verl_example_builds_an_agent_loop_output(rollouts_dir: Path) -> None:
    verl = _example("verl_agent_loop")
    rows = export_records(rollouts_dir, "trajectory")
    one_run = [r for r in rows if r["run_dir"] == rows[0]["run_dir"]]
    output = verl.agent_loop_output(one_run)
    assert len(output["response_ids"]) == len(output["response_mask"]) == len(output["response_logprobs"])
    assert output["multi_modal_data"]["image"][0].size[0] > 0  # PIL images of the screenshots the prompt holds
    assert output["reward_score"] in (0.25, 1.0) and output["num_turns"] >= 4
    with pytest.raises(ValueError, match="not one"):
        verl.agent_loop_output(rows)  # two episodes' chains: not one AgentLoopOutput
    with pytest.raises(ValueError, match="no policy sequence: it ended before the policy's first call"):
        verl.agent_loop_output([r for r in one_run if r["role"] != "policy"])  # (not "0 sequences, not one")


def test_the_trl_rollout_func_runs_the_prompts_in_order(demo_site, centres) -> None:  # noqa: F811
    trl = _example("trl_rollout_func")
    oracle = ConversationOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0))
    with StandInServer(oracle, template="qwen3") as server:
        config = AgentConfig(base_url=server.base_url, model=server.model, profile="holo2", max_steps=10,
                             prompt_layout="conversation", browser=BrowserSettings(viewport=VIEWPORT))
        batch = trl.make_rollout_func(config, demo_site.url("index.html"))([DEMO_TASK, "Report the code shown (a second prompt)."])
    assert len(batch["prompt_ids"]) == 2 and len(batch["completion_ids"][0]) == len(batch["env_mask"][0])
    prompts = [server.tokenizer.decode(ids) for ids in batch["prompt_ids"]]
    assert "Register as a new library member" in prompts[0] and "a second prompt" in prompts[1]  # the prompts' order

