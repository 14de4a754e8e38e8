"""A session: tasks one after another in one browser (or desktop).

    async with agent.session(url="https://shop.example") as session:
        first = await session.run("Find the cheapest lamp")
        second = await session.run("Add it to the cart")      # same page, cookies and tabs

The session owns the environment (it opens one unless the agent was given
one, and closes what it opened), the account of its earlier tasks that each
next task's prompt carries (bounded: the last few tasks, clipped), the run
control of the task in progress, and its directory: one run directory per
task (`01-<slug>/`, `02-<slug>/`, each with its result.json and report) and
`session.json`, the summary (tasks, statuses, answers, questions). Tasks run
one at a time; one started while another runs waits its turn.
`agent.run(...)` is a session of one task, without the session's files.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import uuid
import weakref
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Sequence

from surfer.tools.base import Environment

from .control import RunControl, RunHandle
from .events import HandedOver, StepStarted
from .questions import QuestionHandler
from .result import RunResult
from .run_state import check_listeners, check_task
from .rundir import claim_run_dir, default_run_dir, slugify, write_atomic

Agent = Any  # surfer.agent.loop.Agent, which makes sessions (not imported: loop imports this module)
Listener = Any

SUMMARY_FILE = "session.json"
SHOWN_TASKS, TASK_CHARS, ANSWER_CHARS = 5, 160, 240  # the account of earlier tasks stays this small
RESTARTED = "The browser was restarted after it stopped working: the pages, sign-ins and tabs of earlier tasks are gone."


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def earlier_tasks(results: list[RunResult], note: str = "") -> str:
    """The account of a session's earlier tasks for the next task's prompt: the last
    `SHOWN_TASKS`, each task and answer clipped; "" before the first task."""
    if not results:
        return ""
    lines = ["Earlier tasks in this session (the screen is where the last one ended):"]
    hidden = len(results) - SHOWN_TASKS
    if hidden > 0:
        lines.append(f"({hidden} earlier task(s) not shown)")
    for number, result in enumerate(results[-SHOWN_TASKS:], start=max(1, hidden + 1)):
        outcome = result.status
        if result.answer:
            outcome += f", answer: {_clip(result.answer, ANSWER_CHARS)}"
        elif result.question:
            outcome += f", asked: {_clip(result.question, ANSWER_CHARS)}"
        elif result.reason and result.status != "success":
            outcome += f" ({_clip(result.reason, ANSWER_CHARS)})"
        lines.append(f"{number}. {_clip(result.task, TASK_CHARS)} -> {outcome}")
    if note:
        lines.append(note)
    lines.append("The task below is the one to do now.")
    return "\n".join(lines)


CLOSED = ("this session is closed (its browser too): run the task in a new one, agent.session(...) or "
          "agent.session_sync(...), or with agent.run(...)")


class Session:
    """Tasks one after another in one environment (see the module's docstring).
    Made by `Agent.session(...)`; use it as an async context manager."""

    def __init__(
        self, agent: Agent, url: str | None = None, *, out_dir: str | Path | Literal[False] | None = None,
        on_question: QuestionHandler | None = None, answers: Any = None, listeners: Sequence[Listener] | None = None,
        adopt_environment: bool = False,
    ) -> None:
        """`adopt_environment`: take the agent's environment as the session's own — closed with the
        session, replaced when it dies — as `surfer run` does with the browser it started early."""
        self.agent = agent
        self._adopt = adopt_environment
        self._adopted = False  # the agent's environment was taken (a replacement is a new one)
        self.url = url
        self.session_id = uuid.uuid4().hex[:12]
        # like a run's directory (rundir.py): under the agent's folder for runs (runs/ by default), none
        # where the session or the agent records nothing (out_dir=False)
        if out_dir is False:
            self.directory: Path | None = None
        elif out_dir is not None:  # (refused at once if it holds anything: an earlier session's tasks and summary)
            self.directory = claim_run_dir(out_dir, "session")
        elif agent.out_dir is not False:
            self.directory = default_run_dir("session", agent.out_dir or None)
        else:
            self.directory = None
        self.on_question = on_question
        self.answers = answers
        check_listeners(listeners)
        self.listeners = list(listeners or [])
        self.results: list[RunResult] = []
        self.environment: Environment | None = None
        self._owned = False
        self._started = datetime.now(timezone.utc)
        self._turn = asyncio.Lock()
        self._note = ""  # said in the next task's account (the browser was restarted)
        self._opened = False  # a task opened the session's URL in this browser: the next ones start where it ended
        self._closed = False
        self.control: RunControl | None = None  # the task in progress
        self._started_controls: list[RunControl] = []  # of tasks started (session.start) and not yet begun

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def browser_restarted(self) -> bool:
        """Whether the next task starts in a new browser, the last one having died (its pages are gone)."""
        return bool(self._note)

    def _open_environment(self) -> Environment:
        if self.environment is None:
            given = self.agent.environment
            if given is not None and not self._adopt:
                self.environment = given  # the caller's: left open
            elif given is not None and not self._adopted:
                self.environment, self._owned, self._adopted = given, True, True  # the session's own from now on
            else:
                self.environment, self._owned = self.agent._new_environment(), True
        return self.environment

    def _task_dir(self, task: str) -> Path | Literal[False]:
        if self.directory is None:
            return False  # nothing recorded
        return self.directory / f"{len(self.results) + 1:02d}-{slugify(task)}"

    async def run(
        self, task: str, url: str | None = None, *, listeners: Sequence[Listener] | None = None, answer_schema: Any = None,
        control: RunControl | None = None, on_question: QuestionHandler | None = None, answers: Any = None,
        out_dir: str | Path | Literal[False] | None = None, agent: Agent | None = None,
    ) -> RunResult:
        """Run the next task where the last one ended (`url`: go there first; the first task
        opens the session's URL). Returns its result; errors come back as `status="error"`.
        `out_dir`: this task's run directory (default: the next one in the session directory);
        `agent`: another agent for this task (its settings and roles; the session's browser,
        account and directory stay)."""
        if self._closed:
            raise RuntimeError(CLOSED)
        check_task(task, url)  # (before the browser opens)
        check_listeners(listeners)
        async with self._turn:
            await self.renew_environment()  # it died between tasks
            env = self._open_environment()
            control = control or RunControl()
            self.control = control
            if control in self._started_controls:
                self._started_controls.remove(control)
            try:
                result = await (agent or self.agent)._run(
                    task, url or (None if self._opened else self.url),
                    self._task_dir(task) if out_dir is None else out_dir,
                    [self._watch_start, *self.listeners, *(listeners or [])], answer_schema, control,
                    on_question or self.on_question, answers if answers is not None else self.answers,
                    environment=env, earlier=earlier_tasks(self.results, self._note),
                )
            except BaseException:
                # stopped (Ctrl-C, SIGTERM, cancel), or a bug raised to the caller (a failing on_question or
                # listener, recorded `error`): the task is the session's too, and the next one numbered after it
                if control.result is not None:
                    self._note = ""
                    self.results.append(control.result)
                    await asyncio.shield(asyncio.to_thread(self._write_summary))
                raise
            finally:
                self.control = None
            self._note = ""
            self.results.append(result)
            await asyncio.to_thread(self._write_summary)
            if self._owned and (result.error_kind == "browser_crash" or not env.alive):
                await self._restart_environment()
            return result

    def _watch_start(self, event: Any) -> None:
        """A listener of the session's tasks: once one took a step, or a person took over, in this browser, its
        start URL is open (a task stopped then — its step dropped, or while the person held the controls — ended
        there, and the next one starts where it ended; one stopped before, while the browser started, did not)."""
        if isinstance(event, (StepStarted, HandedOver)):
            self._opened = True

    async def take_over(self) -> None:
        """Let a person use the browser during the task in progress: returns once the agent has
        stopped between steps and what the person does is recorded (agent/handover.py).
        `TakeOverRefused` where no person can (a headless browser), or when no task runs."""
        from .handover import TakeOverRefused

        if self._closed:
            raise TakeOverRefused("this session is closed")
        why = self.environment.hand_over_refusal() if self.environment is not None else None
        if why:
            raise TakeOverRefused(why)
        control = self.control or next(iter(self._started_controls), None)
        if control is None:
            raise TakeOverRefused("no task is running: take over during one (session.start(...))")
        await control.take_over()

    def hand_back(self) -> bool:
        """End the person's turn: the agent looks again and goes on. False when nobody held it."""
        return self.control is not None and self.control.handover.hand_back()

    def start(
        self, task: str, url: str | None = None, *, listeners: Sequence[Listener] | None = None, answer_schema: Any = None,
        out_dir: str | Path | Literal[False] | None = None, agent: Agent | None = None,
    ) -> RunHandle:
        """Start the next task in the background (inside a running event loop): a handle
        to pause, resume, hint, finish or cancel it, and await its result."""
        if self._closed:
            raise RuntimeError(CLOSED)
        check_task(task, url)
        control = RunControl()
        handle = RunHandle.started(self.run(
            task, url, listeners=listeners, answer_schema=answer_schema, control=control, out_dir=out_dir, agent=agent,
        ), control, "session", self.agent.secrets.scrub(task), url)
        self._started_controls.append(control)
        handle.when_ended(lambda: self._forget(control))  # also cancelled before its turn: no take-over waits for it
        return handle

    def _forget(self, control: RunControl) -> None:
        if control in self._started_controls:
            self._started_controls.remove(control)

    async def renew_environment(self) -> bool:
        """Replace the session's browser if it died since the last task (its pages, sign-ins
        and tabs are lost: the next task's prompt says so). Whether it was replaced."""
        if self.environment is not None and self._owned and not await self.environment.check_alive():
            await self._restart_environment()
            return True
        return False

    async def _restart_environment(self) -> None:
        old, self.environment = self.environment, None
        if old is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(old.close())
        self._note, self._opened = RESTARTED, False

    async def close(self) -> None:
        """Close what the session opened (its browser) and finish its summary."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._owned and self.environment is not None:
                await asyncio.shield(self.environment.close())
        finally:
            self.environment = None
            if self.results:
                await asyncio.to_thread(self._write_summary, True)

    def summary(self, ended: bool = False) -> dict[str, Any]:
        """What session.json holds: the session and each task's outcome."""
        tasks = []
        for number, result in enumerate(self.results, 1):
            where = None
            if result.run_dir and self.directory is not None:
                with contextlib.suppress(ValueError):
                    where = str(Path(result.run_dir).relative_to(self.directory))
            tasks.append({
                "number": number, "task": result.task, "url": result.url, "status": result.status, "answer": result.answer,
                "reason": result.reason, "question": result.question, "steps": result.steps,
                "seconds": result.timings.seconds,
                **({"waiting_seconds": result.timings.waiting_seconds} if result.timings.waiting_seconds else {}),
                **({"human_seconds": result.timings.human_seconds} if result.timings.human_seconds else {}),  # a take-over
                "run_dir": where or result.run_dir,
            })
        return {
            "session_id": self.session_id, "url": self.url, "started": self._started.isoformat(timespec="seconds"),
            **({"ended": datetime.now(timezone.utc).isoformat(timespec="seconds")} if ended else {}),
            "tasks": tasks,
        }

    def _write_summary(self, ended: bool = False) -> None:
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomic(self.directory / SUMMARY_FILE, json.dumps(self.agent.secrets.scrub_obj(self.summary(ended)), indent=2))


class SyncSession:
    """`Session` for scripts without an event loop (`Agent.session_sync`): one event loop
    lives as long as the session, so the browser stays open between tasks.

        with agent.session_sync(url=...) as session:
            first = session.run("Find the cheapest lamp")
            second = session.run("Add it to the cart")
    """

    def __init__(self, agent: Agent, url: str | None = None, **options: Any) -> None:
        from .blocking import worker_if_in_loop

        self._runner = asyncio.Runner()
        self._worker = worker_if_in_loop()  # in a notebook: the session's loop runs in a thread of its own
        # Calls from several threads at once (a web app's workers) take turns, as the tasks of a `Session` do;
        # the second one found the session's loop running ("This event loop is already running").
        self._turn = threading.Lock()
        self._open = True
        self.agent = agent
        try:
            self._session = self._run(self._make(agent, url, options))
        except BaseException:  # (a directory refused, a bad argument): its event loop and thread end with it
            self._end_loop()
            raise
        # Never closed (no `with`, no close()): closed when it is dropped, or as the interpreter exits — its browser,
        # session.json's end, its event loop (asyncio said "Task was destroyed but it is pending!" at the exit).
        self._abandoned = weakref.finalize(
            self, _close_abandoned, self._runner, self._worker, self._session, agent)

    def _run(self, coroutine: Any) -> Any:
        from .blocking import run_blocking

        return run_blocking(coroutine, self._runner, self._worker)

    @staticmethod
    async def _make(agent: Agent, url: str | None, options: dict[str, Any]) -> Session:
        return Session(agent, url, **options)  # (its lock belongs to the runner's loop)

    @property
    def results(self) -> list[RunResult]:
        return self._session.results

    @property
    def directory(self) -> Path | None:
        return self._session.directory

    def run(self, task: str, url: str | None = None, *, listeners: Sequence[Listener] | None = None, answer_schema: Any = None,
            on_question: QuestionHandler | None = None, answers: Any = None,
            out_dir: str | Path | Literal[False] | None = None) -> RunResult:
        """`Session.run`: the next task, where the last one ended; returns when it has ended."""
        with self._turn:
            if not self._open:  # (also closed by another thread while this call waited its turn)
                raise RuntimeError(CLOSED)
            return self._run(self._session.run(task, url, listeners=listeners, answer_schema=answer_schema,
                                               on_question=on_question, answers=answers, out_dir=out_dir))

    def close(self) -> None:
        with self._turn:  # (after a task another thread runs in it)
            if not self._open:
                return
            self._open = False
            self._abandoned.detach()
            try:
                self._run(self._session.close())
                self._run(self.agent.aclose())  # its HTTP clients belong to this loop, as after run_sync
            finally:
                self._end_loop()

    def _end_loop(self) -> None:
        from .blocking import call_blocking

        call_blocking(self._runner.close, self._worker)
        if self._worker is not None:
            self._worker.shutdown()

    def __enter__(self) -> "SyncSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close_abandoned(runner: asyncio.Runner, worker: Any, session: Session, agent: Agent) -> None:
    """A `SyncSession` nobody closed, closed as `close()` does, as far as it still can (at the interpreter's
    exit a notebook's worker thread may be gone): never an error from a finalizer."""
    from .blocking import call_blocking, run_blocking

    with contextlib.suppress(BaseException):
        run_blocking(session.close(), runner, worker)
        run_blocking(agent.aclose(), runner, worker)
    with contextlib.suppress(BaseException):
        call_blocking(runner.close, worker)
    if worker is not None:
        with contextlib.suppress(BaseException):
            worker.shutdown()
