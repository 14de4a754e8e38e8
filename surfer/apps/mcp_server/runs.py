"""The runs an MCP server holds: each is an asyncio task of the server's event
loop, driving one `Agent` run (its own browser session) to a run directory
under the server's runs root. A run's id is its run directory's name, so the
tools (`task_status`, `cancel_task`) and the resources
(`surfer://runs/{id}/...`) name it alike."""

from __future__ import annotations

import asyncio
import json
import logging
import time
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
CLOSED_REASON = "cancelled: the MCP server closed (its client went away, or a signal)"
CANCEL_WAIT_S = 30.0  # how long cancel_task waits for the run to write its record
ARTIFACT_TYPES = {"trace.zip": "application/zip", "video.mp4": "video/mp4", "video.webp": "image/webp"}  # --trace, --video
SCREENSHOT_TYPES = {"jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp"}


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
            "task_id": self.id, "status": self.status, "task": self.task, "url": self.url,
            "steps": result.steps if result is not None else self.steps,
            "run_dir": str(self.run_dir), "seconds": round(time.monotonic() - self.started, 2) if not done else None,
        }
        if not done:
            data.update(last_step=self.last_step, max_steps=self.max_steps)
            return {k: v for k, v in data.items() if v is not None}
        if result is not None:
            data.update(answer=result.answer, data=result.data, reason=result.reason, error_kind=result.error_kind,
                        seconds=round(result.timings.seconds, 2),
                        usage=result.usage.model_dump())
        elif self.cancelled:
            data["reason"] = self.cancel_reason + ", before the run began"
        if self.cancelled:
            data["cancelled"] = True
        data["resources"] = run_resources(self.run_dir)
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


class RunManager:
    """Starts, tracks and cancels the server's runs."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.runs: dict[str, TaskRun] = {}

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
    ) -> TaskRun:
        """Check the input and start the run (inside the server's event loop).
        Bad input raises RunRefused with the reason; nothing is started then."""
        from surfer.agent.answers import AnswerSchema
        from surfer.agent.environments import check_start_url
        from surfer.agent.loop import Agent, default_run_dir
        from surfer.core.errors import ConfigError

        if not task or not task.strip():
            raise RunRefused("task must say what to do")
        if max_steps is not None and max_steps < 1:
            raise RunRefused(f"max_steps must be at least 1, got {max_steps}")
        if max_seconds is not None and max_seconds <= 0:
            raise RunRefused(f"max_seconds must be positive, got {max_seconds}")
        cfg = self.settings.config
        try:
            if url:
                check_start_url(url, cfg)
            answer = AnswerSchema.of(answer_schema) if answer_schema else None
            limits = {k: v for k, v in (("max_steps", max_steps), ("max_seconds", max_seconds)) if v is not None}
            signin = {k: v for k, v in (("storage_state", storage_state), ("save_storage_state", save_storage_state)) if v}
            if signin:
                limits["browser"] = signin
            agent = Agent(cfg, secrets=self.settings.secrets, confirm=confirm, **limits)
            if signin:
                from surfer.agent.environments import check_browser_start

                check_browser_start(agent.config)
        except ConfigError as exc:
            raise RunRefused(str(exc)) from None
        run_dir = default_run_dir(task, self.settings.runs_root)
        holder: list[TaskRun] = []

        def on_event(event: "Event") -> Awaitable[None] | None:
            from surfer.agent.events import StepFinished

            if isinstance(event, StepFinished) and holder:
                return self._step_finished(holder[0], event.record)
            return None

        handle = agent.start(task, url, out_dir=run_dir, listeners=[on_event], answer_schema=answer)
        driver = asyncio.ensure_future(self._drive(agent, handle, holder))
        run = TaskRun(run_dir.name, task, url, run_dir, agent.config.max_steps, handle, driver)
        holder.append(run)
        self.runs[run.id] = run
        log.info("task %s started: %s", run.id, task)
        return run

    async def _step_finished(self, run: TaskRun, record: "StepRecord") -> None:
        run.steps, run.last_step = record.index, step_line(record)
        for listener in list(run.listeners):
            try:
                await listener(record)
            except Exception as exc:  # noqa: BLE001 - a listener (a client gone) never breaks the run
                log.warning("task %s: a step listener failed: %r", run.id, exc)
                run.listeners.remove(listener)

    async def _drive(self, agent: Any, handle: "RunHandle", holder: list[TaskRun]) -> "RunResult | None":
        try:
            result = await handle.result()
        except asyncio.CancelledError:
            # cancelled before the run began (no record) or the server is closing
            if not handle.done:
                handle.cancel()
            return None
        finally:
            await asyncio.shield(agent.aclose())
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
            self._stop(run, "cancelled by the MCP client (its run_task request was cancelled)")
            raise
        return run

    def _stop(self, run: TaskRun, reason: str = CANCELLED_REASON) -> None:
        if not run.driver.done():
            run.cancelled, run.cancel_reason = True, reason
            run.handle.cancel()

    async def cancel(self, run: TaskRun, reason: str = CANCELLED_REASON) -> TaskRun:
        """Stop the run: the step in progress is dropped, the browser closed, and
        result.json and report.html say it was cancelled."""
        if run.driver.done():
            return run
        self._stop(run, reason)
        done, _ = await asyncio.wait({run.driver}, timeout=CANCEL_WAIT_S)
        if not done:
            run.driver.cancel()
            await asyncio.gather(run.driver, return_exceptions=True)
        return run

    async def aclose(self) -> None:
        """The server is closing: cancel what still runs."""
        running = [run for run in self.runs.values() if not run.driver.done()]
        await asyncio.gather(*(self.cancel(run, CLOSED_REASON) for run in running), return_exceptions=True)


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
