"""SDK surface: sync/async parity, typed results, per-role backends, config errors."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

import surfer
from surfer import Agent, ConfigError, RunResult, ScriptedModel

REPLIES = dict(
    policy=[{"thought": "t", "action": {"type": "scroll", "direction": "down"}}, {"thought": "t", "action": {"type": "answer", "text": "42"}}],
    validator=[{"verdict": "accept", "reasons": "ok"}],
)


def test_run_sync_and_run_agree(pages, tmp_path):
    import inspect

    from surfer.agent.session import Session, SyncSession

    def arguments(call) -> set[str]:  # type: ignore[no-untyped-def]
        return set(inspect.signature(call).parameters)

    # the twins take run's arguments (run_sync had no listeners, on_question or answers; stream none of them either)
    for twin in (Agent.run_sync, Agent.stream, Agent.start):
        assert arguments(twin) == arguments(Agent.run) - {"control"}, twin.__name__
    assert arguments(SyncSession.run) == arguments(Session.run) - {"control", "agent"}
    assert arguments(Agent.session_sync) == arguments(Agent.session)
    events: list = []
    sync_result = Agent(backend=ScriptedModel(**REPLIES)).run_sync(
        "task", url=pages.url("actions.html"), out_dir=tmp_path / "a", listeners=[events.append])
    assert type(events[0]).__name__ == "RunStarted" and events[-1].result == sync_result

    async def run_async() -> RunResult:
        agent = Agent(backend=ScriptedModel(**REPLIES))
        try:
            return await agent.run("task", url=pages.url("actions.html"), out_dir=tmp_path / "b")
        finally:
            await agent.aclose()

    async_result = asyncio.run(run_async())
    assert isinstance(sync_result, RunResult) and isinstance(async_result, RunResult)
    keep = {"status", "answer", "reason", "steps", "usage", "task", "url"}
    assert sync_result.model_dump(include=keep) == async_result.model_dump(include=keep)
    assert sync_result.status == "success" and sync_result.answer == "42" and sync_result.steps == 2
    assert (tmp_path / "a" / "result.json").exists() and (tmp_path / "b" / "result.json").exists()


def test_per_role_backends_override_the_shared_one(pages):
    shared = ScriptedModel(**REPLIES)
    validator = ScriptedModel(validator=[{"verdict": "accept", "reasons": "separate"}])
    result = Agent(backend=shared, backends={"validator": validator}).run_sync("task", url=pages.url("actions.html"))
    assert result.reason == "separate"
    assert [r.schema_name for r in validator.requests] == ["validator"]
    assert all(r.schema_name == "policy" for r in shared.requests)


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="max_steps"):
        Agent(max_steps=0)
    with pytest.raises(ConfigError, match="unknown profile 'nope'"):
        Agent(profile="nope")
    from surfer.agent.config import AgentConfig

    with pytest.raises(ConfigError, match="max_rejections"):
        Agent(AgentConfig(), max_rejections=-1)
    with pytest.raises(ConfigError, match="unknown role"):
        Agent(backends={"planner": ScriptedModel()})
    # a viewport that is neither "WxH" nor two whole numbers (a TOML `viewport = 5`): named, not a TypeError
    for viewport in (5, [1280, "a"], [1280.5, 800], [float("inf"), 800]):
        with pytest.raises(ConfigError, match=r'browser.viewport: viewport must be "WxH" or \[W, H\]'):
            Agent(browser={"viewport": viewport})
    # a Playwright context or page, or a sync-API browser, as browser=: one line (an AttributeError deep in the first run)
    from surfer import BrowserEnvironment

    class SyncBrowser:
        def new_context(self) -> None: ...

    for given, name in [(SyncBrowser(), "SyncBrowser"), (object(), "builtins.object")]:
        with pytest.raises(ConfigError, match=f"browser= takes a Playwright Browser of the async API .*{name}"):
            BrowserEnvironment(browser=given)
    # a task that says nothing, or is no string, is refused before a browser opens (it ran, or failed deep inside)
    agent = Agent(backend=ScriptedModel())
    with pytest.raises(ConfigError, match="the task is empty: say what the agent should do"):
        agent.run_sync(" \n", url="http://127.0.0.1:9/")
    with pytest.raises(TypeError, match="the task must be a str, not NoneType"):
        agent.run_sync(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="url must be a str or None, not int"):
        agent.run_sync("task", url=5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="the task is empty"), agent.session_sync() as session:
        session.run("")
    # arguments of the wrong kind, refused at once saying what each takes: they failed deep inside the first run
    # (an AttributeError, a TypeError from pathlib), at its first sensitive action or question, or not at all
    # (files="a.txt" offered the files "a", ".", "t" and "x")
    for made, message in [
        (lambda: Agent("surfer.toml"), r"not a file name: Agent\(load_config\('surfer.toml'\)\)"),
        (lambda: Agent({"max_steps": 3}), r"AgentConfig \(load_config\(...\)\), not dict: give the settings as keywords"),
        (lambda: Agent(backend=ScriptedModel), "backend= takes a ModelBackend instance .*not the class ScriptedModel"),
        (lambda: Agent(backends={"validator": "scripted"}), r"backends\['validator'\] takes a ModelBackend instance .*not str"),
        (lambda: Agent(environment="browser"), "environment= takes an Environment"),
        (lambda: Agent(confirm=True), 'confirm= takes a callable .*not bool .*sensitive_actions="approve"'),
        (lambda: Agent(on_question="yes"), "on_question= takes a callable .*answers="),
        (lambda: Agent(listeners=print), r"listeners= takes a list of callables.*listeners=\[print\]"),
        (lambda: Agent(out_dir=True), r"Agent\(out_dir=...\) takes a directory .*or False to record nothing; not True"),
        (lambda: Agent(secrets=["PASSWORD"]), "secrets= takes a mapping of name to value, not list"),
        (lambda: Agent(secrets={"PASSWORD": None}), r"got NoneType \(os.environ.get\(...\) of a variable that is not set\?\)"),
        (lambda: agent.run_sync("task", out_dir=1), "out_dir= takes a directory"),
        (lambda: agent.run_sync("task", url=" \n"), "the url is blank: give the page to start on, or None"),
        (lambda: agent.run_sync("task", listeners=print), "listeners= takes a list of callables"),
        (lambda: agent.session(listeners=print), "listeners= takes a list of callables"),
        (lambda: Agent(files="no-such-upload.txt"), "upload file no-such-upload.txt does not exist"),  # one file, whole
    ]:
        with pytest.raises(ConfigError, match=message):
            made()
    # start() without a running event loop: its run never began, and the handle waited forever
    for starter, name in [(agent, "agent"), (agent.session(), "session")]:
        with pytest.raises(ConfigError, match=rf"{name}.start\(\) runs in the background of a running event loop"):
            starter.start("task")


async def test_an_environment_opened_in_another_event_loop_is_refused_saying_what_to_do(browser_env, pages):
    """Agent(environment=BrowserEnvironment()) run with run_sync twice: the second run drove Playwright objects of
    the first one's event loop, ended since (InvalidStateError from deep inside, a traceback)."""
    env = await browser_env(pages.url("actions.html"))  # opened in this event loop
    agent = Agent(backend=ScriptedModel(**REPLIES), environment=env, out_dir=False)
    elsewhere = await asyncio.wait_for(asyncio.to_thread(agent.run_sync, "task", pages.url("actions.html")), 30)
    assert (elsewhere.status, elsewhere.error_kind) == ("error", "config"), elsewhere.reason
    assert "opened in another event loop" in elsewhere.reason and "agent.session_sync(...)" in elsewhere.reason


