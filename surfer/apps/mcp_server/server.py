"""The MCP server: surfer's tools and run resources on the SDK's `MCPServer`.

Tools: `run_task` (to the end, each step a progress notification),
`start_task` / `task_status` / `cancel_task` (long runs as asyncio tasks of
the server), `answer_task` (the reply to the agent's question a task waits
on), `end_session` (a session's browser closed now), `run_suite` (a
QA suite file). Every task returns a `session_id`: passed to a later
`run_task` / `start_task`, the task continues in the same browser. Resources: what a run directory
holds, as `surfer://runs/{run_id}/report.html`, `result.json`,
`trajectory.jsonl` and `steps/{n}.jpg` (or `.png`). Bad input is a tool error
(`is_error`, the reason in the text), never the server's end."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import pydantic_core
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from . import arguments as args
from .runs import ARTIFACT_TYPES, SCREENSHOT_TYPES, RunManager, RunRefused, ServerSettings, TaskRun, for_client, past_runs, past_summary, step_line

if TYPE_CHECKING:
    from surfer.agent.confirm import ConfirmationRequest, Confirmer
    from surfer.agent.events import StepRecord

log = logging.getLogger("surfer.mcp")

INSTRUCTIONS = (
    "surfer runs computer-use tasks in a real Chromium with a vision-language model. "
    "run_task runs one task to its end (progress notifications per step); for long tasks use start_task, "
    "then task_status / cancel_task. Each returns a session_id: pass it to a later run_task / start_task to continue "
    "in the same browser where the last task ended (end_session closes it; idle sessions are closed). "
    "The agent's question in run_task goes to the user through elicitation, or ends the task needs_input with the "
    "question (reply in a follow-up run_task with its session_id); in start_task it shows in task_status "
    "(waiting_for_answer) until answer_task replies. "
    "run_suite runs a QA suite file. Each run's report.html, result.json, "
    "trajectory.jsonl, step screenshots (and trace.zip / video with --trace / --video) are resources: "
    "surfer://runs/{run_id}/..."
)
RUN_ID = re.compile(r"^[^\W_][\w.-]*$")  # a run directory's name: letters and digits of any script, then also . _ -


class Answer(BaseModel):
    """What the client's user replies to the agent's question."""

    answer: str = Field(description="Your reply to the agent's question.")


def can_elicit(ctx: Context) -> bool:
    """Whether the client can ask its user (MCP elicitation) in this request."""
    try:
        capabilities = ctx.client_capabilities
    except Exception:  # noqa: BLE001 - no request context: nobody to ask
        return False
    return capabilities is not None and capabilities.elicitation is not None


def elicit_replier(ctx: Context) -> Any:
    """The agent's questions asked of the client's user (MCP elicitation) when the client can be
    asked; None when it cannot (the question then waits for answer_task)."""
    if not can_elicit(ctx):
        return None

    async def ask(question: Any) -> Any:
        from surfer.agent.questions import Reply

        try:
            reply = await ctx.elicit(f"surfer's agent asks: {question.text}", Answer)
        except Exception as exc:  # noqa: BLE001 - the client could not ask: unanswered
            log.warning("elicitation failed (%r); the question stays unanswered", exc)
            return None
        if reply.action != "accept" or not reply.data.answer.strip():
            return None
        return Reply(reply.data.answer, question.secret)

    ask.__name__ = "elicitation"
    return ask


class Approval(BaseModel):
    """What the client's user answers when surfer asks before a sensitive action."""

    approve: bool = Field(description="Perform this action?")


def elicit_confirmer(ctx: Context, settings: ServerSettings) -> "Confirmer | None":
    """Sensitive actions asked of the client's user (MCP elicitation) when the
    client can be asked; None (the configured default: deny unless approved
    by flags) when it cannot, or when the flags approve them all."""
    from surfer.agent.confirm import fixed_decision

    if settings.config.sensitive_actions == "approve" or not can_elicit(ctx):
        return None
    fallback = fixed_decision(False)

    async def confirm(request: "ConfirmationRequest") -> bool:
        try:
            answer = await ctx.elicit(f"surfer asks before a sensitive action — {request.describe()}. Allow it?", Approval)
        except Exception as exc:  # noqa: BLE001 - the client could not ask: the default decides
            log.warning("elicitation failed (%r); the configured default decides", exc)
            return bool(fallback(request))
        return answer.action == "accept" and bool(answer.data.approve)

    return confirm


