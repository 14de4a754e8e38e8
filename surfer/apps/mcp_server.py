"""`surfer mcp`: surfer as a Model Context Protocol server, so that another
agent (an MCP client) can hand it browser tasks and QA suites.

Tools: `run_task` (to the end; each step a progress notification),
`start_task` / `task_status` / `cancel_task` (long runs in the background),
`run_suite` (a QA suite). Resources: each run's `report.html`, `result.json`
and step screenshots under `surfer://runs/{run}/...`. Sensitive actions are
put to the client's user through MCP elicitation when the client supports it,
else the configured default decides (`--approve-all` / `--approve-domain`).
Built on the official `mcp` SDK (`pip install 'surfer-agent[mcp]'`)."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from surfer.agent.config import AgentConfig
from surfer.agent.events import StepFinished
from surfer.agent.loop import Agent, slugify
from surfer.agent.result import RunResult
from surfer.core.errors import ConfigError, SurferError

log = logging.getLogger(__name__)


class Approval(BaseModel):
    """What the client's user is asked before a sensitive action."""

    approve: bool = False


@dataclass
class BackgroundTask:
    id: str
    task: str
    run_dir: Path
    job: Optional[asyncio.Task[RunResult]] = None
    steps: int = 0
    last_action: str = ""
    result: Optional[RunResult] = None
    cancelled: bool = False
    events: list[str] = field(default_factory=list)

    def status(self) -> dict[str, Any]:
        if self.result is not None:
            return {"task_id": self.id, **summary(self.result)}
        return {"task_id": self.id, "status": "running", "steps": self.steps, "last_action": self.last_action,
                "run_dir": str(self.run_dir)}


def summary(result: RunResult) -> dict[str, Any]:
    """What a client gets back from a run."""
    return {
        "status": result.status, "answer": result.answer, "data": result.data, "reason": result.reason,
        "steps": result.steps, "run_dir": result.run_dir, "run": Path(result.run_dir).name if result.run_dir else None,
        "report": f"surfer://runs/{Path(result.run_dir).name}/report.html" if result.run_dir else None,
        "artifacts": result.artifacts,
    }


def _tool_error(message: str) -> Exception:
    return ToolError(message)


class SurferMcp:
    """The server's state: the configuration (as the CLI loads it), where runs go, the tasks under way."""

    def __init__(self, config: AgentConfig, out_dir: Path) -> None:
        self.config = config
        self.out_dir = out_dir
        self.tasks: dict[str, BackgroundTask] = {}

    # -- running a task ------------------------------------------------------------------

    def _config(self, max_steps: int | None, max_seconds: float | None) -> AgentConfig:
        update: dict[str, Any] = {}
        if max_steps is not None:
            if max_steps < 1:
                raise _tool_error(f"max_steps must be at least 1, got {max_steps}")
            update["max_steps"] = max_steps
        if max_seconds is not None:
            if max_seconds <= 0:
                raise _tool_error(f"max_seconds must be above 0, got {max_seconds}")
            update["max_seconds"] = max_seconds
        return self.config.model_copy(update=update)

    def _run_dir(self, task: str) -> Path:
        return self.out_dir / f"{uuid.uuid4().hex[:8]}-{slugify(task, 40)}"

    def _confirmer(self, ctx: Any) -> Any:
        """Ask the client's user when it can be asked (elicitation), else the configured default."""
        capabilities = getattr(ctx.session, "client_capabilities", None)
        can_ask = bool(getattr(capabilities, "elicitation", None))
        if not can_ask:
            return None

        async def ask(request: Any) -> bool:
            try:
                answer = await ctx.elicit(f"surfer wants to perform a sensitive action: {request.describe()}. Approve?",
                                          schema=Approval)
            except Exception as exc:  # noqa: BLE001 - a client that cannot answer refuses
                log.warning("elicitation failed (%s): refused", exc)
                return False
            return answer.action == "accept" and bool(getattr(answer.data, "approve", False))

        return ask

    async def run(self, task: str, url: str | None, max_steps: int | None, max_seconds: float | None,
                  answer_schema: dict[str, Any] | None, ctx: Any, tracker: BackgroundTask | None = None) -> RunResult:
        if not task.strip():
            raise _tool_error("task must not be empty")
        config = self._config(max_steps, max_seconds)
        if url is not None:
            from surfer.agent.environments import check_start_url

            try:
                check_start_url(url, config)
            except ConfigError as exc:
                raise _tool_error(str(exc)) from None
        run_dir = tracker.run_dir if tracker else self._run_dir(task)
        total = float(config.max_steps)

        async def progress(event: Any) -> None:
            if isinstance(event, StepFinished):
                action = event.record.action.describe() if event.record.action is not None else "no action"
                if tracker is not None:
                    tracker.steps, tracker.last_action = event.record.index, action
                if ctx is not None:
                    try:
                        await ctx.report_progress(event.record.index, total, f"step {event.record.index}: {action}")
                    except Exception:  # noqa: BLE001 - a client gone away must not stop the run
                        pass

        agent = Agent(config, confirm=self._confirmer(ctx) if ctx is not None else None)
        try:
            return await agent.run(task, url, out_dir=run_dir, listeners=[progress], answer_schema=answer_schema)
        except (ConfigError, SurferError, ValueError) as exc:
            raise _tool_error(str(exc)) from None

    # -- background tasks ----------------------------------------------------------------

    def start(self, task: str, url: str | None, max_steps: int | None, max_seconds: float | None,
              answer_schema: dict[str, Any] | None) -> BackgroundTask:
        tracker = BackgroundTask(uuid.uuid4().hex[:12], task, self._run_dir(task))

        async def body() -> RunResult:
            result = await self.run(task, url, max_steps, max_seconds, answer_schema, None, tracker)
            tracker.result = result
            return result

        tracker.job = asyncio.create_task(body(), name=f"surfer-mcp {tracker.id}")
        tracker.job.add_done_callback(lambda job: self._settle(tracker, job))
        self.tasks[tracker.id] = tracker
        return tracker

    def _settle(self, tracker: BackgroundTask, job: asyncio.Task[RunResult]) -> None:
        if tracker.result is not None:
            return
        if job.cancelled():
            result_file = tracker.run_dir / "result.json"
            if result_file.exists():
                tracker.result = RunResult.model_validate_json(result_file.read_text(encoding="utf-8"))
            else:
                tracker.result = RunResult(status="interrupted", task=tracker.task, reason="cancelled",
                                           run_dir=str(tracker.run_dir), steps=tracker.steps)
        elif job.exception() is not None:
            tracker.result = RunResult(status="error", task=tracker.task, reason=str(job.exception()),
                                       error_kind="internal", run_dir=str(tracker.run_dir), steps=tracker.steps)

    def get(self, task_id: str) -> BackgroundTask:
        tracker = self.tasks.get(task_id)
        if tracker is None:
            known = ", ".join(self.tasks) or "none"
            raise _tool_error(f"no task {task_id!r} (known: {known})")
        return tracker

    async def cancel(self, task_id: str) -> dict[str, Any]:
        tracker = self.get(task_id)
        if tracker.job is not None and not tracker.job.done():
            tracker.cancelled = True
            tracker.job.cancel()
            await asyncio.gather(tracker.job, return_exceptions=True)
        return tracker.status()

    # -- QA --------------------------------------------------------------------------------

    async def run_suite(self, path: str, variables: dict[str, str] | None) -> dict[str, Any]:
        from surfer.qa.reports import write_reports
        from surfer.qa.runner import QaRunner, SuiteRun
        from surfer.qa.suite import load_suite

        try:
            suite = load_suite(Path(path), {k: str(v) for k, v in (variables or {}).items()})
        except ConfigError as exc:
            raise _tool_error(str(exc)) from None
        out = self.out_dir / f"qa-{uuid.uuid4().hex[:8]}-{suite.slug}"
        runner = QaRunner([SuiteRun(suite, self.config, cache=None)], out)
        result = await runner.run()
        write_reports(result, out / "junit.xml", out / "index.html")
        return {
            "summary": result.line(), "out_dir": str(out), "junit": str(out / "junit.xml"), "html": str(out / "index.html"),
            "cases": [{"name": c.case.name, "status": c.status, "failure": c.failure,
                       "report": str(c.dir / "report.html")} for c in result.cases],
        }

    # -- resources -------------------------------------------------------------------------

    def run_file(self, run: str, name: str) -> Path:
        folder = (self.out_dir / run).resolve()
        target = (folder / name).resolve()
        if folder.parent != self.out_dir.resolve() or folder not in target.parents or not target.is_file():
            raise _tool_error(f"no file {name!r} in run {run!r}")
        return target