async def test_concurrent_streams_on_one_agent_see_only_their_own_events(pages):
    def replies(answer: str) -> dict:
        return {"thought": "t", "action": {"type": "answer", "text": answer}}

    def policy(request):  # type: ignore[no-untyped-def]
        return replies("A" if "Task: first" in request.messages[1].content[0].text else "B")

    closed: list[bool] = []

    class Model(ScriptedModel):
        async def aclose(self) -> None:
            closed.append(True)

    async with Agent(backend=Model(default={"policy": policy}), validate_answers=False) as agent:  # closed on leaving

        async def collect(task: str) -> list:
            return [event async for event in agent.stream(task, url=pages.url("actions.html"))]

        first, second = await asyncio.gather(collect("first"), collect("second"))
    assert first[0].task == "first" and first[-1].result.answer == "A"
    # every event's JSON form, as a program logging the stream writes it: no bytes, images as files
    logged = [json.loads(json.dumps(event.to_dict())) for event in first]
    assert [line["event"] for line in logged] == [type(event).__name__ for event in first]
    assert not any(isinstance(event, surfer.Observed) and "screenshot" in line for event, line in zip(first, logged))
    step = next(line["record"] for line in logged if line["event"] == "StepFinished")
    assert step["screenshot"].startswith("screenshots/step-001.") and step["action"]["type"]
    assert logged[-1]["result"]["answer"] == "A" and "reason" in logged[-1]["result"]
    assert second[0].task == "second" and second[-1].result.answer == "B"
    assert len(first) == len(second) and closed == [True]


