"""One task run: the run around the steps. It starts the environment on the
task's URL while the model servers are checked, sets the run's clock (its
time limit, moved later while a person is waited for), hands the steps to a
`Stepper` (agent/steps.py), turns whatever ends the run — an outcome, a limit,
an error, a stop — into its `RunResult`, scores it, ends the environment's
run and announces `Finished`, which completes the run directory's record.

A task run is given what it works with: the agent's parts (`AgentParts`:
configuration, roles, layout, image rule, secrets, guards, backends), its
`RunState`, the environment (and whether it is the run's own, to close), the
run control, the event sink and the rewarder. `Agent.run` makes one per task;
a session (agent/session.py) makes one per task in its environment."""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping

from surfer.core import stopping
from surfer.core.deadline import run_deadline
from surfer.core.errors import (
    ActionFailed, ActionNotSupported, BrowserCrashed, ChromiumNotLaunched, ConfigError, EnvironmentFailure, ModelServerUnreachable, RunError, SurferError,
)
from surfer.models.backend import ModelBackend
from surfer.tools.base import Environment

from .config import AgentConfig
from .confirm import origin_of
from .control import RunControl
from .events import ErrorOccurred, Event, Finished, RunStarted
from .layouts import Layout
from .memory import Memory
from .result import RunResult
from .rewards import Rewarder
from .rundir import RunDirLost, RunDirTaken, leaves_record
from .run_state import RunState, time_limit_reason
from .secrets import Secrets
from .steps import Guards, Imaging, Roles, StepInputs, Stepper, task_prompt

FINAL_ANSWER_SHARE, FINAL_ANSWER_MAX_SECONDS = 0.2, 30.0


def final_answer_reserve(max_seconds: float) -> float:
    """Seconds kept back at the end of a run's wall time for the final-answer
    request: steps stop this much before the limit, so the whole run, final
    answer included, ends within `max_seconds`."""
    return min(FINAL_ANSWER_MAX_SECONDS, FINAL_ANSWER_SHARE * max_seconds)


def error_kind(exc: SurferError) -> str:
    if isinstance(exc, ConfigError):
        return "config"
    if isinstance(exc, ModelServerUnreachable):
        return "unreachable"
    if isinstance(exc, BrowserCrashed):
        return "browser_crash"
    if isinstance(exc, (EnvironmentFailure, RunDirLost, ActionFailed, ActionNotSupported)):
        return "environment"  # e.g. the start URL cannot be opened
    return "model" if isinstance(exc, RunError) else "internal"


@dataclass(frozen=True)
class AgentParts:
    """What an agent gives each of its task runs (read from the agent when the run starts)."""

    config: AgentConfig
    secrets: Secrets
    roles: Roles
    layout: Layout
    imaging: Imaging
    guards: Guards
    backends: Mapping[str, ModelBackend]  # per role; each distinct one is checked before the first step
    description: Mapping[str, Any]  # what RunStarted says of the agent (profile, backends, limits)