def build_server(state: SurferMcp) -> Any:
    """The MCP server over `state`: its tools and resources."""
    server = MCPServer("surfer", instructions="Browser tasks and QA suites run by surfer's computer-use agent: "
                       "run_task for a task to its end, start_task / task_status / cancel_task for long ones.")

    @server.tool()
    async def run_task(task: str, ctx: Context, url: Optional[str] = None, max_steps: Optional[int] = None,
                       max_seconds: Optional[float] = None, answer_schema: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """Run a browser task to its end: status, answer (data when answer_schema is given), reason, steps and
        the run's report. Each step is a progress notification."""
        return summary(await state.run(task, url, max_steps, max_seconds, answer_schema, ctx))

    @server.tool()
    async def start_task(task: str, url: Optional[str] = None, max_steps: Optional[int] = None,
                         max_seconds: Optional[float] = None, answer_schema: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """Start a browser task in the background; poll it with task_status, stop it with cancel_task."""
        if not task.strip():
            raise _tool_error("task must not be empty")
        return state.start(task, url, max_steps, max_seconds, answer_schema).status()

    @server.tool()
    async def task_status(task_id: str) -> dict[str, Any]:
        """A started task: running (steps so far, last action) or its result."""
        return state.get(task_id).status()

    @server.tool()
    async def cancel_task(task_id: str) -> dict[str, Any]:
        """Stop a started task; its result says interrupted (with what it did so far)."""
        return await state.cancel(task_id)

    @server.tool()
    async def run_suite(path: str, variables: Optional[dict[str, str]] = None) -> dict[str, Any]:
        """Run a QA suite (YAML) file: each case's status and report, JUnit and HTML summary paths."""
        return await state.run_suite(path, variables)

    @server.resource("surfer://runs/{run}/report.html", mime_type="text/html")
    def report(run: str) -> str:
        """A run's report page."""
        return state.run_file(run, "report.html").read_text(encoding="utf-8")

    @server.resource("surfer://runs/{run}/result.json", mime_type="application/json")
    def result(run: str) -> str:
        """A run's result."""
        return json.dumps(json.loads(state.run_file(run, "result.json").read_text(encoding="utf-8")))

    @server.resource("surfer://runs/{run}/screenshots/{name}", mime_type="image/jpeg")
    def screenshot(run: str, name: str) -> bytes:
        """A step's screenshot (step-001.jpg ...)."""
        return state.run_file(run, f"screenshots/{name}").read_bytes()

    return server
