"""Every way a run can stop keeps its limits and its record: a wall-time limit
during a hung model call, SIGTERM (like Ctrl-C, exit 143), a second signal, and
URLs that expose local files or the browser itself."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from inprocess import surfer as command

from surfer import Agent
from surfer.core.actions import Click, CssPoint, Goto
from surfer.core.deadline import run_deadline
from surfer.core.errors import ActionFailed
from surfer.models.backend import Completion, ModelBackend, ModelRequest, Usage, run_exclusive
from surfer.models.http import Endpoint, OpenAICompatibleBackend

# `serial`: the tests that check limits and signals against the wall clock; the others wait for what they stop.
WALL_CLOCK = pytest.mark.serial

SCROLL = {"thought": "look further down", "notes": "", "action": {"type": "scroll", "direction": "down", "amount": 1}}
ANSWER = {"thought": "done", "notes": "", "action": {"type": "answer", "text": "42"}}


def scroll_then_answer(request):  # type: ignore[no-untyped-def]
    """Policy: scroll until the history shows two scrolls, then answer."""
    return ANSWER if request.text.count("scroll(") >= 2 else SCROLL


def cli_env() -> dict[str, str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    for key in ("SURFER_BASE_URL", "SURFER_MODEL", "SURFER_API_KEY", "SURFER_PROFILE"):
        env.pop(key, None)
    return env


def surfer(*args: str) -> list[str]:
    return [sys.executable, "-m", "surfer", *args]


def wait_until(check, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def run_files(run_dir: Path) -> tuple[dict, list[dict]]:
    result = json.loads((run_dir / "result.json").read_text())
    steps = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    assert (run_dir / "report.html").exists() and (run_dir / "run.json").exists()
    return result, steps


# -- the wall-time limit -------------------------------------------------------------


@WALL_CLOCK
async def test_time_limit_cuts_a_call_to_a_server_that_never_answers(standin, browser_env, pages, tmp_path):
    server = standin(scroll_then_answer, hang_after=0)
    env = await browser_env(pages.url("actions.html"))
    agent = Agent(base_url=server.base_url, model=server.model, profile="holo2", max_seconds=2, environment=env)
    started = time.monotonic()
    result = await agent.run("probe", out_dir=tmp_path / "run")
    elapsed = time.monotonic() - started
    await agent.aclose()
    assert result.status == "limit", result
    assert "time limit of 2 s reached during step 1" in result.reason and "no final answer" in result.reason
    assert elapsed < 2.0 + 1.0, elapsed  # the default 120 s request timeout and 4 retries did not hold it
    assert server.hung == 2  # the step's policy call, then the final-answer call: both cut off
    saved, steps = run_files(tmp_path / "run")
    assert saved["status"] == "limit" and steps == []  # the cut step is dropped, the record complete


@WALL_CLOCK
async def test_finished_steps_are_kept_when_a_later_call_hangs(standin, browser_env, pages, tmp_path):
    server = standin(scroll_then_answer, hang_after=2)
    env = await browser_env(pages.url("actions.html"))
    agent = Agent(base_url=server.base_url, model=server.model, profile="holo2", max_seconds=3, environment=env,
                  validate_answers=False)
    result = await agent.run("probe", out_dir=tmp_path / "run")
    await agent.aclose()
    assert result.status == "limit" and result.steps == 2
    saved, steps = run_files(tmp_path / "run")
    assert [s["action"]["type"] for s in steps] == ["scroll", "scroll"] and saved["steps"] == 2
    assert result.timings.seconds < 3.0 + 1.0


class HangsOnceThenAnswers(ModelBackend):
    """The first policy call never returns; the final-answer call answers."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ModelRequest) -> Completion:
        self.calls += 1
        if self.calls == 1:
            await asyncio.sleep(3600)
        return Completion(text=json.dumps(ANSWER), usage=Usage(10, 10))