@pytest.fixture
def runs_root(tmp_path, monkeypatch) -> Path:
    """This test's own folder for the runs given no directory (runs/ by default)."""
    from surfer.agent import rundir

    monkeypatch.setattr(rundir, "RUNS_ROOT", tmp_path / "runs", raising=False)
    return tmp_path / "runs"


def test_runs_are_recorded_by_default_each_in_a_new_directory_and_a_used_one_is_refused(pages, tmp_path, runs_root):
    url = pages.url("actions.html")
    first = Agent(backend=ScriptedModel(**REPLIES)).run_sync("Count the rows", url=url)
    run_dir = Path(first.run_dir)  # like `surfer run`: runs/<timestamp>-<slug>/ (conftest moves runs/ to a temporary folder)
    assert run_dir.parent == runs_root and run_dir.name.endswith("-count-the-rows")
    assert (run_dir / "result.json").exists() and len((run_dir / "trajectory.jsonl").read_text().splitlines()) == 2
    kept = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}

    # a directory that holds a run (or anything) is refused before anything starts: the first run stays whole
    with pytest.raises(ConfigError, match=f"run directory {re.escape(str(run_dir))} is not empty \\(it holds a run\\)"):
        Agent(backend=ScriptedModel(**REPLIES)).run_sync("Count the rows again", url=url, out_dir=run_dir)
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == kept
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is a file"):
        Agent(backend=ScriptedModel(**REPLIES)).run_sync("task", url=url, out_dir=tmp_path / "notes.txt")

    # a new or empty directory is taken as it is
    from surfer.agent.rundir import claim_run_dir

    (tmp_path / "empty").mkdir()
    assert claim_run_dir(tmp_path / "empty") == tmp_path / "empty" and claim_run_dir(tmp_path / "new") == tmp_path / "new"

    # a folder of the agent's own for its runs; out_dir=False on a call records that run nowhere
    answers = {"policy": REPLIES["policy"][1], "validator": REPLIES["validator"][0]}
    agent = Agent(backend=ScriptedModel(default=answers), out_dir=tmp_path / "mine")

    async def two_runs() -> tuple[RunResult, RunResult]:
        try:
            return await agent.run("Count the rows", url=url), await agent.run("Count the rows", url=url, out_dir=False)
        finally:
            await agent.aclose()

    recorded, unrecorded = asyncio.run(two_runs())
    assert Path(recorded.run_dir).parent == tmp_path / "mine" and (Path(recorded.run_dir) / "report.html").exists()
    assert unrecorded.status == "success" and unrecorded.run_dir is None
    assert len(list((tmp_path / "mine").iterdir())) == 1 and sorted(runs_root.iterdir()) == [run_dir]


