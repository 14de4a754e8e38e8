"""The runs an MCP server holds: each is an asyncio task of the server's event
loop, driving one `Agent` run to a run directory under the server's runs
root. A run's id is its run directory's name, so the tools (`task_status`,
`cancel_task`) and the resources (`surfer://runs/{id}/...`) name it alike.

Every run is a task of a session (surfer/agent/session.py) whose browser
stays open after it: a later call that passes the returned `session_id`
continues in that browser, where the last task ended. A session idle for
`session_idle_s` is closed, and a call naming it is told so."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional

if TYPE_CHECKING:
    from surfer.agent.config import AgentConfig
    from surfer.agent.confirm import Confirmer
    from surfer.agent.control import RunHandle
    from surfer.agent.events import Event, StepRecord
    from surfer.agent.result import RunResult

log = logging.getLogger("surfer.mcp")

StepListener = Callable[["StepRecord"], Awaitable[None]]
CANCELLED_REASON = "cancelled by the MCP client (cancel_task)"
ENDED_REASON = "cancelled by the MCP client (end_session)"
CLOSED_REASON = "cancelled: the MCP server closed (its client went away, or a signal)"
CANCEL_WAIT_S = 30.0  # how long cancel_task waits for the run to write its record
LISTENER_WAIT_S = 5.0  # how long a step's progress notification may take to send (a client that stopped reading)
ARTIFACT_TYPES = {"trace.zip": "application/zip", "video.mp4": "video/mp4", "video.webp": "image/webp"}  # --trace, --video
LISTED_RUNS = 50  # resources/list: the reports and results of the most recent runs
SCREENSHOT_TYPES = {"jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp"}


def for_client(reason: Optional[str]) -> Optional[str]:
    """A run's reason as an MCP client reads it: an outage says to call the tool again (the
    command-line advice, to run `surfer run` again into a new --out, is not the client's to follow)."""
    from surfer.models.outage import AGAIN, AGAIN_PYTHON

    if not reason:
        return reason
    for advice in (text.replace("it is back", back) for text in (AGAIN, AGAIN_PYTHON) for back in ("it is back", "one is back")):
        reason = reason.replace(advice, "call run_task or start_task again once it is back (a new task, into a new run directory)")
    return reason


class RunRefused(Exception):
    """A run the server will not start or a task it does not know: the tool's error message."""


@dataclass
class ServerSettings:
    """What `surfer mcp` was started with: the CLI's configuration (file <
    environment < flags) and the pieces a QA suite merges its own settings into."""

    config: "AgentConfig"
    config_file: Optional[Path]
    flags: dict[str, Any]
    secrets: Any  # surfer.agent.secrets.Secrets
    runs_root: Path
    qa_root: Path
    session_idle_s: float = 120.0  # a session's browser is closed after this long without a task
    max_sessions: int = 8  # browsers open at once (a session each); a new session past it is refused