@WALL_CLOCK
async def test_the_final_answer_gets_the_time_kept_back_for_it(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    model = HangsOnceThenAnswers()
    agent = Agent(backend=model, profile="holo2", max_seconds=2, environment=env, validate_answers=False)
    result = await agent.run("what is the answer?")
    assert result.status == "success" and result.answer == "42", result
    assert "answered at the limit (time limit of 2 s reached during step 1)" in result.reason
    assert result.timings.seconds < 2.0 + 0.5 and model.calls == 2


@WALL_CLOCK
async def test_request_timeout_scales_down_to_the_time_left_unless_set():
    default = OpenAICompatibleBackend(Endpoint(base_url="http://127.0.0.1:9/v1", model="m"))
    fixed = OpenAICompatibleBackend(Endpoint(base_url="http://127.0.0.1:9/v1", model="m", timeout=7))
    assert default.request_timeout() == 120.0 and fixed.request_timeout() == 7
    with run_deadline(asyncio.get_running_loop().time() + 5):
        assert 4.5 < default.request_timeout() <= 5.0
        assert fixed.request_timeout() == 7  # the user's own timeout is kept; the run's limit still cancels
        with run_deadline(asyncio.get_running_loop().time() + 60):  # a nested deadline never extends the outer one
            assert default.request_timeout() <= 5.0
    await default.aclose()
    await fixed.aclose()


@WALL_CLOCK
async def test_cancelling_in_process_generation_returns_at_once_and_never_overlaps():
    lock = asyncio.Lock()
    stop, running, overlaps = threading.Event(), [], []

    def generate(tag: str) -> str:
        if running:
            overlaps.append(tag)
        running.append(tag)
        stop.wait(1.0)  # a long generation that ends early when asked
        running.remove(tag)
        return tag

    first = asyncio.create_task(run_exclusive(lock, generate, "first", on_cancel=stop.set))
    await asyncio.sleep(0.1)
    started = time.monotonic()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert time.monotonic() - started < 0.2 and stop.is_set()
    stop.clear()
    assert await run_exclusive(lock, lambda: "second") == "second"
    assert overlaps == [] and not lock.locked()


@WALL_CLOCK
def test_cli_time_limit_with_a_hung_server(standin, pages, tmp_path):
    # what the command leaves (its status, --json, the record), not the process: in this process (no ~1 s of imports)
    server = standin(scroll_then_answer, hang_after=0)
    proc = command("run", "probe", "--url", pages.url("actions.html"), "--base-url", server.base_url, "--model", server.model,
                   "--profile", "holo2", "--max-seconds", "2", "--out", str(tmp_path / "run"), "--json")
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "limit" and "time limit of 2 s" in result["reason"]
    assert result["timings"]["seconds"] < 2.0 + 1.0
    saved, _ = run_files(tmp_path / "run")
    assert saved["status"] == "limit"


# -- signals --------------------------------------------------------------------------


def test_sigterm_during_a_run_keeps_the_finished_steps(standin, pages, tmp_path):
    server = standin(scroll_then_answer, hang_after=2)  # two steps finish, the third step's call hangs
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        surfer("run", "probe", "--url", pages.url("actions.html"), "--base-url", server.base_url, "--model",
               server.model, "--profile", "holo2", "--out", str(run_dir)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
    )
    wait_until(lambda: server.hung >= 1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, out + err
    assert "interrupted by SIGTERM" in out
    result, steps = run_files(run_dir)
    assert result["status"] == "interrupted" and "SIGTERM" in result["reason"]
    assert len(steps) == 2 == result["steps"]
    assert len(list((run_dir / "screenshots").iterdir())) == 2


def test_sigterm_during_a_batch_keeps_every_finished_task(standin, pages, tmp_path):
    server = standin(scroll_then_answer, hang_after=3)  # task a: scroll, scroll, answer; task b hangs
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(
        json.dumps({"id": i, "task": "probe", "url": pages.url("actions.html")}) + "\n" for i in ("a", "b", "c")
    ))
    out = tmp_path / "out"
    proc = subprocess.Popen(
        surfer("batch", str(tasks), "--out", str(out), "--concurrency", "1", "--base-url", server.base_url,
               "--model", server.model, "--profile", "holo2", "--no-validator", "--quiet"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
    )
    wait_until(lambda: server.hung >= 1)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stdout + stderr
    assert "interrupted by SIGTERM" in stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["id"], r["status"]) for r in records] == [("a", "success")]
    result, steps = run_files(out / records[0]["run_dir"])
    assert result["status"] == "success" and len(steps) == 3


