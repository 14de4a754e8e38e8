"""`surfer batch`: many demo-site tasks through the real HTTP model path and
one shared Chromium; results.jsonl, atomic run directories, resume, crashes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from surfer.agent.config import AgentConfig, BrowserSettings
from surfer.fleet.batch import Batch, BatchTask, ResultsIndex, load_tasks, run_batch, run_dir_name
from surfer.fleet.batch.results import ResultLine
from surfer.apps.demo.oracle import DEMO_TASK, DemoOracle, frame_mapper
from surfer.core.errors import ConfigError
from surfer.fleet.browser_pool import SharedBrowser
from surfer.models.backend import Completion, ModelBackend, ModelRequest
from surfer.models.limits import InflightLimit
from conftest import crash_page

VIEWPORT = (1024, 700)


@pytest.fixture(scope="module")
async def centres(demo_site, measure):  # type: ignore[no-untyped-def]
    return await measure(demo_site.base_url, VIEWPORT)


@pytest.fixture
def oracle_server(standin, centres):  # type: ignore[no-untyped-def]
    oracle = DemoOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0))
    server = standin(oracle)
    server.oracle = oracle
    return server


def config_for(server) -> AgentConfig:  # type: ignore[no-untyped-def]
    return AgentConfig(
        base_url=server.base_url,
        model=server.model,
        profile="holotron",
        max_steps=10,
        browser=BrowserSettings(viewport=VIEWPORT),
    )


def demo_tasks(site, ids) -> list[BatchTask]:  # type: ignore[no-untyped-def]
    return [
        BatchTask(id=i, group=i, task=DEMO_TASK, url=site.url("index.html"), metadata={"n": n})
        for n, i in enumerate(ids)
    ]


async def crash_page_when_open(batch: Batch, marker: str, running: asyncio.Task) -> None:  # type: ignore[type-arg]
    """Crash the renderer of the session whose page URL holds `marker`, from outside."""
    while not running.done():
        browser = batch._browser.browser
        pages = [p for c in (browser.contexts if browser else []) for p in c.pages if marker in p.url]
        if pages:
            await crash_page(pages[0])
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the page to crash never opened")


def in_shared_browser(batch: Batch, browser) -> Batch:  # type: ignore[no-untyped-def]
    """The batch's sessions in the test session's shared browser (a context each), not a Chromium and a Playwright
    driver launched for it (~1 s of CPU): for tests of what a batch records, not of its browser (crash tests keep theirs)."""
    batch._browser = SharedBrowser.given(browser)
    return batch


def read_results(out: Path) -> list[dict]:
    return ResultsIndex(out / "results.jsonl").read()  # skips a torn line


async def test_batch_runs_sessions_concurrently_and_survives_a_crashed_page(demo_site, oracle_server, tmp_path):
    tasks = demo_tasks(demo_site, ["a", "b", "c"]) + [
        BatchTask(id="crash", group="crash", task="Crash.", url=demo_site.url("index.html?crash=1"))
    ]
    batch = Batch(config_for(oracle_server), tasks, tmp_path, concurrency=3, max_inflight=2)
    running = asyncio.create_task(batch.run())
    await crash_page_when_open(batch, "crash=1", running)
    summary = await running

    results = {r["id"]: r for r in read_results(tmp_path)}
    assert set(results) == {"a", "b", "c", "crash"}
    assert [results[i]["status"] for i in "abc"] == ["success"] * 3
    # the crashed page was a browser crash: the task ran once more and is recorded once
    assert results["crash"]["status"] == "success" and results["crash"]["browser_crashes"] == 1
    assert results["b"]["metadata"] == {"n": 1} and results["a"]["steps"] >= 5
    for i in "abc":
        run_dir = tmp_path / results[i]["run_dir"]
        written = json.loads((run_dir / "result.json").read_text())
        assert written["status"] == "success" and written["run_dir"] == str(run_dir)  # where it is, not its temporary name
        assert len((run_dir / "trajectory.jsonl").read_text().splitlines()) == results[i]["steps"]
    assert not [p for p in (tmp_path / "runs").iterdir() if p.name.startswith(".tmp-")]
    limit = batch.backends["policy"]
    assert isinstance(limit, InflightLimit) and 1 <= limit.peak_inflight <= 2
    assert summary.statuses == {"success": 4} and summary.stats["browser_crashes"] == 1
    for record in read_results(tmp_path):  # what docs/reference/formats.md documents (extra keys refused)
        ResultLine.model_validate(record)


async def test_crashed_page_without_retries_is_a_browser_crash_error(demo_site, oracle_server, tmp_path):
    tasks = [BatchTask(id="crash", group="crash", task="Crash.", url=demo_site.url("index.html?crash=1"))]
    batch = Batch(config_for(oracle_server), tasks, tmp_path, crash_retries=0)
    running = asyncio.create_task(batch.run())
    await crash_page_when_open(batch, "crash=1", running)
    await running
    [record] = read_results(tmp_path)
    assert record["status"] == "error" and record["error_kind"] == "browser_crash"
    assert "page crashed" in record["reason"] and record["browser_crashes"] == 1


def chromium_processes() -> list:  # type: ignore[type-arg]
    """The Chromium browser processes started by this test process (not their renderers)."""
    import psutil

    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if "chrom" in process.name() and "chrom" not in process.parent().name():
                found.append(process)
        except psutil.Error:
            continue
    return found


async def test_batch_survives_its_browser_killed_mid_batch(demo_site, oracle_server, tmp_path):
    import os
    import signal

    others = {p.pid for p in chromium_processes()}  # e.g. the session's shared browser: not ours to kill
    # three rounds of 4 sessions: one finished, one in flight when the browser dies, one after its relaunch
    batch = Batch(config_for(oracle_server), demo_tasks(demo_site, [f"t{i}" for i in range(12)]), tmp_path, concurrency=4)
    running = asyncio.create_task(batch.run())
    while batch.stats.done < 4:
        assert not running.done()
        await asyncio.sleep(0.01)
    killed = [p.pid for p in chromium_processes() if p.pid not in others]
    victim = batch._browser.browser
    assert len(killed) == 1
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    summary = await asyncio.wait_for(running, 120)  # never hangs on the dead browser

    records = read_results(tmp_path)
    assert sorted(r["id"] for r in records) == sorted(f"t{i}" for i in range(12))  # each exactly once
    assert {r["status"] for r in records} == {"success"}
    crashed = [r for r in records if r["browser_crashes"]]
    assert crashed and all(r["browser_crashes"] == 1 for r in crashed)
    assert summary.relaunches == 1 and summary.stats["browser_crashes"] == len(crashed)
    assert batch._browser.browser is not victim
    assert not [p for p in (tmp_path / "runs").iterdir() if p.name.startswith(".tmp-")]


async def test_resume_skips_finished_tasks_and_cleans_stale_temp_dirs(demo_site, oracle_server, shared_browser, tmp_path):
    finished = {"id": "a", "status": "success", "run_dir": "runs/a", "marker": "from the first run"}
    failed = {"id": "d", "status": "failed", "run_dir": "runs/d"}  # an earlier run's failure: counted, not redone
    (tmp_path / "runs" / "a").mkdir(parents=True)
    stale = tmp_path / "runs" / ".tmp-b-123abc"
    stale.mkdir()
    (stale / "trajectory.jsonl").write_text("{}\n")
    # a finished task, an interrupted one (not final) and a line torn by a crash
    (tmp_path / "results.jsonl").write_text(
        json.dumps(finished) + "\n" + json.dumps(failed) + "\n" + json.dumps({"id": "b", "status": "interrupted"}) + "\n"
        + '{"id": "c", "sta'
    )
    batch = in_shared_browser(
        Batch(config_for(oracle_server), demo_tasks(demo_site, ["a", "b", "c", "d"]), tmp_path, concurrency=2), shared_browser
    )
    summary = await batch.run()

    assert summary.skipped == 2 and summary.finished == 2
    # the success rate is the batch's, as done/total is: 3 of the 4 tasks, the earlier run's included (it said 100%)
    assert summary.stats["success_rate"] == 0.75 and "done 4/4 (skipped 2)" in batch.stats.line()
    assert " success 75% " in batch.stats.line() and summary.statuses == {"success": 3, "failed": 1}
    from surfer.apps.view.state import OutDir

    charts = OutDir(tmp_path).snapshot()["charts"]  # `surfer view`'s charts count them too
    assert charts["done"][-1] == 4 and charts["success_rate"][-1] == 0.75, charts
    records = read_results(tmp_path)
    assert [r for r in records if r["id"] == "a"] == [finished]
    assert sorted(r["id"] for r in records if r["status"] == "success") == ["a", "b", "c"]
    assert not stale.exists()
    lines = (tmp_path / "results.jsonl").read_text().splitlines()  # one whole final line per task, nothing else
    assert sorted(json.loads(line)["id"] for line in lines) == ["a", "b", "c", "d"]
    moved = [json.loads(line) for line in (tmp_path / "attempts.jsonl").read_text().splitlines()]
    assert [(r["id"], r["status"]) for r in moved] == [("b", "interrupted")]
    assert oracle_server.oracle.answers_given == 2  # a was not redone


async def test_interrupted_batch_resumes_without_redoing_finished_work(demo_site, oracle_server, shared_browser, tmp_path):
    config = config_for(oracle_server)
    tasks = demo_tasks(demo_site, ["t1", "t2", "t3", "t4"])
    first = asyncio.create_task(in_shared_browser(Batch(config, tasks, tmp_path, concurrency=2), shared_browser).run())
    def running() -> bool:  # a task finished, and another one is under way (its run directory not published yet)
        return (tmp_path / "results.jsonl").exists() and any((tmp_path / "runs").glob(".tmp-*/trajectory.jsonl"))
    while not running() and not first.done():
        await asyncio.sleep(0.02)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    kept = {r["id"]: r for r in read_results(tmp_path)}
    assert kept and len(kept) < 4
    kept_dirs = {i: (tmp_path / r["run_dir"] / "result.json").stat().st_mtime_ns for i, r in kept.items()}
    # the attempts the stop cut short say how far they got, as their own (hidden, dropped on resume) records do
    for attempt in (json.loads(line) for line in (tmp_path / "attempts.jsonl").read_text().splitlines()):
        left = [p for p in (tmp_path / "runs").glob(f".tmp-{attempt['id']}-*") if (p / "trajectory.jsonl").exists()]
        done = len((left[0] / "trajectory.jsonl").read_text().splitlines()) if left else 0
        assert (attempt["status"], attempt["steps"]) == ("interrupted", done), attempt
        assert (attempt["usage"]["prompt_tokens"] > 0) == (done > 0), attempt

    summary = await run_batch(config, tasks, tmp_path, concurrency=2)  # (run_batch's own browser)
    records = read_results(tmp_path)
    assert sorted(r["id"] for r in records) == ["t1", "t2", "t3", "t4"]  # each exactly once
    assert [r["status"] for r in records] == ["success"] * 4, records
    assert summary.skipped == len(kept)
    for i, mtime in kept_dirs.items():
        assert (tmp_path / kept[i]["run_dir"] / "result.json").stat().st_mtime_ns == mtime
    assert not [p for p in (tmp_path / "runs").iterdir() if p.name.startswith(".tmp-")]


async def test_unreachable_model_server_stops_the_batch_without_final_records(demo_site, tmp_path):
    config = AgentConfig(base_url="http://127.0.0.1:9/v1", model="m", max_steps=3)
    summary = await run_batch(config, demo_tasks(demo_site, ["x", "y", "z"]), tmp_path, concurrency=1)
    assert summary.stopped_kind == "unreachable"
    assert read_results(tmp_path) == [] and summary.statuses == {}  # an attempt is no result
    attempts = [json.loads(line) for line in (tmp_path / "attempts.jsonl").read_text().splitlines()]
    assert [(a["id"], a["status"], a["error_kind"]) for a in attempts] == [("x", "error", "unreachable")]
    ResultLine.model_validate(attempts[0])
    assert summary.unfinished == {"unreachable": 1} and summary.stats["errors"] == 0
    assert not (tmp_path / "runs" / "x").exists()  # no run directory published for it
    batch = Batch(config, demo_tasks(demo_site, ["x", "y", "z"]), tmp_path)
    assert [t.id for t in batch.pending()] == ["x", "y", "z"]  # nothing counts as finished


def test_results_written_by_an_older_version_resume_and_become_one_final_line_per_task(tmp_path):
    """An older version wrote attempts into results.jsonl (an unreachable error, then the
    success of the same task; a task interrupted): they resume as superseded, never
    counted, and the next batch over the directory leaves one final line per task."""
    from surfer.fleet.batch.results import read_results as final_lines

    lines = [
        {"id": "a", "status": "error", "error_kind": "unreachable", "reason": "server gone"},
        {"id": "b", "status": "success", "run_dir": "runs/b"},
        {"id": "a", "status": "success", "run_dir": "runs/a"},
        {"id": "c", "status": "error", "error_kind": "config"},
        {"id": "d", "status": "error", "error_kind": "internal"},
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"id": "e", "sta')
    assert [r["id"] for r in final_lines(tmp_path / "results.jsonl")] == ["b", "a", "d"]
    index = ResultsIndex(tmp_path / "results.jsonl")
    assert index.compact() == 2
    assert [(r["id"], r["status"]) for r in read_results(tmp_path)] == [("b", "success"), ("a", "success"), ("d", "error")]
    moved = [json.loads(line) for line in (tmp_path / "attempts.jsonl").read_text().splitlines()]
    assert [(r["id"], r["error_kind"], r["superseded"]) for r in moved] == [("a", "unreachable", True), ("c", "config", True)]
    assert index.compact() == 0  # nothing left to move: the file is not rewritten
    assert index.compact(retry_errors=True) == 1  # an error about to run again leaves the results too
    assert [r["id"] for r in read_results(tmp_path)] == ["b", "a"]
    with (tmp_path / "results.jsonl").open("a") as handle:
        handle.write('{"id": "f", "sta')  # torn by a crash, with nothing to move: the file is kept as it is
    assert index.compact() == 0
    asyncio.run(index.append({"id": "g", "status": "success"}))
    assert '"sta\n{"id": "g"' in (tmp_path / "results.jsonl").read_text()  # the torn line did not swallow the next one
    # saved by an editor that writes a byte order mark: the first line was lost (its task ran again on the resume)
    (tmp_path / "results.jsonl").write_text('{"id": "b", "status": "success"}\n', encoding="utf-8-sig")
    assert [r["id"] for r in read_results(tmp_path)] == ["b"]


def test_a_results_directory_holding_another_batch_is_refused_not_counted_as_done(tmp_path):
    """Another tasks file's line-<n> (or an edited task) under an id of this batch would have been skipped and
    counted as this task's success."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task": "Find the opening hours", "url": "http://shop.test/"}\n')
    line = {"id": "line-1", "status": "success", "task": "Find the opening hours", "url": "http://shop.test/"}
    (tmp_path / "results.jsonl").write_text(json.dumps(line) + "\n")
    config = AgentConfig(base_url="http://127.0.0.1:9/v1", model="m")
    assert Batch(config, load_tasks(tasks), tmp_path).pending() == []  # the same task: resumed as done
    for options, message in (({"max_inflight": 0}, "--max-inflight must be at least 1"),
                             ({"crash_retries": -1}, "--crash-retries must be 0 or more")):  # (they were NameErrors)
        with pytest.raises(ConfigError, match=message):
            Batch(config, load_tasks(tasks), tmp_path, **options)
    for other in ({"task": "Find the prices"}, {"url": "http://other.test/"}):
        (tmp_path / "results.jsonl").write_text(json.dumps({**line, **other}) + "\n")
        with pytest.raises(ConfigError, match="holds another task under id 'line-1'.*another --out"):
            Batch(config, load_tasks(tasks), tmp_path).pending()


