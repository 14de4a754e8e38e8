"""The agent loop: observe → policy → localizer → act → settle, with the
validator on answers. Side effects (run directory, live view, user callbacks)
hang off the event stream; the loop only emits events."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import statistics
import time
import traceback
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping

from surfer.core.actions import Answer, Fail, targets_of, with_points
from surfer.core.deadline import run_deadline
from surfer.core.errors import (
    ActionFailed, ActionNotSupported, BrowserCrashed, ConfigError, EnvironmentFailure, ModelServerUnreachable, RunError, SurferError,
)
from surfer.models.backend import ModelBackend
from surfer.models.imaging import prepare_image
from surfer.models.profiles import Profile, get_profile
from surfer.tools.base import Environment

from .answers import AnswerSchema
from .config import AgentConfig, load_config, merge_settings, validate_config
from .confirm import ConfirmationRequest, Confirmer, SensitiveRules, fixed_decision
from .confirm import ask as ask_confirmer
from .control import RunControl, RunHandle
from .events import (
    ActionPerformed, ErrorOccurred, Event, Finished, ModelAsked, ModelCall, ModelCalled, Observed, RunStarted, StepFinished, StepRecord,
    StepStarted, Validated, Verdict,
)
from .layouts import Layout, check_layout
from .memory import Memory
from .repetition import RepetitionDetector, screen_fingerprint, step_seen
from .result import RunResult, TimingTotals, TokenTotals
from .secrets import Secrets
from .roles import Localizer, Policy, RoleClient, StepFailed, Validator

Listener = Callable[[Event], Awaitable[None] | None]

FINAL_ANSWER_SHARE, FINAL_ANSWER_MAX_SECONDS = 0.2, 30.0


def final_answer_reserve(max_seconds: float) -> float:
    """Seconds kept back at the end of a run's wall time for the final-answer
    request: steps stop this much before the limit, so the whole run, final
    answer included, ends within `max_seconds`."""
    return min(FINAL_ANSWER_MAX_SECONDS, FINAL_ANSWER_SHARE * max_seconds)


def slugify(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].strip("-") or "run"


def default_run_dir(task: str, root: str | Path = "runs") -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(root) / f"{stamp}-{uuid.uuid4().hex[:4]}-{slugify(task)}"


def _error_kind(exc: SurferError) -> str:
    if isinstance(exc, ConfigError):
        return "config"
    if isinstance(exc, ModelServerUnreachable):
        return "unreachable"
    if isinstance(exc, BrowserCrashed):
        return "browser_crash"
    if isinstance(exc, (EnvironmentFailure, ActionFailed, ActionNotSupported)):
        return "environment"  # e.g. the start URL cannot be opened
    return "model" if isinstance(exc, RunError) else "internal"


@dataclass
class _Run:
    task: str
    url: str | None
    run_id: str
    run_dir: str | None
    emit: Callable[[Event], Awaitable[None]]
    scrub: Callable[[str], str] = str
    answer: AnswerSchema | None = None
    control: RunControl = field(default_factory=RunControl)
    started: float = field(default_factory=time.monotonic)
    records: list[StepRecord] = field(default_factory=list)
    repetition: RepetitionDetector = field(default_factory=RepetitionDetector)
    hints: list[str] = field(default_factory=list)  # given since the last step began; recorded on the next step
    current: StepRecord | None = None  # the step in progress
    repeats: int = 0

    def result(self, status: str, **fields: Any) -> RunResult:
        overheads = sorted(r.timings.overhead for r in self.records if r.action is not None)
        usage = TokenTotals()
        for record in self.records:
            usage.prompt_tokens += record.usage.prompt_tokens
            usage.completion_tokens += record.usage.completion_tokens
        timings = TimingTotals(
            seconds=round(time.monotonic() - self.started, 3),
            model_seconds=round(sum(r.timings.model for r in self.records), 3),
            overhead_p50=round(statistics.median(overheads), 4) if overheads else None,
            overhead_p95=round(overheads[min(len(overheads) - 1, int(0.95 * len(overheads)))], 4) if overheads else None,
        )
        fields = {k: self.scrub(v) if isinstance(v, str) else v for k, v in fields.items()}
        return RunResult(
            status=status, task=self.task, url=self.url, steps=len(self.records), run_id=self.run_id,
            run_dir=self.run_dir, usage=usage, timings=timings, **fields,  # type: ignore[arg-type]
        )


def _time_limit_reason(max_seconds: float) -> str:
    return f"time limit of {max_seconds:g} s reached"


def _answer_data(action: Any) -> Any:
    return action.data if isinstance(action, Answer) else None


def _answer_text(action: Answer) -> str:
    """The answer as the validator judges it: its text, and its data when typed."""
    if action.data is None:
        return action.text
    data = action.data.model_dump_json() if hasattr(action.data, "model_dump_json") else json.dumps(action.data)
    return f"{action.text}\nData: {data}"


class Agent:
    """A computer-use agent: policy, localizer and validator over an environment.

        agent = Agent(base_url="http://127.0.0.1:8000/v1", model="Hcompany/Holotron-12B")
        result = await agent.run("Find the price of ...", url="https://example.com")

    `backend=` sends every role to one backend (e.g. a `ScriptedModel`);
    `backends={"localizer": ...}` overrides single roles. Without an
    `environment=`, each run opens its own `BrowserEnvironment` from the
    configuration and closes it afterwards.
    """

    def __init__(
        self,
        config: AgentConfig | None = None,
        *,
        environment: Environment | None = None,
        backend: ModelBackend | None = None,
        backends: dict[str, ModelBackend] | None = None,
        profile: str | Profile | None = None,
        out_dir: str | Path | None = None,
        listeners: list[Listener] | None = None,
        files: list[str | Path] | None = None,
        secrets: "Secrets | Mapping[str, str] | None" = None,
        confirm: Confirmer | None = None,
        **settings: Any,
    ) -> None:
        if files is not None:  # the files the agent may upload
            settings["browser"] = {**settings.get("browser", {}), "upload_files": [str(f) for f in files]}
        if config is None:
            config = load_config(overrides=settings)
        elif settings:
            config = validate_config(merge_settings(config.model_dump(), settings), "Agent arguments")
        self.config = config
        if isinstance(profile, Profile):
            self.profile = profile
        else:
            self.profile = get_profile(profile or config.profile)
        self.environment = environment
        self.secrets = secrets if isinstance(secrets, Secrets) else Secrets(secrets)
        self.sensitive = SensitiveRules(config.sensitive_words, config.confirm_domains, config.confirm_downloads)
        # Who says yes to a sensitive action: the caller's confirmer, else the configured default.
        self.confirm = confirm or fixed_decision(config.sensitive_actions == "approve")
        self.out_dir = Path(out_dir) if out_dir else None
        self.listeners = list(listeners or [])
        self._backends = self._make_backends(backend, backends or {})
        self.layout = Layout(
            config.prompt_layout or check_layout(self.profile.prompt_layout), config.memory_images or self.profile.max_images,
            config.block_images,
        )
        budget = config.image_budget or self.profile.image_budget
        # each screenshot's share of the per-request image budget (None: no cap)
        self.image_tokens = budget // self.layout.max_images if budget else None
        self.policy = Policy(self._client("policy"), self.layout)
        self.localizer = Localizer(self._client("localizer"))
        self.validator = Validator(self._client("validator"))
        self.continuation = self._continuation()

    def _continuation(self) -> dict[str, bool]:
        """Per role (localizer, validator): does it continue the policy's request of the step?
        Only where it asks the policy's backend (one endpoint and model), and where the
        configuration (else the profile) allows it."""
        wanted = self.config.role_continuation
        if wanted is None:
            wanted = self.profile.role_continuation
        return {role: bool(wanted) and self._backends[role] is self._backends["policy"] for role in ("localizer", "validator")}

    def _after(self, role: str, memory: Memory) -> Any:
        """The policy's turn for `role` to continue (None: a request of its own)."""
        return memory.policy_turn if self.continuation[role] else None

    # -- construction --------------------------------------------------------

    def _make_backends(self, shared: ModelBackend | None, per_role: dict[str, ModelBackend]) -> dict[str, ModelBackend]:
        from surfer.models.http import OpenAICompatibleBackend

        unknown = set(per_role) - {"policy", "localizer", "validator"}
        if unknown:
            raise ConfigError(f"unknown role(s) in backends: {', '.join(sorted(unknown))}")
        made: dict[str, ModelBackend] = {}
        by_endpoint: dict[str, ModelBackend] = {}
        for role in ("policy", "localizer", "validator"):
            if role in per_role:
                made[role] = per_role[role]
            elif shared is not None:
                made[role] = shared
            else:
                endpoint = self.config.endpoint(role)
                key = endpoint.model_dump_json()
                if key not in by_endpoint:  # roles on one endpoint share one connection pool
                    by_endpoint[key] = OpenAICompatibleBackend(endpoint)
                made[role] = by_endpoint[key]
        return made

    def _client(self, role: str) -> RoleClient:
        settings = getattr(self.config, role)
        return RoleClient(
            role, self._backends[role], self.profile, temperature=settings.temperature,
            max_tokens=settings.max_tokens, output_retries=self.config.output_retries,
            redact=self.secrets.scrub if self.secrets else None,
        )

    def _new_environment(self) -> Environment:
        from .environments import browser_environment

        return browser_environment(self.config)

    async def aclose(self) -> None:
        for backend in {id(b): b for b in self._backends.values()}.values():
            await backend.aclose()

    # -- public API ----------------------------------------------------------

    async def run(
        self, task: str, url: str | None = None, *, out_dir: str | Path | None = None,
        listeners: list[Listener] | None = None, answer_schema: Any = None, control: RunControl | None = None,
    ) -> RunResult:
        """Run one task to the end and return its result. Errors of the run
        (server down, crash, bad configuration) come back as `status="error"`.

        `listeners` receive this run's events (after the agent's own). One
        Agent may run several tasks concurrently when it owns its environments
        (no `environment=` given): each run opens its own browser session.
        `answer_schema` (a pydantic model class or a JSON Schema dict) makes
        the answer carry data of that shape, validated into `result.data`."""
        task = self.secrets.scrub(task)  # a value written into the task is kept out of every record
        answer = AnswerSchema.of(answer_schema)
        listeners = [*self.listeners, *(listeners or [])]
        writer = self._writer(task, out_dir)
        if writer is not None:
            listeners.insert(0, writer.handle)

        async def emit(event: Event) -> None:
            for listener in listeners:
                outcome = listener(event)
                if asyncio.iscoroutine(outcome):
                    await outcome

        return await self._execute(task, url, writer.run_dir if writer else None, emit, answer, control or RunControl())

    def start(
        self, task: str, url: str | None = None, *, out_dir: str | Path | None = None,
        listeners: list[Listener] | None = None, answer_schema: Any = None,
    ) -> RunHandle:
        """Start a run in the background (inside a running event loop) and return
        a handle to pause, resume, hint, finish or cancel it, and await its result."""
        control = RunControl()
        running = asyncio.ensure_future(
            self.run(task, url, out_dir=out_dir, listeners=listeners, answer_schema=answer_schema, control=control)
        )
        return RunHandle(running, control)

    def run_sync(
        self, task: str, url: str | None = None, *, out_dir: str | Path | None = None, answer_schema: Any = None,
    ) -> RunResult:
        """`run` for scripts without an event loop."""
        return asyncio.run(self._run_and_close(task, url, out_dir, answer_schema))

    async def _run_and_close(self, task: str, url: str | None, out_dir: str | Path | None, answer_schema: Any) -> RunResult:
        try:
            return await self.run(task, url, out_dir=out_dir, answer_schema=answer_schema)
        finally:
            await self.aclose()

    async def stream(
        self, task: str, url: str | None = None, *, out_dir: str | Path | None = None, answer_schema: Any = None,
    ) -> AsyncIterator[Event]:
        """Run the task, yielding typed events as they happen; the last is `Finished`."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        runner = asyncio.ensure_future(
            self.run(task, url, out_dir=out_dir, listeners=[queue.put], answer_schema=answer_schema)
        )
        runner.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            await runner  # surface an unexpected exception
        finally:
            if not runner.done():
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)

    def _writer(self, task: str, out_dir: str | Path | None) -> Any:
        target = Path(out_dir) if out_dir else (default_run_dir(task, self.out_dir) if self.out_dir else None)
        if target is None:
            return None
        from .trajectory import TrajectoryWriter

        return TrajectoryWriter(target, scrub=self.secrets.scrub_obj if self.secrets else None)

    # -- the loop ------------------------------------------------------------

    async def _execute(
        self, task: str, url: str | None, run_dir: Path | None, emit: Callable[[Event], Awaitable[None]],
        answer: AnswerSchema | None, control: RunControl,
    ) -> RunResult:
        run = _Run(task, url, uuid.uuid4().hex[:12], str(run_dir) if run_dir else None, emit, self.secrets.scrub, answer, control)
        await emit(RunStarted(run.run_id, task, url, run.run_dir, self._describe()))
        owned = self.environment is None
        env = self._new_environment() if owned else self.environment
        assert env is not None
        env.begin_run(run_dir)
        env.confirm_download = self._download_confirmer(run) if self.sensitive.downloads else None
        result: RunResult | None = None
        limit = _time_limit_reason(self.config.max_seconds)
        # Event-loop time: asyncio.timeout_at and the backends' time_left() use the same clock.
        deadline = asyncio.get_running_loop().time() + self.config.max_seconds
        steps_until = deadline - final_answer_reserve(self.config.max_seconds)
        try:
            with run_deadline(deadline):
                try:
                    async with asyncio.timeout_at(steps_until) as preparing:
                        await self._prepare(env, url)
                except TimeoutError:
                    if not preparing.expired():
                        raise
                    result = run.result("limit", reason=f"{limit} before the first step (model server check or start URL)")
                else:
                    result = await self._steps(run, env, steps_until, deadline)
        except asyncio.CancelledError:
            result = run.result("interrupted", reason="interrupted (Ctrl-C, SIGTERM or cancelled)")
            raise
        except SurferError as exc:
            kind = _error_kind(exc)
            result = run.result("error", reason=str(exc), error_kind=kind)
            await emit(ErrorOccurred(len(run.records) or None, self.secrets.scrub(str(exc)), fatal=True))
        except Exception as exc:
            result = run.result("error", reason=f"internal error: {exc!r}", error_kind="internal")
            await emit(ErrorOccurred(None, traceback.format_exc(), fatal=True))
            raise
        finally:
            if result is not None:
                result.downloads = await asyncio.shield(env.end_run())
            env.confirm_download = None
            if owned and env is not None:
                await asyncio.shield(env.close())
            if result is not None:
                control.result = result
                await asyncio.shield(emit(Finished(result)))
        return result

    async def _prepare(self, env: Environment, url: str | None) -> None:
        """Check the model servers while the browser starts and opens `url`
        (start-up takes the longer of the two, not their sum). A server that
        is down wins over a start URL that fails: its error is raised, and the
        browser's start is cancelled."""
        starting = asyncio.ensure_future(env.start(url))
        try:
            for backend in {id(b): b for b in self._backends.values()}.values():
                await backend.check()
        except BaseException:
            starting.cancel()
            with contextlib.suppress(BaseException):  # its own error, if any, comes second to the server's
                await starting
            raise
        await starting

    def _describe(self) -> dict[str, Any]:
        return {
            "profile": self.profile.name,
            "backends": {role: backend.label for role, backend in self._backends.items()},
            "validator": self.config.validate_answers, "max_steps": self.config.max_steps,
            "max_seconds": self.config.max_seconds,
            "environment": self.environment.kind if self.environment else "browser",
            **({"prompt_layout": self.layout.name} if self.layout.name != "window" else {}),
            **({"image_tokens_per_image": self.image_tokens} if self.image_tokens else {}),
            **({"memory_images": self.layout.memory_images} if self.layout.memory_images != 3 else {}),
            "role_continuation": self.continuation,
        }

    async def _steps(self, run: _Run, env: Environment, steps_until: float, deadline: float) -> RunResult:
        """Steps until an outcome or a limit. A step still running at `steps_until`
        is cut off (its model call cancelled) and dropped; the final answer then
        gets the time left until `deadline`."""
        cfg = self.config
        task = "\n\n".join(
            [run.task, *([self.secrets.prompt_note()] if self.secrets else []), *([run.answer.describe()] if run.answer else [])]
        )
        memory = Memory(task, max_images=self.layout.memory_images, history_window=cfg.history_window)
        limit = _time_limit_reason(cfg.max_seconds)
        loop = asyncio.get_running_loop()
        rejections = failed_streak = 0
        for index in range(1, cfg.max_steps + 1):
            for hint in await run.control.checkpoint():  # waits here while paused
                hint = self.secrets.scrub(hint)
                memory.add_note(f"Hint from the user: {hint}")
                run.hints.append(hint)
            if run.control.finish_requested:
                return await self._final(run, env, memory, index, "the user asked to finish now", deadline)
            if loop.time() >= steps_until:
                return await self._final(run, env, memory, index, limit, deadline)
            try:
                async with asyncio.timeout_at(steps_until) as stepping:
                    record, outcome = await self._step(run, env, memory, index)
            except TimeoutError:
                if not stepping.expired():
                    raise
                await run.emit(ErrorOccurred(index, f"step {index} was cut off at the time limit and dropped"))
                return await self._final(run, env, memory, index, f"{limit} during step {index}", deadline)
            if outcome is None and record.outcome and "error" not in record.outcome:
                end = await env.episode_end()
                if end is not None:
                    return run.result(end.status, reason=end.reason, reward=end.reward)
            if run.repeats >= cfg.max_repeats:
                return run.result("stuck", reason=f"repeated itself {run.repeats} times; last: {record.outcome['repetition']}")
            if outcome is None:
                # a step whose model output stayed unusable (policy or localizer) has an error and no outcome
                failed_streak = failed_streak + 1 if record.error and not record.outcome else 0
                if failed_streak >= cfg.max_failed_steps:
                    return run.result("error", reason=f"{failed_streak} failed steps in a row; last: {record.error}", error_kind="model")
                continue
            status, answer, reason = outcome
            if status == "rejected":
                rejections += 1
                if rejections > cfg.max_rejections:
                    return run.result("failed", answer=answer, reason=f"the validator rejected the answer {rejections} times: {reason}")
                continue
            return run.result(status, answer=answer, reason=reason, data=_answer_data(record.action))
        return await self._final(run, env, memory, cfg.max_steps + 1, f"step limit of {cfg.max_steps} reached", deadline)

    async def _observe(self, env: Environment, memory: Memory, record: StepRecord) -> Any:
        t = time.perf_counter()
        observation = await env.observe()
        if self.secrets:  # a value a form put into the URL, or a page title showing it
            scrub = self.secrets.scrub
            observation = dataclasses.replace(
                observation, url=scrub(observation.url), title=scrub(observation.title),
                tabs=tuple(scrub(t) for t in observation.tabs), notices=tuple(scrub(n) for n in observation.notices),
            )
        record.timings.screenshot = time.perf_counter() - t
        t = time.perf_counter()
        prepared = dataclasses.replace(await prepare_image(observation.screenshot, self.profile.image, self.image_tokens), step=record.index)
        record.timings.encode = time.perf_counter() - t
        memory.add_image(prepared)
        record.url, record.title = observation.url, observation.title
        shot = observation.screenshot
        record.screenshot, record.screenshot_ext = shot.data, shot.extension
        record.screen = {"width": shot.size.width, "height": shot.size.height, "scale": shot.scale, "origin": list(shot.origin)}
        return observation, prepared

    def _sink(self, run: _Run, record: StepRecord) -> Callable[[ModelCall], Awaitable[None]]:
        async def sink(call: ModelCall) -> None:
            record.calls.append(call)
            record.timings.model += call.seconds
            await run.emit(ModelCalled(record.index, call))
        return sink

    @contextlib.asynccontextmanager
    async def _recorded_step(self, run: _Run, index: int) -> AsyncIterator[StepRecord]:
        """A step's record: appended and announced when the step ends, also with an
        error; dropped when the step is cancelled (time limit, Ctrl-C, SIGTERM)."""
        started = time.perf_counter()
        record = run.current = StepRecord(index)
        record.hints, run.hints = run.hints, []
        await run.emit(StepStarted(index))
        try:
            yield record
        except asyncio.CancelledError:
            raise
        except BaseException:
            await self._finish_step(run, record, started)
            raise
        else:
            await self._finish_step(run, record, started)

    async def _finish_step(self, run: _Run, record: StepRecord, started: float) -> None:
        record.timings.total = time.perf_counter() - started
        run.records.append(record)
        await run.emit(StepFinished(record))

    async def _step(self, run: _Run, env: Environment, memory: Memory, index: int) -> tuple[StepRecord, tuple[str, str | None, str | None] | None]:
        """One step. Returns the record and, when the run should end or an answer
        was judged, (status, answer, reason)."""
        verdict_outcome: tuple[str, str | None, str | None] | None = None
        async with self._recorded_step(run, index) as record:
            sink = self._sink(run, record)
            try:
                observation, prepared = await self._observe(env, memory, record)
                await run.emit(Observed(index, record.url or "", record.screenshot or b"", record.screenshot_ext))
                await run.emit(ModelAsked(index, "policy"))
                decision = await self.policy.decide(memory, observation, sink, answer=run.answer)
                record.thought, record.notes, record.action = decision.thought, decision.notes, decision.action
                if decision.notes:
                    memory.add_note(decision.notes)
                action = decision.action
                if isinstance(action, Answer):
                    verdict_outcome = await self._judge(run, memory, record, action, sink)
                elif isinstance(action, Fail):
                    memory.add_history(index, action.describe(), "gave up")
                    verdict_outcome = ("failed", None, action.reason)
                else:
                    points = []
                    for target in targets_of(action):
                        await run.emit(ModelAsked(index, "localizer"))
                        points.append(await self.localizer.locate(target, prepared, sink, self._after("localizer", memory)))
                    record.points = points
                    record.action = action = with_points(action, points)
                    if await self._confirmed(run, memory, record, action, observation.notices):
                        await self._perform(run, env, memory, record, action, points)
                    self._watch_repetition(run, memory, record, action, points)
            except StepFailed as exc:
                record.error = str(exc)
                memory.add_history(index, record.action.describe() if record.action else "(no action)", f"error: {exc}")
                await run.emit(ErrorOccurred(index, str(exc)))
        return record, verdict_outcome

    async def _ask(self, record: StepRecord, action: Any, reason: str) -> bool:
        request = ConfirmationRequest(record.index, action, reason, record.url, record.screenshot, record.screenshot_ext)
        approved = await ask_confirmer(self.confirm, request)
        record.confirmation = {"reason": reason, "approved": approved, "by": getattr(self.confirm, "__name__", "confirm")}
        return approved

    def _download_confirmer(self, run: _Run) -> Callable[[str, str], Awaitable[bool]]:
        async def confirm_download(name: str, url: str) -> bool:
            record = run.current or StepRecord(0)
            return await self._ask(record, record.action, f"it downloads a file ({name} from {self.secrets.scrub(url)})")
        return confirm_download

    async def _confirmed(self, run: _Run, memory: Memory, record: StepRecord, action: Any, notices: tuple[str, ...]) -> bool:
        """Whether the action may be performed: sensitive ones need the confirmer's yes."""
        reason = self.sensitive.reason(action, record.url, "\n".join(notices))
        if reason is None:
            return True
        approved = await self._ask(record, action, reason)
        if not approved:
            record.outcome = {"error": f"not performed: a sensitive action ({reason}) was denied"}
            memory.add_history(
                record.index, action.describe(),
                f"denied: sensitive actions ({reason}) need a person's confirmation, and it was refused",
            )
        return approved

    def _watch_repetition(self, run: _Run, memory: Memory, record: StepRecord, action: Any, points: list[Any]) -> None:
        if not record.screenshot or action.type == "wait":  # waiting on a screen that does not change is what waiting is
            return
        warning = run.repetition.seen(step_seen(screen_fingerprint(record.screenshot), action.describe(), points))
        if warning is None:
            return
        run.repeats += 1
        text = f"{warning} (warning {run.repeats} of {self.config.max_repeats})"
        record.outcome = {**(record.outcome or {}), "repetition": text}
        memory.add_note(f"You are repeating yourself: {text}. Do something different, or answer or give up.")

    async def _perform(self, run: _Run, env: Environment, memory: Memory, record: StepRecord, action: Any, points: list[Any]) -> None:
        scrub = self.secrets.scrub
        try:
            outcome = await env.perform(self.secrets.reveal_action(action))  # the executor alone sees real values
        except (ActionFailed, ActionNotSupported, ValueError) as exc:
            error = scrub(str(exc))
            record.error = error
            record.outcome = {"error": error}
            memory.add_history(record.index, action.describe(), f"error: {error}")
            await run.emit(ErrorOccurred(record.index, error))
        else:
            outcome.detail = scrub(outcome.detail)
            record.timings.action, record.timings.settle = outcome.action_seconds, outcome.settle_seconds
            record.outcome = outcome.to_dict()
            memory.add_history(record.index, action.describe(), outcome.detail or "done")
            await run.emit(ActionPerformed(record.index, action, points, record.outcome))

    async def _judge(self, run: _Run, memory: Memory, record: StepRecord, action: Answer, sink: Any) -> tuple[str, str | None, str | None]:
        answer, judged = action.text, _answer_text(action)
        if not self.config.validate_answers:
            memory.add_history(record.index, f"answer({answer!r})", "accepted (no validator)")
            return ("success", answer, None)
        await run.emit(ModelAsked(record.index, "validator"))
        verdict: Verdict = await self.validator.judge(
            run.task, judged, self.layout.validator_images(memory), sink, self._after("validator", memory),
        )
        record.verdicts.append(verdict)
        await run.emit(Validated(record.index, verdict))
        if verdict.accepted:
            memory.add_history(record.index, f"answer({answer!r})", "accepted by the validator")
            return ("success", answer, verdict.reasons or None)
        memory.add_note(f"The validator rejected the answer {answer!r}: {verdict.reasons}")
        memory.add_history(record.index, f"answer({answer!r})", f"rejected: {verdict.reasons}")
        return ("rejected", answer, verdict.reasons)

    async def _final(self, run: _Run, env: Environment, memory: Memory, index: int, why: str, deadline: float) -> RunResult:
        """At a limit, ask the policy once for a final answer (validated like any
        answer), within the time left until `deadline`."""
        outcome: dict[str, Any] = {"status": "limit", "reason": f"{why}; no final answer (no time was left to ask)"}
        if asyncio.get_running_loop().time() >= deadline:
            return run.result(**outcome)
        try:
            async with asyncio.timeout_at(deadline) as asking, self._recorded_step(run, index) as record:
                sink = self._sink(run, record)
                try:
                    observation, _ = await self._observe(env, memory, record)
                    await run.emit(ModelAsked(index, "policy"))
                    decision = await self.policy.decide(memory, observation, sink, final=True, answer=run.answer)
                    record.thought, record.action = decision.thought, decision.action
                    if isinstance(decision.action, Fail):
                        outcome = {"status": "failed", "reason": f"{why}; gave up: {decision.action.reason}"}
                    else:
                        status, _, reason = await self._judge(run, memory, record, decision.action, sink)
                        answer, data = decision.action.text, _answer_data(decision.action)
                        if status == "success":
                            outcome = {"status": "success", "answer": answer, "data": data, "reason": f"answered at the limit ({why})"}
                        else:
                            outcome = {"status": "failed", "answer": answer, "data": data, "reason": f"{why}; final answer rejected: {reason}"}
                except (StepFailed, EnvironmentFailure) as exc:
                    if isinstance(exc, BrowserCrashed):
                        raise
                    record.error = str(exc)
                    outcome = {"status": "limit", "reason": f"{why}; no final answer ({exc})"}
        except TimeoutError:
            if not asking.expired():
                raise
            outcome = {"status": "limit", "reason": f"{why}; no final answer (the time limit ran out while asking for it)"}
        return run.result(**outcome)