async def test_two_runs_started_at_once_with_one_directory_never_mix(tmp_path):
    """Both pass the check for a new or empty directory before either opens it: the first to open
    it keeps it, the other is refused (error_kind config) and writes nothing into it."""
    from surfer.apps.options import DEMO_RECORDINGS
    from surfer.tools.replay import ReplayEnvironment

    same = tmp_path / "same"
    agents = [Agent(backend=ScriptedModel(**REPLIES), environment=ReplayEnvironment(DEMO_RECORDINGS / "demo-1024x768"))
              for _ in range(2)]
    results = await asyncio.gather(*(agent.run(f"Count the rows {n}", url="http://ignored.example/", out_dir=same)
                                     for n, agent in enumerate(agents)))
    first_in, refused = sorted(results, key=lambda r: r.status != "success")
    assert first_in.status == "success" and first_in.run_dir == str(same), first_in
    assert (refused.status, refused.error_kind, refused.run_dir) == ("error", "config", None), refused
    assert "was taken by another run started at the same time" in (refused.reason or "")
    steps = [json.loads(line) for line in (same / "trajectory.jsonl").read_text().splitlines()]
    meta, result = (json.loads((same / name).read_text()) for name in ("run.json", "result.json"))
    assert len(steps) == first_in.steps == 2 and meta["task"] == result["task"] == first_in.task
    assert sorted(p.name for p in same.iterdir()) == ["report.html", "result.json", "run.json", "screenshots", "trajectory.jsonl"]


async def test_a_stop_while_the_run_is_being_recorded_waits_for_the_record(tmp_path):
    """A Ctrl-C after the run ended, while its Finished event is handled (the video made, result.json written):
    the run unwinds once every listener has it, not before (the CLI then found no result.json and said nothing
    was recorded, the writing going on behind its exit)."""
    from surfer import Finished
    from surfer.apps.options import DEMO_RECORDINGS
    from surfer.tools.replay import ReplayEnvironment

    handling, handled = asyncio.Event(), []

    async def slow_listener(event) -> None:  # type: ignore[no-untyped-def]
        if isinstance(event, Finished):
            handling.set()
            await asyncio.sleep(0.2)
            handled.append(event.result.status)

    agent = Agent(backend=ScriptedModel(**REPLIES), environment=ReplayEnvironment(DEMO_RECORDINGS / "demo-1024x768"))
    run = asyncio.create_task(agent.run("Count the rows", url="http://ignored.example/", out_dir=tmp_path / "run",
                                        listeners=[slow_listener]))
    await handling.wait()
    run.cancel()  # the stop, while the record is being written
    with pytest.raises(asyncio.CancelledError):
        await run
    assert handled == ["success"] and json.loads((tmp_path / "run" / "result.json").read_text())["status"] == "success"


async def test_a_listener_that_raises_ends_the_run_also_through_an_awaitable_it_returns():
    """A listener returning a Future (`loop.run_in_executor(...)`, an Awaitable as Listener's type says) was not
    awaited: its error was lost and the run went on as if nothing had happened."""
    from surfer.apps.options import DEMO_RECORDINGS
    from surfer.tools.replay import ReplayEnvironment

    loop, ended = asyncio.get_running_loop(), []

    def write(event) -> None:  # type: ignore[no-untyped-def]
        if isinstance(event, surfer.StepFinished):
            raise OSError("the log is full")

    agent = Agent(backend=ScriptedModel(**REPLIES), out_dir=False,
                  environment=ReplayEnvironment(DEMO_RECORDINGS / "demo-1024x768"))
    with pytest.raises(OSError, match="the log is full"):
        await agent.run("Count the rows", listeners=[lambda event: loop.run_in_executor(None, write, event), ended.append])
    result = ended[-1].result
    assert (result.status, result.error_kind, result.steps) == ("error", "internal", 1), result