def test_load_tasks_expands_samples_and_names_bad_lines(tmp_path):
    good = tmp_path / "tasks.jsonl"
    good.write_text('# comment\n{"task": "one", "url": "http://x", "id": "q1"}\n\n{"task": "two", "max_steps": 4}\n')
    tasks = load_tasks(good, samples=2)
    assert [(t.id, t.group, t.sample) for t in tasks] == [
        ("q1#0", "q1", 0),
        ("q1#1", "q1", 1),
        ("line-4#0", "line-4", 0),
        ("line-4#1", "line-4", 1),
    ]
    assert tasks[2].max_steps == 4
    for text, message in [
        ('{"task": "a"}\n{"task": ', "tasks.jsonl:2: not valid JSON"),
        # the formats a newcomer tries first: each says what a tasks file is
        ('[{"task": "a"}, {"task": "b"}]', r"tasks.jsonl:1: a JSON array, not a task .*one JSON object per line"),
        ("id,task\nq1,\"Find the hours, then stop\"\n", r"tasks.jsonl:1: not valid JSON \(.*\) \(this looks like CSV\); .*one JSON object per line"),
        ("- task: Find the hours\n  url: https://example.com\n", r"tasks.jsonl:1: not valid JSON \(.*\) \(this looks like YAML\)"),
        ('"Find the hours"', r"tasks.jsonl:1: \"Find the hours\", not a task; .*one JSON object per line"),
        ('{"task": "a", "sample": 3}', "tasks.jsonl:1: sample is set by --samples, not by a tasks file"),
        ('{"task": "a", "id": "x"}\n{"task": "b", "id": "x"}', "duplicate task id 'x'"),
        # an unknown key in the task line's terms (it said pydantic's "Extra inputs are not permitted")
        ('{"task": "a", "colour": 1}', r"tasks.jsonl:1: colour: unknown key; a task line has task, url, id, max_steps, "
                                       r".*expect \(anything of your own goes in metadata\)$"),
        ('{"task": "a", "max_step": 3}', r"max_step: unknown key; did you mean 'max_steps'\? \(anything of your own"),
        ('{"url": "http://x"}', "task: missing"),
        ('{"task": "  "}', "task: the task is blank"),  # (it ran, the model guessing at a goal)
        ("", "holds no tasks"),
    ]:
        good.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_tasks(good)
    with pytest.raises(ConfigError, match="does not exist"):
        load_tasks(tmp_path / "missing.jsonl")
    # a task's run directory is named by its id: letters of any script kept, the rest made safe (a hash keeps apart
    # ids that differ only there), never over a file name's length in bytes
    names = {i: run_dir_name(i) for i in ("café-1", "検索-3", "q1#0", "b/2", "b:2", "東" * 100, "東" * 100 + "x")}
    assert (names["café-1"], names["検索-3"], names["q1#0"]) == ("café-1", "検索-3", "q1#0")
    assert names["b/2"].startswith("b_2-") and names["b:2"].startswith("b_2-") and names["b/2"] != names["b:2"]
    assert len(set(names.values())) == len(names) and max(len(n.encode()) for n in names.values()) <= 180


