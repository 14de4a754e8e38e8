"""Traces and videos as the commands make them: `surfer run` in a subprocess
(the browser started early, before the CLI loads, is traced too), a batch's
results.jsonl pointing at each run's files, and every command refusing a mode
that does not exist."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from surfer.agent.config import AgentConfig, BrowserSettings
from surfer.apps.cli import app
from surfer.apps.demo.oracle import DEMO_TASK, DemoOracle, frame_mapper
from surfer.fleet.batch import Batch, BatchTask, ResultsIndex
from surfer.fleet.browser_pool import SharedBrowser
from test_cli import VIEWPORT, cli, normalized, run_args


@pytest.fixture(scope="module")
async def centres(demo_site, measure):  # type: ignore[no-untyped-def]
    return await measure(demo_site.base_url, VIEWPORT)


def trace_lines(trace: Path, kind: str = ".trace") -> list[dict]:
    with zipfile.ZipFile(trace) as archive:
        return [json.loads(line) for name in archive.namelist() if name.endswith(kind)
                for line in archive.read(name).decode().splitlines() if line.strip()]


def step_groups(trace: Path) -> list[str]:
    """The titles of the trace's groups, in order."""
    return [str(e.get("title")) for e in trace_lines(trace) if e.get("type") == "before" and e.get("method") == "tracingGroup"]


async def test_surfer_run_traces_the_early_started_browser_and_links_both_files(standin, demo_site, centres, tmp_path):
    server = standin(DemoOracle(centres, normalized))
    out = tmp_path / "run"
    proc = cli(*run_args(server, demo_site, out, "--json", "--trace", "on", "--video", "on"))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "success" and result["artifacts"] == {"trace": "trace.zip", "video": "video.mp4"}
    groups = step_groups(out / "trace.zip")
    assert len(groups) == result["steps"] == 5, groups
    assert groups[0] == "step 1: click the 'Register as a member' link", groups  # named by the action and its target
    assert groups[1].startswith("step 2: type 'Ada Lovelace' into the 'Full name' text field"), groups
    assert groups[-1].startswith("step 5: answer"), groups  # the answer, no browser work, still marks its step
    # the page the early browser opened before the CLI loaded is traced: its frames and its requests
    assert any(e.get("type") == "screencast-frame" for e in trace_lines(out / "trace.zip"))
    urls = [e.get("snapshot", {}).get("request", {}).get("url", "") for e in trace_lines(out / "trace.zip", ".network")]
    assert any(u.endswith("/index.html") for u in urls) and any(u.endswith("/register.html") for u in urls), urls
    report = (out / "report.html").read_text()
    assert 'href="trace.zip"' in report and '<video controls muted src="video.mp4">' in report
    assert "show-trace trace.zip" in report


async def test_batch_results_point_at_each_runs_trace_and_video(demo_site, standin, centres, shared_browser, tmp_path):
    server = standin(DemoOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0)))
    config = AgentConfig(base_url=server.base_url, model=server.model, profile="holotron", max_steps=10, video="on",
                         browser=BrowserSettings(viewport=VIEWPORT, trace="on"))
    tasks = [BatchTask(id=i, group=i, task=DEMO_TASK, url=demo_site.url("index.html")) for i in ("a", "b")]
    batch = Batch(config, tasks, tmp_path, concurrency=2)
    batch._browser = SharedBrowser.given(shared_browser)  # its sessions in the session's shared browser, not a Chromium and a driver of its own
    summary = await batch.run()
    assert summary.statuses == {"success": 2}
    for record in ResultsIndex(tmp_path / "results.jsonl").read():
        artifacts = record["artifacts"]
        assert set(artifacts) == {"trace", "video"}, record
        assert artifacts["trace"] == f"{record['run_dir']}/trace.zip"  # relative to the batch's directory
        assert len(step_groups(tmp_path / artifacts["trace"])) == record["steps"]
        assert (tmp_path / artifacts["video"]).stat().st_size > 1000


@pytest.mark.parametrize("flag", ["--trace", "--video"])
@pytest.mark.parametrize("command", ["run", "batch", "qa"])
def test_a_mode_that_does_not_exist_is_a_usage_error_on_every_command(command, flag, tmp_path):
    target = {"run": "a task", "batch": str(tmp_path / "tasks.jsonl"), "qa": str(tmp_path / "suite.yaml")}[command]
    (tmp_path / "tasks.jsonl").write_text('{"task": "x", "url": "http://127.0.0.1:9/"}\n')
    (tmp_path / "suite.yaml").write_text("name: s\ncases:\n  - name: c\n    url: http://127.0.0.1:9/\n    task: x\n")
    result = CliRunner().invoke(app, [command, target, flag, "sometimes", "--base-url", "http://127.0.0.1:9/v1",
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert f"{flag} must be one of off, on, retain-on-failure, got 'sometimes'" in " ".join(result.output.split())
    assert not (tmp_path / "out").exists()  # refused before anything ran


def test_an_action_reads_as_a_person_would_say_it():
    from surfer.core.actions import Answer, Click, Fail, PressKeys, TypeText, headline

    assert headline(Click(target="the 'Submit' button")) == "click the 'Submit' button"
    assert headline(Click(target="a row", double=True, modifiers=["Shift"])) == "Shift+double-click a row"
    assert headline(TypeText(text="{{PASSWORD}}", target="the password field", submit=True)) == \
        "type '{{PASSWORD}}' into the password field and press Enter"
    assert headline(PressKeys(keys="Control+A")) == "press Control+A"
    assert headline({"type": "answer", "text": "x" * 500}, limit=20) == "answer '" + "x" * 19 + "…'"
    assert headline(Fail(reason="the form is gone")) == "give up: the form is gone" and headline({}) == "no action"
    assert headline(Answer(text="42")) == "answer '42'"


def test_trace_outside_the_browser_is_a_usage_error_not_silence():
    result = CliRunner().invoke(app, ["run", "a task", "--env", "desktop", "--trace", "on", "--base-url", "http://127.0.0.1:9/v1"])
    assert result.exit_code == 2, result.output
    assert "with --env desktop there is none" in " ".join(result.output.split())