@dataclass
class TaskRun:
    id: str
    task: str
    url: Optional[str]
    run_dir: Path
    max_steps: int
    handle: "RunHandle"
    driver: "asyncio.Task[RunResult | None]"
    started: float = field(default_factory=time.monotonic)
    steps: int = 0
    last_step: str = ""
    cancelled: bool = False
    cancel_reason: str = CANCELLED_REASON
    result: "RunResult | None" = None
    listeners: list[StepListener] = field(default_factory=list)
    session_id: str = ""
    question: Any = None  # the agent's question waiting for answer_task (surfer.agent.questions.Question)
    reply: "asyncio.Future[Any] | None" = None
    screen: Optional[bytes] = None  # the screen the run ended on, a small JPEG (screens.py)
    behind: "TaskRun | None" = None  # the task of its session still going when it started: it begins once that ends

    @property
    def failure(self) -> Optional[str]:
        """Why the run failed without a result (its directory could not be written, a bug), or None."""
        if not self.driver.done() or self.driver.cancelled() or self.driver.exception() is None:
            return None
        exc = self.driver.exception()
        return f"the run failed: {type(exc).__name__}: {exc}"

    @property
    def status(self) -> str:
        if not self.driver.done():
            return "running"
        if self.result is not None:
            return self.result.status  # a cancelled run's record says interrupted
        return "interrupted" if self.cancelled else "error"

    def summary(self) -> dict[str, Any]:
        """What the tools return about this run: status, answer, data, reason, steps, run directory, resources."""
        result = self.result
        done = self.driver.done()
        data: dict[str, Any] = {
            "task_id": self.id, "session_id": self.session_id or None, "status": self.status, "task": self.task, "url": self.url,
            "steps": result.steps if result is not None else self.steps,
            "run_dir": str(self.run_dir), "seconds": round(time.monotonic() - self.started, 2) if not done else None,
        }
        if not done:
            data.update(last_step=self.last_step, max_steps=self.max_steps)
            if self.behind is not None and not self.behind.driver.done() and not self.steps:  # (it said running, steps 0)
                data["waiting_for_task"] = self.behind.id
            if self.question is not None:
                data.update(question=self.question.text, waiting_for_answer=True)
            return {k: v for k, v in data.items() if v is not None}
        if result is not None:
            data.update(answer=result.answer, data=result.data, reason=for_client(result.reason), error_kind=result.error_kind,
                        question=result.question,
                        seconds=round(result.timings.seconds, 2),
                        usage=result.usage.model_dump())
        elif self.cancelled:
            data["reason"] = self.cancel_reason + ", before the run began"
        elif self.failure is not None:
            data["reason"] = self.failure
        if self.cancelled:
            data["cancelled"] = True
        data["resources"] = run_resources(self.run_dir)
        return {k: v for k, v in data.items() if v is not None}