SLOW_CLEANUP = """
import asyncio, sys
from surfer.apps.signals import Interrupted, run_interruptible

async def main():
    try:
        print("ready", flush=True)
        await asyncio.sleep(3600)
    finally:
        print("cleaning up", flush=True)
        await asyncio.shield(asyncio.sleep(float(sys.argv[1])))  # a cleanup that takes a while
        print("cleaned up", flush=True)

try:
    run_interruptible(main())
except Interrupted as stop:
    sys.exit(stop.exit_code)
"""


@WALL_CLOCK
def test_a_second_signal_exits_at_once():
    from surfer.apps.signals import COPY_WINDOW_S

    proc = subprocess.Popen([sys.executable, "-c", SLOW_CLEANUP, "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline().strip() == "cleaning up"  # the first signal cancelled main
    time.sleep(COPY_WINDOW_S)  # a person's second Ctrl-C, not a copy of the first signal
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)
    assert proc.returncode == 143 and time.monotonic() - started < 5
    assert "exiting at once" in proc.stderr.read()


def test_a_stop_as_the_reports_are_written_waits_for_them():
    # `surfer qa` writes JUnit and HTML after its run: a SIGTERM then left them unwritten, saying "its record is kept"
    from surfer.apps import signals

    requests = signals._requests
    previous = requests.install()  # (this process's handlers, as arm() installs them, for this test only)
    requests.began = True  # the run ended; its reports are written next
    written = []
    try:
        with pytest.raises(signals.StoppedOutsideRun) as stop:
            with signals.writing_record():
                os.kill(os.getpid(), signal.SIGTERM)  # (handled at once, in this thread)
                written.append("reports")
        assert written == ["reports"] and stop.value.exit_code == 143
    finally:
        for signum, handler in (previous or {}).items():
            signal.signal(signum, handler)
        requests.reset()


def test_a_stop_held_up_for_good_ends_the_command_at_its_deadline_with_the_stacks():
    """A cleanup that never ends (a browser, a thread or a server that never answers) kept a stopped command running
    for good (seen once in CI: `surfer run` still running 90 s after its SIGTERM)."""
    env = {**os.environ, "SURFER_STOP_DEADLINE_S": "1"}
    proc = subprocess.Popen([sys.executable, "-c", SLOW_CLEANUP, "3600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and out.split() == ["cleaning", "up"]
    assert "the stop (SIGTERM) has not ended the command in 1 s: exiting now; what held it up:" in err
    assert "Thread 0x" in err or "Current thread" in err  # every thread's stack


@WALL_CLOCK
def test_copies_of_one_signal_are_one_request():
    """GNU `timeout` signals the command, then its whole process group: the same
    SIGTERM twice within a millisecond is one stop, and the cleanup runs to its end."""
    proc = subprocess.Popen([sys.executable, "-c", SLOW_CLEANUP, "1.0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGTERM)
    time.sleep(0.05)  # delivered and handled before its copy comes (else the kernel merges the two)
    os.killpg(proc.pid, signal.SIGTERM)  # the group's copy
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 143, err
    assert out.split() == ["cleaning", "up", "cleaned", "up"] and "exiting at once" not in err


def test_the_json_line_of_a_run_stopped_before_it_began_needs_no_module_being_imported(monkeypatch):
    """The signal can come while the json module is itself being imported (seen in CI: a traceback, exit 1)."""
    import types

    from surfer.apps.signals import never_started_json

    monkeypatch.setitem(sys.modules, "json", types.ModuleType("json"))  # partly initialised: no dumps yet
    line = never_started_json(signal.SIGTERM)
    monkeypatch.undo()
    assert json.loads(line) == {"status": "interrupted", "reason": "stopped by SIGTERM before the run started", "run_dir": None}


async def test_a_run_stopped_as_it_opens_its_directory_finishes_its_record(tmp_path):
    """The run directory opens with the run's first event: a stop while it is handled (a listener still busy
    with it) ends, like any later stop, in result.json (interrupted) and the report — never a directory
    with run.json alone, which `surfer view` would show as running forever."""
    from surfer.agent.events import RunStarted

    handling = asyncio.Event()

    async def busy_with_the_start(event):  # type: ignore[no-untyped-def]
        if isinstance(event, RunStarted):
            handling.set()
            await asyncio.Event().wait()

    agent = Agent(base_url="http://127.0.0.1:9/v1", model="m", profile="holo2", listeners=[busy_with_the_start])
    running = asyncio.ensure_future(agent.run("probe", out_dir=tmp_path / "run"))
    await handling.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await agent.aclose()
    result, steps = run_files(tmp_path / "run")
    assert result["status"] == "interrupted" and steps == [], result


async def test_the_record_of_a_directory_stopped_while_opening_waits_for_it(tmp_path):
    """The writer opens the directory in a thread; a stop then does not leave it half made, and the
    result is written only once it is whole (run.json first)."""
    from surfer.agent.events import Finished, RunStarted, StepStarted
    from surfer.agent.result import RunResult
    from surfer.agent.trajectory import TrajectoryWriter

    held, release, scrubbed = threading.Event(), threading.Event(), []

    def scrub(value):  # type: ignore[no-untyped-def]
        scrubbed.append(value)
        if len(scrubbed) == 1:  # run.json's record: held while the stop comes
            held.set()
            release.wait(30)
        return value

    run_dir = tmp_path / "run"
    writer = TrajectoryWriter(run_dir, scrub=scrub)
    await writer.handle(RunStarted("r1", "probe", None, str(run_dir), {}))  # (the directory opens with the first step)
    opening = asyncio.ensure_future(writer.handle(StepStarted(1)))
    await asyncio.to_thread(held.wait, 30)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    finishing = asyncio.ensure_future(writer.handle(Finished(RunResult(status="interrupted", task="probe", run_dir=str(run_dir)))))
    try:
        done, _ = await asyncio.wait([finishing], timeout=0.3)
        assert not done and len(scrubbed) == 1  # the result waits for the directory
    finally:
        release.set()
    await finishing
    result, steps = run_files(run_dir)
    assert result["status"] == "interrupted" and steps == []


async def test_a_run_directory_deleted_during_the_run_ends_it_with_an_error_that_says_so(tmp_path):
    """Its directory deleted under a run: the run ends `error` (`environment`) naming the directory, where the
    writer's OSError came out of `surfer run` as a traceback; the live view points at no report. (A full disk is
    still raised: test_replay's batch stops on it.)"""
    import io
    import shutil

    from surfer.agent.events import StepFinished
    from surfer.apps.console import Console
    from surfer.apps.live import LiveView
    from surfer.apps.options import DEMO_RECORDINGS
    from surfer.models.scripted import ScriptedModel
    from surfer.tools.replay import ReplayEnvironment

    run_dir, out = tmp_path / "run", io.StringIO()

    def delete_it(event):  # type: ignore[no-untyped-def]
        if isinstance(event, StepFinished) and event.record.index == 1:
            shutil.rmtree(run_dir)

    agent = Agent(backend=ScriptedModel(default={"policy": SCROLL}), profile="holo2", max_steps=4,
                  environment=ReplayEnvironment(DEMO_RECORDINGS / "demo-1280x800"),
                  listeners=[delete_it, LiveView(Console(file=out, width=200), spinner=False)])
    result = await agent.run("probe", out_dir=run_dir)
    await agent.aclose()
    assert result.status == "error" and result.error_kind == "environment", result
    assert f"the run directory {run_dir} was deleted or moved during the run" in (result.reason or "") and result.steps == 2
    assert "was deleted or moved" in out.getvalue() and "report:" not in out.getvalue() and not run_dir.exists()


# -- refused URLs ---------------------------------------------------------------------


@pytest.mark.parametrize("url", [
    "file:///etc/passwd", "FILE:///etc/hostname", "javascript:document.title='owned'", "view-source:http://127.0.0.1/",
    "chrome://version", "devtools://devtools/bundled/inspector.html",
])
async def test_goto_refuses_local_files_and_browser_internals(browser_env, pages, url):
    env = await browser_env(pages.url("actions.html"))
    with pytest.raises(ActionFailed, match="refused to open"):
        await env.perform(Goto(url=url))
    assert env.page.url == pages.url("actions.html") and await env.page.title() != "owned"


async def test_a_model_asking_for_a_local_file_is_told_no(browser_env, pages, tmp_path):
    from surfer import ScriptedModel

    env = await browser_env(pages.url("actions.html"))
    goto = {"thought": "read it", "notes": "", "action": {"type": "goto", "url": "file:///etc/passwd"}}
    model = ScriptedModel(policy=[goto, ANSWER], validator=[{"verdict": "accept", "reasons": "ok"}])
    result = await Agent(backend=model, profile="holo2", environment=env).run("read /etc/passwd", out_dir=tmp_path / "run")
    assert result.status == "success"
    _, steps = run_files(tmp_path / "run")
    assert "refused to open file:///etc/passwd" in steps[0]["outcome"]["error"]
    second_policy = [r for r in model.requests if r.schema_name == "policy"][1]
    assert "file: URLs are refused" in "".join(getattr(p, "text", "") for m in second_policy.messages for p in m.content)
    assert all(not s["url"].startswith("file:") for s in steps)


async def test_a_page_link_to_a_local_file_is_refused_and_said(browser_env, pages):
    env = await browser_env(pages.url("file_link.html"))
    box = await env.page.locator("#local").bounding_box()  # geometry, as a localizer would find the drawn link
    outcome = await env.perform(Click(target="the password file link", point=CssPoint(x=box["x"] + 5, y=box["y"] + 5)))
    assert "tried to open file:///etc/passwd; local files are refused" in outcome.detail
    assert env.page.url == pages.url("file_link.html")


async def test_file_urls_open_when_the_user_allows_them_and_never_after(browser_env, tmp_path):
    local = tmp_path / "local.html"
    local.write_text("<title>local</title><h1>a local page</h1>")
    env = await browser_env(allow_file_urls=True)
    await env.perform(Goto(url=local.as_uri()))
    assert env.page.url == local.as_uri() and await env.page.title() == "local"
    env.url_policy.allow_file_urls = False  # e.g. the page was reached some other way: it is never captured
    observation = await env.observe()
    assert observation.url == "about:blank"


def test_a_file_start_url_is_a_usage_error(tmp_path):
    proc = command("run", "probe", "--url", "file:///etc/passwd", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                   "--profile", "holo2", "--out", str(tmp_path / "run"))  # (in this process: tests/inprocess.py)
    assert proc.returncode == 2, proc.stdout + proc.stderr  # refused before any server is contacted
    assert "start URL file:///etc/passwd is refused" in proc.stdout and "--allow-file-urls" in proc.stdout


def test_a_batch_task_with_a_file_url_is_a_usage_error(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "peek", "task": "read it", "url": "file:///etc/passwd"}) + "\n")
    proc = command("batch", str(tasks), "--out", str(tmp_path / "out"), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                   "--profile", "holo2", "--quiet")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "task peek: the start URL file:///etc/passwd is refused" in proc.stderr
    assert not (tmp_path / "out" / "results.jsonl").exists()