def test_a_run_that_never_reached_its_model_server_leaves_no_directory(pages, tmp_path, runs_root):
    for out_dir in (tmp_path / "run", None):  # its own directory, or one under runs/
        agent = Agent(base_url="http://127.0.0.1:9/v1", model="m", server_wait=0)
        result = agent.run_sync("task", url=pages.url("actions.html"), out_dir=out_dir)
        assert (result.status, result.error_kind, result.run_dir) == ("error", "unreachable", None), result
    assert not (tmp_path / "run").exists() and not runs_root.exists()


async def test_the_blocking_calls_work_where_an_event_loop_runs(tmp_path):
    # a Jupyter cell runs in an event loop: run_sync and session_sync run their own loop in a thread there
    from surfer.apps.options import DEMO_RECORDINGS
    from surfer.tools.replay import ReplayEnvironment

    def agent(*answers: str) -> Agent:
        replies = [{"thought": "t", "action": {"type": "answer", "text": a}} for a in answers]
        return Agent(backend=ScriptedModel(policy=replies), validate_answers=False, out_dir=False,
                     environment=ReplayEnvironment(DEMO_RECORDINGS / "demo-1280x800"))

    assert agent("42").run_sync("task").answer == "42"
    with agent("a", "b").session_sync() as session:
        assert [session.run("one").answer, session.run("two").answer] == ["a", "b"]
    # one refused as it is made (its directory holds something) leaves no thread behind, nor its event loop open
    import threading

    (tmp_path / "holds").write_text("x")
    with pytest.raises(ConfigError, match="session directory .* is not empty"):
        agent().session_sync(out_dir=tmp_path)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("surfer-sync")]
    # one never closed is closed when it is dropped (at the latest as the interpreter exits): its summary says it
    # ended, its thread ends (its browser was left to the exit, asyncio saying "Task was destroyed but it is pending!")
    dropped = agent("c").session_sync(out_dir=tmp_path / "dropped")
    assert dropped.run("three").answer == "c"
    del dropped
    assert "ended" in json.loads((tmp_path / "dropped" / "session.json").read_text())
    assert not [t.name for t in threading.enumerate() if t.name.startswith("surfer-sync")]

    # A stop while the caller waits stops the run in the worker (recorded interrupted), then goes on: a notebook's
    # interrupt (KeyboardInterrupt), or a Ctrl-C that asyncio.run turns into cancelling its main task. The wait went
    # on until the run ended by itself (its whole time limit, at worst).
    import _thread
    import signal

    ended: list[RunResult] = []
    stop = [_thread.interrupt_main]  # as SIGINT does

    async def interrupt_at_first_step(event) -> None:  # type: ignore[no-untyped-def]
        if isinstance(event, surfer.Finished):
            ended.append(event.result)
        elif isinstance(event, surfer.StepFinished) and event.record.index == 1:
            stop[0]()
            await asyncio.sleep(5)  # the run would go on by itself after this

    scroll = {"thought": "t", "action": {"type": "scroll", "direction": "down"}}
    scrolling = Agent(backend=ScriptedModel(default={"policy": scroll}), out_dir=False,
                      environment=ReplayEnvironment(DEMO_RECORDINGS / "demo-1280x800"))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a notebook kernel's: KeyboardInterrupt
    try:
        with pytest.raises(KeyboardInterrupt):
            scrolling.run_sync("Scroll on", listeners=[interrupt_at_first_step])
    finally:
        signal.signal(signal.SIGINT, previous)

    async def cell() -> None:
        scrolling.run_sync("Scroll on", listeners=[interrupt_at_first_step])

    waiting = asyncio.ensure_future(cell())
    stop[0] = waiting.cancel  # what asyncio.run's SIGINT handler does to its main task
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert [(result.status, result.steps) for result in ended] == [("interrupted", 1)] * 2


