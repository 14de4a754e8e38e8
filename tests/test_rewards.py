"""Rewards and groups: every rollout's reward (outcome, a named function, the task's expectations
checked on the final page), the validator's verdicts as per-step signals, a reward function that
raises or hangs recorded and never fatal, and the group statistics readers compute from final lines."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

import surfer
from surfer.agent.config import AgentConfig, BrowserSettings
from surfer.agent.loop import Agent
from surfer.apps.demo.oracle import DEMO_TASK, EMAIL, NAME, DemoOracle, confirmation_code, frame_mapper
from surfer.core.errors import ConfigError
from surfer.fleet.batch import Batch, BatchTask, load_tasks
from surfer.fleet.browser_pool import SharedBrowser
from surfer.fleet.batch.groups import fill_groups
from surfer.fleet.batch.results import ResultLine, read_results
from test_batch import VIEWPORT, centres  # noqa: F401 - fixture

CODE = confirmation_code(NAME, EMAIL)
REWARDS_PY = '''
import asyncio, json, threading

def steps_taken(result, run_dir):
    """A reward read from the run directory: fewer steps, more reward."""
    lines = (run_dir / "trajectory.jsonl").read_text().splitlines()
    assert len(lines) == result.steps and result.status == "success"
    return 1.0 / len(lines)

def broken(result, run_dir):
    raise ValueError("no reward today")

async def hangs(result, run_dir):
    await asyncio.Event().wait()

def blocks(result, run_dir):
    threading.Event().wait()

def not_a_number(result, run_dir):
    return "high"
'''


@dataclass
class ScreenJudgingOracle(DemoOracle):
    """The demo oracle; its validator also judges statements about the welcome page the way it judges
    answers: by the code the page shows."""

    def validator(self, request: Any) -> dict[str, Any]:
        statement = re.search(r'Proposed answer: "Confirmed: (.*)"', request.text)
        if statement is None:
            return super().validator(request)
        codes = re.findall(r"ACME-\d{6}", statement.group(1))
        if codes and codes[0] == CODE:
            return {"verdict": "accept", "reasons": f"The welcome page shows {CODE}."}
        return {"verdict": "reject", "reasons": f"The welcome page shows {CODE}, not {codes[0] if codes else '?'}."}


@pytest.fixture
def judging_server(standin, centres):  # type: ignore[no-untyped-def]
    return standin(ScreenJudgingOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0)))


def config_for(server, **settings: Any) -> AgentConfig:  # type: ignore[no-untyped-def]
    return AgentConfig(base_url=server.base_url, model=server.model, profile="holotron", max_steps=10,
                       browser=BrowserSettings(viewport=VIEWPORT), **settings)


async def test_a_single_run_is_rewarded_by_its_outcome_and_keeps_the_validator_verdict_as_a_signal(
    demo_site, judging_server, tmp_path,
):
    agent = Agent(config_for(judging_server))
    try:
        result = await agent.run(DEMO_TASK, demo_site.url("index.html"), out_dir=tmp_path / "run")
    finally:
        await agent.aclose()
    assert result.status == "success" and (result.reward, result.reward_source) == (1.0, "outcome")
    [signal] = result.signals
    assert (signal.step, signal.source, signal.value) == (result.steps, "validator", 1.0) and "matches" in signal.detail
    written = json.loads((tmp_path / "run" / "result.json").read_text())
    assert written["reward"] == 1.0 and written["signals"][0]["source"] == "validator" and written["group"] is None


async def test_batch_rewards_by_function_and_expectations_and_records_failing_functions(
    demo_site, judging_server, tmp_path, monkeypatch,
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "myrewards.py").write_text(REWARDS_PY)
    url = demo_site.url("index.html")
    tasks = [
        BatchTask(id="fn", task=DEMO_TASK, url=url, reward="myrewards:steps_taken"),
        BatchTask(id="met", task=DEMO_TASK, url=url, expect=[f"The page shows the code {CODE}", {"text": CODE},
                                                              {"url": r"welcome\.html"}]),
        BatchTask(id="unmet", task=DEMO_TASK, url=url, expect=["The page shows the code ACME-000000"]),
        BatchTask(id="raises", task=DEMO_TASK, url=url, reward="myrewards.py:broken"),
        BatchTask(id="hangs", task=DEMO_TASK, url=url, reward="myrewards:hangs"),
        BatchTask(id="blocks", task=DEMO_TASK, url=url, reward="myrewards:blocks"),
        BatchTask(id="nan", task=DEMO_TASK, url=url, reward="myrewards:not_a_number"),
    ]
    config = config_for(judging_server, reward_timeout=4.0)  # the expectations share it: room on a busy machine
    groups = [g async for g in surfer.rollouts(config, tasks, samples=1, out_dir=tmp_path / "out", concurrency=3,
                                                groups=True, advantages="grpo")]
    lines = {g[0]["id"]: g[0] for g in groups}
    assert set(lines) == {t.id for t in tasks} and all(len(g) == 1 for g in groups)
    for line in lines.values():
        ResultLine.model_validate({k: v for k, v in line.items() if k != "group"} | {"group": line["group"]})
        assert line["status"] == "success"
    fn = lines["fn"]
    assert (fn["reward_source"], fn["reward"]) == ("function", pytest.approx(1.0 / fn["steps"]))
    assert [s["source"] for s in fn["signals"]] == ["validator"]
    met, unmet = lines["met"], lines["unmet"]
    assert (met["reward"], met["reward_source"]) == (1.0, "expectations")
    assert [(s["source"], s["value"]) for s in met["signals"]] == [("validator", 1.0)] + [("expectation", 1.0)] * 3
    assert unmet["reward"] == 0.0 and unmet["signals"][-1]["value"] == 0.0 and "not ACME-000000" in unmet["signals"][-1]["detail"]
    assert lines["raises"]["reward"] is None and lines["raises"]["reward_error"] == (
        "reward function myrewards.py:broken failed: ValueError: no reward today")
    for hung in ("hangs", "blocks"):
        assert lines[hung]["reward"] is None and lines[hung]["reward_error"] == (
            f"reward function myrewards:{hung} took longer than 4 s (reward_timeout)")
    assert lines["nan"]["reward"] is None and "returned 'high', not a finite number" in lines["nan"]["reward_error"]
    # a group of one: std 0, advantage 0; a sample without a reward leaves its group without statistics
    assert fn["group"] == {"id": "fn", "index": 0, "size": 1, "mean": fn["reward"], "std": 0.0, "advantage": 0.0}
    assert lines["raises"]["group"]["mean"] is None
    result = json.loads((tmp_path / "out" / met["run_dir"] / "result.json").read_text())
    assert result["reward"] == 1.0 and result["group"] == {"id": "met", "index": 0, "size": 1}
    written = {r["id"]: r for r in read_results(tmp_path / "out" / "results.jsonl")}
    assert written["fn"]["group"]["advantage"] is None and written["fn"]["group"]["mean"] == fn["reward"]
    assert read_results(str(tmp_path / "out")) == list(written.values())  # a str path, or the batch's directory


async def test_samples_form_a_group_whose_statistics_readers_fill_once_it_is_complete(demo_site, judging_server, shared_browser,
                                                                                     tmp_path):
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "reg", "task": DEMO_TASK, "url": demo_site.url("index.html")}))
    tasks = load_tasks(tmp_path / "tasks.jsonl", samples=2)
    batch = Batch(config_for(judging_server), tasks[:1], tmp_path / "out")  # one sample now, the other later
    batch._browser = SharedBrowser.given(shared_browser)  # its sessions in the session's shared browser, not a Chromium and a driver of its own
    await batch.run()
    [half] = read_results(tmp_path / "out" / "results.jsonl", advantages="grpo")
    assert half["group"] == {"id": "reg", "index": 0, "size": 2, "mean": None, "std": None, "advantage": None}
    groups = [g async for g in surfer.rollouts(config_for(judging_server), tmp_path / "tasks.jsonl", samples=2,
                                               out_dir=tmp_path / "out", groups=True, advantages="grpo")]
    [[first, second]] = groups  # the sample of the earlier run is in its group
    assert (first["id"], second["id"]) == ("reg#0", "reg#1")
    assert first["group"] == {"id": "reg", "index": 0, "size": 2, "mean": 1.0, "std": 0.0, "advantage": 0.0}
    raw = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert [r["group"] for r in raw] == [{"id": "reg", "index": 0, "size": 2}, {"id": "reg", "index": 1, "size": 2}]
    # a group finished and never yielded (none was: as after a `surfer batch` run) is yielded once, nothing run
    (tmp_path / "out" / "delivered.jsonl").unlink()
    again = [g async for g in surfer.rollouts(config_for(judging_server), tmp_path / "tasks.jsonl", samples=2,
                                              out_dir=tmp_path / "out", groups=True, advantages="grpo")]
    assert again == groups


def test_grpo_advantages_are_the_rewards_standardized_within_each_group():
    lines = [
        {"id": "a#0", "group": {"id": "a", "index": 0, "size": 3}, "reward": 1.0},
        {"id": "b#0", "group": {"id": "b", "index": 0, "size": 2}, "reward": 0.2},
        {"id": "a#1", "group": {"id": "a", "index": 1, "size": 3}, "reward": 0.0},
        {"id": "a#2", "group": {"id": "a", "index": 2, "size": 3}, "reward": 0.5},
        {"id": "old", "group": "old", "sample": None, "reward": 1.0},  # an older version's line
    ]
    filled = {line["id"]: line["group"] for line in fill_groups(lines, advantages="grpo")}
    mean, std = 0.5, (((0.5 ** 2) * 2) / 3) ** 0.5
    assert filled["a#0"]["mean"] == pytest.approx(mean) and filled["a#0"]["std"] == pytest.approx(std)
    assert [filled[f"a#{k}"]["advantage"] for k in range(3)] == pytest.approx([0.5 / std, -0.5 / std, 0.0])
    assert filled["b#0"]["mean"] is None  # its second sample is not final yet
    assert filled["old"] == {"id": "old", "index": 0, "size": None, "mean": None, "std": None, "advantage": None}
    assert fill_groups(lines)[0]["group"]["advantage"] is None  # advantages only on request
    with pytest.raises(ConfigError, match="advantages must be one of grpo"):
        fill_groups(lines, advantages="ppo")
    # resumed with more samples (2, then 3): the group is the 3 samples, not left without statistics
    grown = [{"id": f"c#{k}", "group": {"id": "c", "index": k, "size": 3 if k == 2 else 2}, "reward": float(k == 0)}
             for k in range(3)]
    filled = fill_groups(grown, advantages="grpo")
    assert [g["group"]["size"] for g in filled] == [3, 3, 3] and filled[0]["group"]["mean"] == pytest.approx(1 / 3)
    assert fill_groups([grown[0], grown[2]])[0]["group"]["mean"] is None  # sample 1 is not final yet


def test_bad_reward_settings_are_usage_errors_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"task": "t", "reward": "r:f", "expect": ["x"]}) + "\n")
    with pytest.raises(ConfigError, match="a task takes a reward function or expectations, not both"):
        load_tasks(tmp_path / "tasks.jsonl")
    for spec, message in [("nocolon", "name a function as module:function"), ("missing_mod:f", "cannot import missing_mod"),
                          ("gone.py:f", "no file gone.py"), ("json:nothing_here", "json has no function 'nothing_here'")]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            Batch(AgentConfig(reward=spec), [BatchTask(id="t", task="t")], tmp_path / "out")
        with pytest.raises(ConfigError, match=re.escape(message)):
            Agent(AgentConfig(reward=spec))


def test_the_batch_command_refuses_a_reward_function_it_cannot_import_in_one_line(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from surfer.apps.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"task": "t", "url": "http://127.0.0.1:9/", "reward": "nowhere:f"}))
    result = CliRunner().invoke(app, ["batch", "tasks.jsonl", "--out", "out", "--quiet"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "reward 'nowhere:f': cannot import nowhere: ModuleNotFoundError" in " ".join(result.output.split())
    assert not (tmp_path / "out" / "results.jsonl").exists()