def past_runs(root: Path, limit: int = LISTED_RUNS) -> list[tuple[str, dict[str, Any]]]:
    """The most recent run directories under `root` that hold a result.json, newest first (their names
    begin with the date and time): (run id, its result). Blocking: call it off the event loop."""
    if not root.is_dir():
        return []
    found: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(root.iterdir(), key=lambda p: p.name, reverse=True):
        try:
            result = json.loads((path / "result.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):  # a session's directory, a run still going, a broken file
            continue
        if isinstance(result, dict):
            found.append((path.name, result))
        if len(found) >= limit:
            break
    return found


def past_summary(root: Path, task_id: str) -> Optional[dict[str, Any]]:
    """What task_status says of a task an earlier server ran (its id is its run directory's name under
    `root`), read from its result.json; None when there is no such run. Blocking: off the event loop."""
    if not task_id or Path(task_id).name != task_id or task_id in (".", ".."):
        return None
    run_dir = root / task_id
    try:
        result = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(result, dict):
        return None
    data = {key: result.get(key) for key in ("status", "task", "url", "steps", "answer", "data", "question", "error_kind", "usage")}
    data.update(task_id=task_id, run_dir=str(run_dir.absolute()), reason=for_client(result.get("reason")),
                seconds=(result.get("timings") or {}).get("seconds"), resources=run_resources(run_dir),
                session="closed: it was a session of an earlier surfer mcp server")
    return {k: v for k, v in data.items() if v is not None}


def run_resources(run_dir: Path) -> dict[str, Any]:
    """The `surfer://runs/{id}/...` URIs of what a run directory holds now."""
    base = f"surfer://runs/{run_dir.name}"
    found: dict[str, Any] = {}
    for name in ("report.html", "result.json", "trajectory.jsonl", *ARTIFACT_TYPES):
        if (run_dir / name).exists():
            found[name.split(".")[0]] = f"{base}/{name}"
    shots = sorted((run_dir / "screenshots").glob("step-*.*")) if (run_dir / "screenshots").is_dir() else []
    steps = []
    for shot in shots:
        number = shot.stem.removeprefix("step-")
        if number.isdigit() and shot.suffix[1:] in SCREENSHOT_TYPES:
            steps.append(f"{base}/steps/{int(number)}.{shot.suffix[1:]}")
    if steps:
        found["screenshots"] = steps
    return found


def step_line(record: "StepRecord") -> str:
    """One line per finished step, the progress notification's message."""
    action = record.action.describe() if record.action is not None else "no action"
    line = f"step {record.index}: {action}"
    if record.error:
        line += f" — error: {record.error}"
    elif record.verdicts:
        verdict = record.verdicts[-1]
        line += " — answer accepted" if verdict.accepted else f" — answer rejected: {verdict.reasons}"
    return line[:500]


@dataclass
class ServerSession:
    """A session of the server's: its browser kept between the tasks that name it."""

    id: str
    session: Any  # surfer.agent.session.Session
    busy: int = 0  # its tasks started and not ended
    used: float = field(default_factory=time.monotonic)
    closer: "asyncio.Task[None] | None" = None


class RunManager:
    """Starts, tracks and cancels the server's runs and closes idle sessions."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.runs: dict[str, TaskRun] = {}
        self.sessions: dict[str, ServerSession] = {}
        self.closed: dict[str, str] = {}  # session id -> why it was closed
        self.closing = False  # the server is closing (a signal, the client gone): what it stops, it stops for that

    def session_state(self, session_id: str) -> str:
        """"open", or why the session was closed."""
        return "open" if session_id in self.sessions else f"closed: it {self.closed.get(session_id, 'is gone')}"

    def session(self, session_id: str) -> ServerSession:
        found = self.sessions.get(session_id)
        if found is not None:
            return found
        if session_id in self.closed:
            raise RunRefused(f"session {session_id!r} {self.closed[session_id]}; leave out session_id to start a new one")
        raise RunRefused(f"unknown session id {session_id!r}; leave out session_id to start a new one")

    def get(self, task_id: str) -> TaskRun:
        run = self.runs.get(task_id)
        if run is None:
            known = ", ".join(list(self.runs)[-5:]) or "none yet"
            raise RunRefused(f"unknown task id {task_id!r} (this server's tasks: {known})")
        return run

    def start(
        self, task: str, url: Optional[str] = None, *, max_steps: Optional[int] = None,
        max_seconds: Optional[float] = None, answer_schema: Optional[dict[str, Any]] = None,
        confirm: "Confirmer | None" = None, storage_state: Optional[str] = None, save_storage_state: Optional[str] = None,
        session_id: Optional[str] = None, ask: Any = None, wait_for_answer: bool = True,
    ) -> TaskRun:
        """Check the input and start the run (inside the server's event loop), in the session
        `session_id` names (else a new one). Bad input raises RunRefused with the reason;
        nothing is started then. `ask`: who replies to the agent's questions (the client's user
        through elicitation); None: the question waits for answer_task, up to `session_idle_s`,
        or with `wait_for_answer=False` (a run_task, whose client has no task id to answer with
        until it ends) the run ends `needs_input` at once, the question in its result."""
        from surfer.agent.answers import AnswerSchema
        from surfer.agent.environments import check_start_url
        from surfer.agent.loop import Agent, default_run_dir
        from surfer.agent.run_state import check_task
        from surfer.core.errors import ConfigError

        if not task or not task.strip():
            raise RunRefused("task must say what to do")
        if max_steps is not None and max_steps < 1:
            raise RunRefused(f"max_steps must be at least 1, got {max_steps}")
        if max_seconds is not None and max_seconds <= 0:
            raise RunRefused(f"max_seconds must be positive, got {max_seconds}")
        cfg = self.settings.config
        run_dir = default_run_dir(task, self.settings.runs_root)
        holder: list[TaskRun] = []
        held = self.session(session_id) if session_id else None
        if held is not None and (storage_state or save_storage_state):
            raise RunRefused("storage_state and save_storage_state are for a new browser: leave out session_id")
        try:
            check_task(task, url)  # (a blank url raised past here: a bare tool crash, its session left busy for ever)
            if url:
                check_start_url(url, cfg)
            answer = AnswerSchema.of(answer_schema) if answer_schema else None
            limits = {k: v for k, v in (("max_steps", max_steps), ("max_seconds", max_seconds)) if v is not None}
            signin = {k: v for k, v in (("storage_state", storage_state), ("save_storage_state", save_storage_state)) if v}
            if signin:
                limits["browser"] = signin
            replier = ask if ask is not None else self._asker(holder) if wait_for_answer else None
            agent = Agent(cfg, secrets=self.settings.secrets, confirm=confirm, on_question=replier, **limits)
            if signin:
                from surfer.agent.environments import check_browser_start

                check_browser_start(agent.config)
        except ConfigError as exc:
            raise RunRefused(str(exc)) from None

        def on_event(event: "Event") -> Awaitable[None] | None:
            from surfer.agent.events import StepFinished

            if isinstance(event, StepFinished) and holder:
                return self._step_finished(holder[0], event.record)
            return None

        if held is None and len(self.sessions) >= self.settings.max_sessions:
            # (each session is a Chromium of its own: a client starting tasks in a loop opened one for each)
            open_ids = ", ".join(sorted(self.sessions))
            raise RunRefused(
                f"{len(self.sessions)} sessions are open, each with its browser (--max-sessions "
                f"{self.settings.max_sessions}): pass one's session_id to run this task after its current one, end "
                f"one with end_session, or wait for an idle one to close ({open_ids})")
        if held is None:
            from surfer.agent.session import Session

            # the session's summary (session.json) beside its tasks' run directories, never in the working directory
            try:
                session = Session(agent, url, out_dir=default_run_dir("session", self.settings.runs_root))
            except ConfigError as exc:  # --runs-dir removed, made a file or read-only since the start: the reason, not a crash
                raise RunRefused(str(exc)) from None
            held = ServerSession(uuid.uuid4().hex[:12], session)
            self.sessions[held.id] = held
        held.busy += 1
        if held.closer is not None:
            held.closer.cancel()
            held.closer = None
        behind = next((r for r in reversed(self.runs.values()) if r.session_id == held.id and not r.driver.done()), None)
        handle = held.session.start(task, url, out_dir=run_dir, listeners=[on_event], answer_schema=answer, agent=agent)
        driver = asyncio.ensure_future(self._drive(agent, handle, holder, held))
        run = TaskRun(run_dir.name, task, url, run_dir, agent.config.max_steps, handle, driver, session_id=held.id,
                      behind=behind)
        holder.append(run)
        self.runs[run.id] = run
        log.info("task %s started: %s", run.id, task)
        return run

    def _asker(self, holder: list[TaskRun]) -> Any:
        """The agent's question waits in task_status until answer_task replies (or `session_idle_s` passes:
        nobody replied, the task ends needs_input)."""

        async def ask(question: Any) -> Any:
            run = holder[0]
            run.question, run.reply = question, asyncio.get_running_loop().create_future()
            try:
                return await asyncio.wait_for(run.reply, self.settings.session_idle_s)
            except TimeoutError:
                return None
            finally:
                run.question, run.reply = None, None

        ask.__name__ = "answer_task"
        return ask

    def answer(self, run: TaskRun, text: str, secret: bool = False) -> None:
        """answer_task: the reply to the question the run waits on (an empty one leaves it unanswered)."""
        from surfer.agent.questions import Reply

        if run.reply is None or run.reply.done():
            raise RunRefused(f"task {run.id!r} is not waiting for an answer (status: {run.status})")
        run.reply.set_result(Reply(text, secret) if text.strip() else None)

    async def _step_finished(self, run: TaskRun, record: "StepRecord") -> None:
        run.steps, run.last_step = record.index, step_line(record)
        for listener in list(run.listeners):
            try:  # bounded: a client that stopped reading its stdout had the run wait for ever on its first step
                await asyncio.wait_for(listener(record), LISTENER_WAIT_S)
            except Exception as exc:  # noqa: BLE001 - a listener (a client gone, one not reading) never breaks the run
                log.warning("task %s: a step listener failed (%r); the run goes on without it", run.id, exc)
                run.listeners.remove(listener)

    async def _drive(self, agent: Any, handle: "RunHandle", holder: list[TaskRun], held: ServerSession) -> "RunResult | None":
        try:
            result = await handle.result()
            if result.status != "interrupted" and not self.closing:  # while the session is still its own
                from .screens import final_screen

                holder[0].screen = await final_screen(held.session.environment, holder[0].run_dir, result.status)
        except asyncio.CancelledError:
            # cancelled before the run began (no record) or the server is closing
            if not handle.done:
                handle.cancel()
            return None
        finally:
            await asyncio.shield(agent.aclose())
            held.busy -= 1
            held.used = time.monotonic()
            if held.busy == 0 and held.id in self.sessions:
                held.closer = asyncio.ensure_future(self._close_when_idle(held))
        run = holder[0]
        if run.cancelled and result.status == "interrupted":  # not a run that ended as the cancel came
            result.reason = run.cancel_reason
            await asyncio.to_thread(_record_cancel, run.run_dir, run.cancel_reason)
        run.result = result
        log.info("task %s %s", run.id, "cancelled" if run.cancelled else f"finished: {result.status}")
        return result

    async def wait(self, run: TaskRun) -> TaskRun:
        """Until the run ends; if the caller is cancelled (the client cancelled
        its request), the run is cancelled too."""
        try:
            await asyncio.shield(run.driver)
        except asyncio.CancelledError:
            self._stop(run, CLOSED_REASON if self.closing else "cancelled by the MCP client (its run_task request was cancelled)")
            raise
        return run

    def _stop(self, run: TaskRun, reason: str = CANCELLED_REASON) -> None:
        if not run.driver.done():
            run.cancelled, run.cancel_reason = True, reason
            run.handle.cancel()

    async def cancel(self, run: TaskRun, reason: str = CANCELLED_REASON) -> TaskRun:
        """Stop the run: the step in progress is dropped (the session keeps its browser), and
        result.json and report.html say it was cancelled."""
        if run.driver.done():
            return run
        self._stop(run, reason)
        done, _ = await asyncio.wait({run.driver}, timeout=CANCEL_WAIT_S)
        if not done:
            run.driver.cancel()
            await asyncio.gather(run.driver, return_exceptions=True)
        return run

    async def _close_when_idle(self, held: ServerSession) -> None:
        idle = self.settings.session_idle_s
        await asyncio.sleep(max(0.0, held.used + idle - time.monotonic()))
        if held.busy == 0:
            await self._close_session(held, f"was closed after {idle:g} s without a task")

    async def _close_session(self, held: ServerSession, why: str) -> None:
        if self.sessions.pop(held.id, None) is None:
            return
        self.closed[held.id] = why
        log.info("session %s %s", held.id, why)
        try:
            await held.session.close()
        except Exception as exc:  # noqa: BLE001 - a browser that died: the session is closed all the same
            log.warning("session %s: closing its browser failed: %r", held.id, exc)

    async def end_session(self, session_id: str) -> None:
        """Close a session's browser now (its running tasks are cancelled first)."""
        held = self.session(session_id)
        running = [run for run in self.runs.values() if run.session_id == held.id and not run.driver.done()]
        await asyncio.gather(*(self.cancel(run, ENDED_REASON) for run in running), return_exceptions=True)
        if held.closer is not None:
            held.closer.cancel()
        await self._close_session(held, "was ended by the client (end_session)")

    async def aclose(self) -> None:
        """The server is closing: cancel what still runs, close every session's browser."""
        running = [run for run in self.runs.values() if not run.driver.done()]
        await asyncio.gather(*(self.cancel(run, CLOSED_REASON) for run in running), return_exceptions=True)
        for held in list(self.sessions.values()):
            if held.closer is not None:
                held.closer.cancel()
            await self._close_session(held, "was closed with the server")


def _record_cancel(run_dir: Path, reason: str) -> None:
    from surfer.agent.report import render_report
    from surfer.agent.rundir import write_atomic

    saved = run_dir / "result.json"
    if not saved.exists():
        return
    result = json.loads(saved.read_text(encoding="utf-8"))
    result["reason"] = reason
    write_atomic(saved, json.dumps(result, indent=2))
    write_atomic(run_dir / "report.html", render_report(run_dir))