def test_every_event_a_run_emits_is_public_and_documented():
    """A UI that follows `agent.stream(...)` met Observed and ModelAsked (and a take-over's events), which
    `surfer` did not export, the SDK guide did not name, and the API reference showed without their fields."""
    import typing

    import surfer

    guide = (Path(__file__).parents[1] / "docs" / "guides" / "sdk.md").read_text()
    for kind in typing.get_args(surfer.Event):
        name = kind.__name__
        assert name in surfer.__all__ and getattr(surfer, name) is kind, name
        assert f"`{name}`" in guide, name
        for field in kind.__dataclass_fields__:
            assert f"`{field}`" in (kind.__doc__ or ""), f"{name}.{field}"
        assert callable(kind.to_dict), name  # each with its JSON form
    assert typing.get_type_hints(surfer.Finished)["result"] is RunResult


def test_the_sdks_types_take_what_a_typed_caller_passes():
    """What a user's type check (mypy --strict) refused: `async with contextlib.aclosing(agent.stream(...))` (the
    way to stop a run at a `break`) and `await stream.aclose()`, typed AsyncIterator; and, lists and dicts being
    invariant, `listeners=handlers` (a `list[Callable[[Event], None]]`), `files=[Path(...)]` and
    `backends={"validator": ScriptedModel()}` (a `dict[str, ScriptedModel]`)."""
    import collections.abc
    import typing

    import surfer
    from surfer.agent.session import Session, SyncSession

    for stream in (Agent.stream, surfer.rollouts):
        returned = typing.get_type_hints(stream)["return"]
        assert typing.get_origin(returned) is collections.abc.AsyncGenerator, (stream, returned)
    assert typing.get_args(typing.get_type_hints(Agent.stream)["return"])[0] == surfer.Event

    def kinds(call: object, name: str) -> set[object]:
        hints = typing.get_type_hints(call, localns={"Session": Session, "SyncSession": SyncSession})
        return {typing.get_origin(t) or t for t in typing.get_args(hints[name])}

    for call in (Agent.__init__, Agent.run, Agent.run_sync, Agent.stream, Agent.start, Agent.session, Agent.session_sync,
                 Session.__init__, Session.run, Session.start, SyncSession.run):
        assert collections.abc.Sequence in kinds(call, "listeners") and list not in kinds(call, "listeners"), call
    assert collections.abc.Sequence in kinds(Agent.__init__, "files") and list not in kinds(Agent.__init__, "files")
    assert collections.abc.Mapping in kinds(Agent.__init__, "backends") and dict not in kinds(Agent.__init__, "backends")


def test_a_path_is_taken_wherever_a_file_is_named(tmp_path):
    """`Agent(browser={"storage_state": Path(...)})` was "Input should be a valid string" (only the top-level
    shortcuts, `Agent(storage_state=Path(...))`, took one)."""
    state = tmp_path / "state.json"
    state.write_text('{"cookies": [], "origins": []}')
    browser = Agent(backend=ScriptedModel(), browser={
        "storage_state": state, "save_storage_state": tmp_path / "out.json", "upload_files": [state],
    }).config.browser
    assert (browser.storage_state, browser.save_storage_state, browser.upload_files) == (
        str(state), str(tmp_path / "out.json"), [str(state)])
    assert Agent(backend=ScriptedModel(), browser={"user_data_dir": tmp_path / "p"}).config.browser.user_data_dir == str(tmp_path / "p")


def test_every_public_class_says_what_it_is():
    """The API reference is generated from the docstrings: ScriptedModel (the SDK's way to test offline),
    AgentConfig, AnswerSchema and Secrets showed their name and nothing else."""
    import surfer

    for name in surfer.__all__:
        if name == "DesktopEnvironment":  # (needs pyautogui/mss and a display: tests/test_desktop.py)
            continue
        value = getattr(surfer, name)
        if isinstance(value, type):
            assert (value.__dict__.get("__doc__") or "").strip(), name