class SurferServer(MCPServer):
    """The SDK's server, its resources/list holding the past runs under --runs-dir (a client lists
    what its user may open; the templates alone needed a run id it had no way to learn)."""

    def __init__(self, runs_root: Path, **options: Any) -> None:
        super().__init__("surfer", **options)
        self.runs_root = runs_root

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """The SDK's, with arguments that fail validation said on one line, per argument (its text was pydantic's
        several lines with a link to pydantic's error pages)."""
        from pydantic import ValidationError

        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError) or type(exc) is not ToolError:
                raise
            said = "; ".join(f"{'.'.join(str(p) for p in error['loc']) or 'arguments'}: {error['msg']}" for error in cause.errors())
            raise ToolError(f"{name}: bad arguments: {said}") from cause

    async def list_resources(self) -> list[Any]:
        from mcp_types import Resource

        listed = await super().list_resources()
        for run_id, result in await asyncio.to_thread(past_runs, self.runs_root):
            if not RUN_ID.match(run_id):
                continue
            title = f"{str(result.get('task') or run_id)[:120]} — {result.get('status')}"
            for name, mime, what in (("report.html", "text/html", "report"), ("result.json", "application/json", "result")):
                listed.append(Resource(uri=f"surfer://runs/{run_id}/{name}", name=f"{run_id}/{name}", title=title,
                                       description=f"The {what} of run {run_id}.", mime_type=mime))
        return listed


def _tool_result(run: TaskRun) -> CallToolResult:
    """What run_task returns: the summary (structured, and as JSON text), the screen the run ended on as an image
    (small JPEG), and `isError` for a run that ended in status error (its page did not open, the model server
    went away, ...), the reason first in its text, as MCP's tool failures are."""
    import base64

    from mcp_types import ImageContent, TextContent

    summary = run.summary()
    content: list[Any] = [TextContent(type="text", text=pydantic_core.to_json(summary, fallback=str, indent=2).decode())]
    failed = run.status == "error"
    if failed:
        result = run.result
        kind = result.error_kind if result is not None else None
        what = {"unreachable": "model server unreachable", "config": "bad configuration"}.get(kind or "", "the task ended in error")
        where = f" (run directory {run.run_dir})" if result is None or result.run_dir else ""  # none: nothing was recorded
        content.insert(0, TextContent(type="text", text=f"{what}: {summary.get('reason') or 'no reason given'}{where}"))
    if run.screen:
        content.append(ImageContent(type="image", data=base64.b64encode(run.screen).decode("ascii"), mime_type="image/jpeg"))
    return CallToolResult(content=content, structured_content=summary, is_error=failed)


