"""`surfer export`: batch run directories → jsonl / parquet records that load
with `datasets` (and pyarrow), grouped by sample for RL-style data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from surfer.agent.config import AgentConfig, BrowserSettings
from surfer.fleet.batch import Batch, load_tasks
from surfer.fleet.browser_pool import SharedBrowser
from surfer.apps.cli import app
from surfer.apps.demo.oracle import DEMO_TASK, DemoOracle, frame_mapper
from surfer.apps.export import export_records, write_records
from surfer.core.errors import ConfigError

VIEWPORT = (1024, 700)


@pytest.fixture(scope="module")
async def batch_dir(demo_site, measure, shared_browser, tmp_path_factory):  # type: ignore[no-untyped-def]
    from surfer.models.standin import StandInServer

    centres = await measure(demo_site.base_url, VIEWPORT)
    oracle = DemoOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0), wrong_first_answer=True)
    out = tmp_path_factory.mktemp("export")
    tasks = out / "tasks.jsonl"
    tasks.write_text(
        json.dumps(
            {"id": "register", "task": DEMO_TASK, "url": demo_site.url("index.html"), "metadata": {"split": "train"}}
        )
        + "\n"
    )
    with StandInServer(oracle) as server:
        config = AgentConfig(
            base_url=server.base_url, model=server.model, max_steps=10, browser=BrowserSettings(viewport=VIEWPORT),
            policy_version="it-3",  # (tokens not recorded: the calls' policy is exported all the same)
        )
        batch = Batch(config, load_tasks(tasks, samples=2), out / "batch", concurrency=2)
        batch._browser = SharedBrowser.given(shared_browser)  # its sessions in the session's shared browser, not its own
        summary = await batch.run()
    assert summary.statuses == {"success": 2}
    return out / "batch"


def test_step_records_group_samples_and_reference_screenshots(batch_dir: Path):
    records = export_records(batch_dir, "step")
    assert [(r["id"], r["sample"]) for r in records][:1] == [("register#0", 0)]
    assert {r["group"] for r in records} == {"register"} and {r["sample"] for r in records} == {0, 1}
    by_sample = [[r for r in records if r["sample"] == k] for k in (0, 1)]
    for steps in by_sample:
        assert [r["step"] for r in steps] == list(range(1, len(steps) + 1))
        assert steps[-1]["action_type"] == "answer" and steps[0]["action_type"] == "click"
        assert all(r["reward"] == 1.0 and r["status"] == "success" for r in steps)
        assert all(Path(p).is_file() for r in steps for p in r["images"])
        assert steps[0]["images"] == [steps[0]["screenshot"]] and len(steps[3]["images"]) == 3
        assert steps[3]["images"][-1] == steps[3]["screenshot"]
        assert json.loads(steps[0]["action"])["target"] == "the 'Register as a member' link"
        assert steps[0]["localizer_completions"] and steps[0]["points"] and steps[0]["timings"]["total"] > 0
        assert steps[0]["timings"]["waiting"] == 0.0  # (a column in every export: the time a person took)
        assert json.loads(steps[0]["metadata"]) == {"split": "train"}
    assert any(r["retries"] == 0 for r in records)
    # every row says which policy answered, and where its run is wherever the rows are read
    assert {(r["policy"], r["policy_version"]) for r in records} == {("standin-model", "it-3")}
    results = [json.loads(line) for line in (batch_dir / "results.jsonl").read_text().splitlines()]
    assert {line["policy"] for line in results} == {"standin-model@it-3"}  # --policy-version alone: the model served
    assert all(Path(r["run_dir"]).is_absolute() and Path(r["run_dir"], "result.json").is_file() for r in records)


def test_call_records_hold_each_model_call_with_its_parsed_output(batch_dir: Path):
    calls = export_records(batch_dir, "call")
    roles = {r["role"] for r in calls}
    assert roles == {"policy", "localizer", "validator"}
    policy = [c for c in calls if c["role"] == "policy" and c["sample"] == 0]
    for call in policy:
        said, parsed = json.loads(call["completion"])["action"], json.loads(call["parsed"])
        assert {k: parsed[k] for k in said} == said and "point" not in parsed
    localizer = next(c for c in calls if c["role"] == "localizer")
    assert len(localizer["images"]) == 1 and set(json.loads(localizer["parsed"])) == {"x", "y"}
    # the exact prompt: chat messages whose image parts point at the screenshots sent; the localizer
    # continues the policy's request of the step (role continuation, the holotron profile's default)
    messages = json.loads(localizer["messages"])
    first_policy = json.loads(policy[0]["messages"])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"] and messages[:2] == first_policy
    assert {"type": "image", "path": localizer["images"][0]} in messages[1]["content"]
    assert "Target: the 'Register as a member' link" in messages[3]["content"][0]["text"]
    assert first_policy[0]["role"] == "system" and "You are the policy" in first_policy[0]["content"][0]["text"]
    assert "Task: Register as a new library member" in first_policy[1]["content"][0]["text"]
    assert "prompt" not in json.loads(policy[0]["request"])
    verdicts = [json.loads(c["parsed"])["accepted"] for c in calls if c["role"] == "validator" and c["sample"] == 0]
    assert verdicts == [False, True] or verdicts == [True]  # the oracle proposes one wrong code per server
    assert all(c["prompt_tokens"] > 0 and c["seconds"] >= 0 for c in calls)
    # without --record-tokens: each call numbered in its run (as tokens.jsonl and the trajectory rows number
    # them, not from 0 in each step), the policy that answered it recorded
    for sample in (0, 1):
        assert [c["call"] for c in calls if c["sample"] == sample] == list(range(sum(c["sample"] == sample for c in calls)))
    assert {(c["policy"], c["policy_version"], c["prompt_ids"]) for c in calls} == {("standin-model", "it-3", None)}


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_export_file_loads_with_datasets(batch_dir: Path, tmp_path: Path, fmt: str):
    import datasets
    result = CliRunner().invoke(
        app, ["export", str(batch_dir), "--format", fmt, "--per", "call", "--out", str(tmp_path / f"calls.{fmt}")]
    )
    assert result.exit_code == 0, result.output
    expected = export_records(batch_dir, "call")
    assert f"wrote {len(expected)} call record(s) from 2 run(s)" in result.output
    loaded = datasets.load_dataset(
        "json" if fmt == "jsonl" else "parquet",
        data_files=str(tmp_path / f"calls.{fmt}"),
        split="train",
        cache_dir=str(tmp_path / "hf-cache"),
    )
    assert loaded.num_rows == len(expected)
    assert loaded[0]["completion"] == expected[0]["completion"] and loaded[0]["images"] == expected[0]["images"]


def test_export_rejects_bad_arguments(tmp_path: Path):
    with pytest.raises(ConfigError, match="not a directory"):
        export_records(tmp_path / "nope")
    with pytest.raises(ConfigError, match="--per"):
        export_records(tmp_path, "episode")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--format"):
        write_records([], tmp_path / "x.csv", "csv")
    # --out a folder, or under a file: one line naming it, nothing half-written left behind
    with pytest.raises(ConfigError, match="is a directory: name the file"):
        write_records([{"a": 1}], tmp_path, "jsonl")
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"^cannot write .*file/x.jsonl: "):
        write_records([{"a": 1}], tmp_path / "file" / "x.jsonl", "jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    assert export_records(tmp_path) == []


def test_embedded_images_load_as_pictures_without_the_run_directories(batch_dir: Path, tmp_path: Path):
    import shutil

    import datasets

    copy = tmp_path / "batch"
    shutil.copytree(batch_dir, copy)
    result = CliRunner().invoke(
        app, ["export", str(copy), "--format", "parquet", "--embed-images", "--out", str(tmp_path / "steps.parquet")]
    )
    assert result.exit_code == 0, result.output
    shutil.rmtree(copy)  # nothing may point back at the run directories
    loaded = datasets.load_dataset("parquet", data_files=str(tmp_path / "steps.parquet"), split="train",
                                   cache_dir=str(tmp_path / "hf-cache"))
    assert isinstance(loaded.features["screenshot"], datasets.Image)
    first = loaded[0]
    assert first["screenshot"].size == VIEWPORT and first["step"] == 1
    assert first["images"] and all(image.size == VIEWPORT for image in first["images"])
    bad = CliRunner().invoke(app, ["export", str(batch_dir), "--format", "jsonl", "--embed-images"])
    assert bad.exit_code == 2 and "--embed-images is for --format parquet" in bad.output


def test_nothing_to_export_says_why_writes_nothing_and_fails(demo_site, tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(app, ["export", str(empty)])
    assert result.exit_code == 1, result.output
    assert f"error: nothing to export from {empty}: no run directory" in " ".join(result.output.split())
    assert list(empty.iterdir()) == []

    # a batch whose model server was closed from the start: it names no results file it did not write
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "task": "t", "url": demo_site.url("index.html")}) + "\n")
    out = tmp_path / "out"
    batch = CliRunner().invoke(app, ["batch", str(tasks), "--out", str(out), "--quiet",
                                     "--base-url", "http://127.0.0.1:9/v1", "--model", "m"])
    said = " ".join(batch.output.split())
    assert batch.exit_code == 3, batch.output
    assert "finished: no task, so no results.jsonl was written" in said and "statuses:" not in said
    assert "results.jsonl" not in said.replace("no results.jsonl was written", "") and not (out / "results.jsonl").exists()
    before = sorted(out.rglob("*"))
    result = CliRunner().invoke(app, ["export", str(out), "--per", "call"])
    assert result.exit_code == 1, result.output
    assert (f"error: nothing to export from {out}: a batch that finished no task (1 unfinished attempt(s) in "
            f"{out / 'attempts.jsonl'}: run the batch again to finish them); nothing was written") in " ".join(result.output.split())
    assert sorted(out.rglob("*")) == before