class TaskRun:
    """One task, run to its result in `environment` (see the module's docstring)."""

    def __init__(
        self, parts: AgentParts, run: RunState, environment: Environment, *, owned: bool, control: RunControl,
        emit: Callable[[Event], Awaitable[None]], rewarder: Rewarder,
    ) -> None:
        self.parts = parts
        self.run = run
        self.environment = environment
        self.owned = owned  # the run's own environment: closed when it ends
        self.control = control
        self.emit = emit
        self.rewarder = rewarder

    def stepper(self) -> Stepper:
        """The steps of this run, given their inputs."""
        parts, run = self.parts, self.run
        memory = Memory(task_prompt(run, parts.secrets), max_images=parts.layout.memory_images,
                        history_window=parts.config.history_window)
        return Stepper(StepInputs(
            roles=parts.roles.for_environment(self.environment), layout=parts.layout, imaging=parts.imaging, config=parts.config, secrets=parts.secrets,
            guards=parts.guards, environment=self.environment, memory=memory, control=self.control, emit=self.emit,
        ), run)

    async def execute(self) -> RunResult:
        run, env, emit, config = self.run, self.environment, self.emit, self.parts.config
        run.start_origin = origin_of(run.url)
        run_dir = Path(run.run_dir) if run.run_dir else None
        stepper = self.stepper()
        env.begin_run(run_dir)
        env.confirm_download = stepper.download_confirmer() if self.parts.guards.sensitive.downloads else None
        result: RunResult | None = None
        limit = time_limit_reason(config.max_seconds)
        reached_server = False  # the model servers answered the start's check
        try:
            # From here on, a stop at any moment still ends in Finished (below), which completes the record.
            await emit(RunStarted(run.run_id, run.task, run.url, run.run_dir, dict(self.parts.description)))
            # Event-loop time: asyncio.timeout_at and the backends' time_left() use the same clock.
            # The clock's limits move later while the model server is away, or a person is waited for (core/deadline.py).
            deadline = asyncio.get_running_loop().time() + config.max_seconds
            with run_deadline(deadline, final_answer_reserve(config.max_seconds)) as clock:
                try:
                    async with clock.limit() as preparing:
                        await self._prepare()
                    reached_server = True
                except TimeoutError:
                    if not preparing.expired():
                        raise
                    result = run.result("limit", reason=f"{limit} before the first step (model server check or start URL)")
                else:
                    result = await stepper.steps(clock)
        except asyncio.CancelledError:
            by = None if stopping.requested() else self.control.stopped_by  # (a stop of the process says so first)
            result = run.result("interrupted", reason=f"interrupted: stopped by {by}" if by else stopping.interrupted_reason())
            raise
        except Exception as exc:
            if stopping.requested() is not None:
                # the process is stopping: what failed (a browser killed by the same group signal) is the stop
                result = run.result("interrupted", reason=f"{stopping.interrupted_reason()} ({type(exc).__name__})")
            elif isinstance(exc, SurferError):
                result = run.result("error", reason=str(exc), error_kind=error_kind(exc))
                if isinstance(exc, (RunDirTaken, ChromiumNotLaunched)):
                    # another run's directory: nothing of this run goes into it; no browser: nothing was seen
                    result.run_dir = env.run_dir = None
                await emit(ErrorOccurred(len(run.records) or None, self.parts.secrets.scrub(str(exc)), fatal=True))
            else:
                result = run.result("error", reason=f"internal error: {exc!r}", error_kind="internal")
                await emit(ErrorOccurred(None, traceback.format_exc(), fatal=True))
                raise
        finally:
            await self._finish(result, reached_server)
        return result

    async def _finish(self, result: RunResult | None, reached_server: bool) -> None:
        """Score the result on the final page, end the environment's run (closing an own one),
        and announce `Finished` — also when closing a browser that died with the run fails."""
        env, secrets = self.environment, self.parts.secrets
        run_dir = Path(self.run.run_dir) if self.run.run_dir else None
        if result is not None and not leaves_record(result.status, result.error_kind, reached_server):
            result.run_dir = env.run_dir = None  # no directory: the writer writes nothing (rundir.py)
        if result is not None and result.run_dir is None:
            run_dir = None  # (nor does a reward function read one)
        try:
            if result is not None:
                await self.rewarder.score(result, self.run.records, run_dir, env)  # on the final page, before it closes
                result.downloads = await asyncio.shield(env.end_run(result.status))
                result.storage_state = env.kept_state
                if env.trace_file is not None:
                    if secrets:
                        from surfer.tools.browser.tracing import scrub_archive

                        await asyncio.shield(asyncio.to_thread(scrub_archive, env.trace_file, secrets.scrub))
                    result.artifacts["trace"] = env.trace_file.name
            env.confirm_download = None
            if self.owned:
                await asyncio.shield(env.close())
        except Exception:
            if stopping.requested() is None:
                raise  # (a browser that died with a stop of the whole process group fails to close: that is the stop)
        finally:  # the record is written even when closing a browser that died with the run fails
            if result is not None:
                self.control.result = result
                # The record is complete before a stop goes on: a Ctrl-C while it was written (the video made after
                # the run) found no result.json yet, said nothing was recorded, and the writing went on behind it.
                finishing = asyncio.ensure_future(self.emit(Finished(result)))
                try:
                    await asyncio.shield(finishing)
                except asyncio.CancelledError:
                    await asyncio.wait([finishing])
                    raise

    def _start_url(self) -> str | None:
        """The task's URL as the browser opens it: a secret's placeholder in it (a site's password in
        `https://user:{{PW}}@host/`, for its HTTP sign-in) is its value there, and only there; the records
        and the model keep the placeholder. A secret bound to other sites is refused."""
        url, secrets = self.run.url, self.parts.secrets
        if not url or not secrets:
            return url
        from surfer.core.actions import Goto

        refused = secrets.refusal(Goto(url=url), default=self.parts.config.allowed_domains)
        if refused is not None:
            name, host, _ = refused
            raise ConfigError(f"not opened: the start URL sends the secret {{{{{name}}}}} to {host}, which is not one of its sites")
        return secrets.reveal_url(url)

    async def _prepare(self) -> None:
        """Check the model servers while the browser starts and opens the task's URL
        (start-up takes the longer of the two, not their sum). A server that
        is down wins over a start URL that fails: its error is raised, and the
        browser's start is cancelled."""
        starting = asyncio.ensure_future(self.environment.start(self._start_url()))
        try:
            for backend in {id(b): b for b in self.parts.backends.values()}.values():
                await backend.check()
                if self.parts.config.record_tokens:
                    await backend.check_tokens()
        except BaseException:
            starting.cancel()
            with contextlib.suppress(BaseException):  # its own error, if any, comes second to the server's
                await starting
            raise
        await starting