def build_server(settings: ServerSettings) -> tuple[MCPServer, RunManager]:
    from surfer import __version__

    runs = RunManager(settings)
    server = SurferServer(settings.runs_root, version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    def start(ctx: Optional[Context], task: str, url: Optional[str], max_steps: Optional[int],
              max_seconds: Optional[float], answer_schema: Optional[dict[str, Any]],
              storage_state: Optional[str] = None, save_storage_state: Optional[str] = None,
              session_id: Optional[str] = None) -> TaskRun:
        confirm = elicit_confirmer(ctx, settings) if ctx is not None else None
        try:
            return runs.start(task, url, max_steps=max_steps, max_seconds=max_seconds, answer_schema=answer_schema,
                              confirm=confirm, storage_state=storage_state, save_storage_state=save_storage_state,
                              session_id=session_id, ask=elicit_replier(ctx) if ctx is not None else None,
                              wait_for_answer=ctx is None)  # run_task: its client has no task id for answer_task
        except RunRefused as exc:
            raise ToolError(str(exc)) from None

    @server.tool()
    async def run_task(
        task: args.Task, ctx: Context, url: args.Url = None, max_steps: args.MaxSteps = None,
        max_seconds: args.MaxSeconds = None, answer_schema: args.AnswerSchema = None,
        storage_state: args.StorageState = None, save_storage_state: args.SaveStorageState = None,
        session_id: args.SessionId = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        """Run one task in a real browser to its end: status (success, failed, limit, stuck,
        needs_approval, needs_input with the agent's question, error), answer, data (with
        answer_schema, a JSON Schema the answer's data must follow), reason, steps, run_dir, the
        run's resources and session_id, with an image of the screen it ended on; a run that ended in
        status error is a tool error (isError) with the reason. The agent's questions are asked of the user through
        elicitation; a client without it gets needs_input at once (reply with a follow-up run_task
        in the same session_id). Each finished step is a progress notification when the
        request carries a progressToken. session_id (from an earlier call): continue in that
        session's browser, where its last task ended (url: go there first). storage_state: a
        Playwright storage-state file on the server's machine to start signed in; save_storage_state:
        where to write the browser's state when the run succeeds (mode 0600; never returned or served)."""
        run = start(ctx, task, url, max_steps, max_seconds, answer_schema, storage_state, save_storage_state, session_id)

        async def progress(record: "StepRecord") -> None:
            await ctx.report_progress(record.index, run.max_steps, step_line(record))

        run.listeners.append(progress)
        try:
            await runs.wait(run)
        except Exception:  # noqa: BLE001 - said to the client (the SDK's error said only 'Error executing tool')
            log.exception("task %s failed", run.id)
            raise ToolError(str(run.failure)) from None
        return _tool_result(run)

    @server.tool()
    async def start_task(
        task: args.Task, url: args.Url = None, max_steps: args.MaxSteps = None,
        max_seconds: args.MaxSeconds = None, answer_schema: args.AnswerSchema = None,
        storage_state: args.StorageState = None, save_storage_state: args.SaveStorageState = None,
        session_id: args.SessionId = None,
    ) -> dict[str, Any]:
        """Start a task in the background and return its task_id and session_id at once; follow it
        with task_status, stop it with cancel_task. Sensitive actions follow the server's default
        (refused unless it was started with --approve-all or --approve-domain). storage_state,
        save_storage_state and session_id as in run_task."""
        run = start(None, task, url, max_steps, max_seconds, answer_schema, storage_state, save_storage_state, session_id)
        return run.summary()

    @server.tool()
    async def task_status(task_id: args.TaskId) -> dict[str, Any]:
        """A task's status (running, or its final status), steps so far and the last step; when it
        has ended, its answer, data, reason and resources; and whether its session is still open.
        A task of an earlier server under the same --runs-dir is read from its run directory."""
        try:
            run = runs.get(task_id)
        except RunRefused as exc:
            return await past(task_id, exc)
        return {**run.summary(), "session": runs.session_state(run.session_id)}

    async def past(task_id: str, unknown: RunRefused) -> dict[str, Any]:
        found = await asyncio.to_thread(past_summary, settings.runs_root, task_id)
        if found is None:
            raise ToolError(str(unknown))
        return found

    @server.tool()
    async def cancel_task(task_id: args.TaskId) -> dict[str, Any]:
        """Stop a running task: the step in progress is dropped (its session keeps the browser), and the run
        directory records it (status interrupted). A task that already ended is left as it is."""
        try:
            run = runs.get(task_id)
        except RunRefused as exc:
            return await past(task_id, exc)  # an earlier server's task ended with that server
        await runs.cancel(run)
        return run.summary()

    @server.tool()
    async def answer_task(task_id: args.TaskId, answer: args.Reply, secret: args.Secret = False) -> dict[str, Any]:
        """Reply to the question a running task waits on (task_status shows it with
        waiting_for_answer); secret: keep the reply out of every record (the model sees a
        placeholder). An empty answer leaves the question unanswered: the task ends needs_input."""
        try:
            run = runs.get(task_id)
            runs.answer(run, answer, secret)
        except RunRefused as exc:
            raise ToolError(str(exc)) from None
        return run.summary()

    @server.tool()
    async def end_session(session_id: args.SessionToEnd) -> dict[str, Any]:
        """Close a session's browser now (a task of it still running is cancelled first);
        sessions without a task for the server's --session-idle are closed anyway."""
        try:
            await runs.end_session(session_id)
        except RunRefused as exc:
            raise ToolError(str(exc)) from None
        return {"session_id": session_id, "closed": True}

    @server.tool()
    async def run_suite(
        suite: args.Suite, tags: args.Tags = None, grep: args.Grep = None, grep_invert: args.GrepInvert = None,
        variables: args.Variables = None, concurrency: args.Concurrency = None, no_cache: args.NoCache = False,
    ) -> dict[str, Any]:
        """Run a QA suite file (YAML, as `surfer qa` runs it): passed / failed per case, the
        JUnit and HTML summary paths, and each case's report."""
        from .suites import SuiteRefused, run_suite_file

        try:
            return await run_suite_file(settings, Path(suite), tags=tags or [], grep=grep, variables=variables or {},
                                        concurrency=concurrency, no_cache=no_cache, grep_invert=grep_invert)
        except SuiteRefused as exc:
            raise ToolError(str(exc)) from None

    def run_file(run_id: str, *parts: str) -> Path:
        root = settings.runs_root.resolve()
        if not RUN_ID.match(run_id):
            raise ResourceNotFoundError(f"no run {run_id!r}")
        path = root.joinpath(run_id, *parts)
        if not path.resolve().is_relative_to(root / run_id):  # a link out of the run directory
            raise ResourceNotFoundError(f"no run {run_id!r}")
        if not (root / run_id).is_dir():  # it said "has no report.html (yet)" of a run deleted, or never run there
            raise ResourceNotFoundError(f"no run {run_id!r} under {root} (never run there, or deleted)")
        if not path.is_file():
            raise ResourceNotFoundError(f"run {run_id!r} has no {'/'.join(parts)} (yet)")
        return path

    async def read_text(run_id: str, name: str) -> str:  # off the event loop: a report can be megabytes
        path = await asyncio.to_thread(run_file, run_id, name)
        return await asyncio.to_thread(path.read_text, encoding="utf-8")

    @server.resource("surfer://runs/{run_id}/report.html", mime_type="text/html",
                     description="A run's report: each step's screenshot, thought, action and timings.")
    async def report(run_id: str) -> str:
        return await read_text(run_id, "report.html")

    @server.resource("surfer://runs/{run_id}/result.json", mime_type="application/json",
                     description="A run's result: status, answer, data, reason, steps, usage, timings.")
    async def result_json(run_id: str) -> str:
        return await read_text(run_id, "result.json")

    @server.resource("surfer://runs/{run_id}/trajectory.jsonl", mime_type="application/jsonl",
                     description="A run's steps, one JSON object a line.")
    async def trajectory(run_id: str) -> str:
        return await read_text(run_id, "trajectory.jsonl")

    def artifact(name: str) -> Any:
        async def read(run_id: str) -> bytes:
            path = await asyncio.to_thread(run_file, run_id, name)
            return await asyncio.to_thread(path.read_bytes)

        return read

    for name, mime in ARTIFACT_TYPES.items():  # what --trace and --video made
        server.resource(f"surfer://runs/{{run_id}}/{name}", name=name, mime_type=mime,
                        description=f"A run's {name} (surfer mcp --trace / --video).")(artifact(name))

    def screenshots(extension: str) -> Any:
        async def screenshot(run_id: str, n: str) -> bytes:
            if not n.isdigit():
                raise ResourceNotFoundError(f"step {n!r} is no step number")
            path = await asyncio.to_thread(run_file, run_id, "screenshots", f"step-{int(n):03d}.{extension}")
            return await asyncio.to_thread(path.read_bytes)

        return screenshot

    for extension, mime in SCREENSHOT_TYPES.items():
        if extension != "jpeg":  # one template per image type: a template's MIME type is fixed
            server.resource(f"surfer://runs/{{run_id}}/steps/{{n}}.{extension}", mime_type=mime,
                            description=f"The screenshot of step n of a run ({extension}).")(screenshots(extension))
    return server, runs