class _Slow(ModelBackend):
    def __init__(self) -> None:
        self.now = self.peak = 0

    async def complete(self, request: ModelRequest) -> Completion:
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(0.02)
        self.now -= 1
        return Completion(text="{}")


async def test_inflight_limit_caps_concurrent_requests():
    inner = _Slow()
    limited = InflightLimit(inner, max_inflight=3)
    request = ModelRequest(messages=(), schema_name="policy")
    await asyncio.gather(*(limited.complete(request) for _ in range(12)))
    assert inner.peak == 3 and limited.peak_inflight == 3 and limited.requests == 12 and limited.inflight == 0
    with pytest.raises(ValueError, match="at least 1"):
        InflightLimit(inner, 0)


def test_batch_command_runs_tasks_file_and_refuses_bad_files(demo_site, oracle_server, tmp_path):
    from typer.testing import CliRunner

    from surfer.apps.cli import app

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"id": i, "task": DEMO_TASK, "url": demo_site.url("index.html")}) + "\n" for i in ("p", "q"))
    )
    args = [
        "batch",
        str(tasks),
        "--out",
        str(tmp_path / "out"),
        "-c",
        "2",
        "--max-inflight",
        "1",
        "--base-url",
        oracle_server.base_url,
        "--model",
        oracle_server.model,
        "--viewport",
        "1024x700",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "statuses: {'success': 2}" in result.output
    assert sorted(r["id"] for r in read_results(tmp_path / "out")) == ["p", "q"]
    # off a terminal (a CI log) the live display does not redraw: a plain line per task says how it goes
    progress = [line for line in result.output.splitlines() if line.startswith("success ")]
    assert len(progress) == 2 and "done 1/2" in progress[0] and "done 2/2" in progress[1], result.output
    assert all(line.split()[1] in ("p", "q") and " steps, " in line for line in progress), progress
    closing = [line for line in result.output.splitlines() if line.startswith("done 2/2 ")]
    assert len(closing) == 1 and " step p50 " in closing[0], result.output  # one line, never folded at 80 columns
    again = CliRunner().invoke(app, args)  # resumes: nothing left to do
    assert again.exit_code == 0 and "done 2/2 (skipped 2)" in again.output
    port = CliRunner().invoke(app, [*args, "--dashboard", "--dashboard-port", "99999"])  # (it was a traceback)
    assert port.exit_code == 2 and "--dashboard-port" in port.output, port.output
    refused = CliRunner().invoke(app, [*args[:3], str(tasks), *args[4:]], env={"COLUMNS": "200"})  # a file as --out
    assert refused.exit_code == 2 and "cannot write the batch's output directory" in refused.output, refused.output
    assert "it is a file" in refused.output and sorted(p.name for p in tmp_path.iterdir()) == ["out", "tasks.jsonl"]
    # what the batch says as it runs (--concurrency auto's choice, a server out of placement) is one line in a log
    import io

    from rich.console import Console

    from surfer.apps.batch_command import said

    log = io.StringIO()
    said(Console(file=log, width=40))("--concurrency auto: no vLLM or SGLang /metrics at http://[::1]:8000/metrics")
    assert log.getvalue() == "--concurrency auto: no vLLM or SGLang /metrics at http://[::1]:8000/metrics\n"
    tasks.write_text('{"task": "x", "id": 3}\n')
    bad = CliRunner().invoke(app, args, env={"COLUMNS": "200"})  # the path is not folded mid-name
    assert bad.exit_code == 2 and "tasks.jsonl:1" in bad.output


def test_batch_and_miniwob_resolve_profile_auto_like_run(demo_site, standin, centres, tmp_path):
    import socket

    from typer.testing import CliRunner

    from surfer.apps.cli import app

    server = standin(DemoOracle(centres, frame_mapper("normalized_1000", (1024, 700), 1.0)), model="Hcompany/Holo2-8B")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "task": DEMO_TASK, "url": demo_site.url("index.html")}) + "\n")
    common = ["--quiet", "--viewport", "1024x700", "--profile", "auto"]
    result = CliRunner().invoke(app, ["batch", str(tasks), "--out", str(tmp_path / "out"), *common,
                                      "--base-url", server.base_url, "--model", server.model])
    assert result.exit_code == 0, result.output
    assert "profile auto:" in result.output and "holo2" in result.output
    run_dir = tmp_path / "out" / read_results(tmp_path / "out")[0]["run_dir"]
    assert json.loads((run_dir / "run.json").read_text())["config"]["profile"] == "holo2"

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    result = CliRunner().invoke(app, ["batch", str(tasks), "--out", str(tmp_path / "out2"), *common, "--base-url", down])
    assert result.exit_code == 3 and "cannot reach" in result.output
    result = CliRunner().invoke(app, ["bench", "miniwob", "--oracle", "--profile", "auto", "--tasks", "click-button"])
    assert result.exit_code == 2 and "choose --profile explicitly" in result.output
