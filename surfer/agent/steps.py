"""The step machinery of the agent loop (loop.py): steps until an outcome or
a limit; one step's observe → policy → localizer → confirm → act → settle →
record; the validator on answers; the final answer at a limit. A mixin of
`Agent`, which owns the configuration, the roles and the environment these
methods use (self.config, self.policy, self.localizer, self.validator,
self.secrets, self.sensitive, self.layout, self.profile, ...)."""

import asyncio
import contextlib
import dataclasses
import json
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

from surfer.core.actions import Answer, AskUser, Fail, headline, targets_of, with_points
from surfer.core.deadline import RunClock, pause_deadline
from surfer.core.errors import (
    ActionFailed,
    ActionNotSupported,
    BrowserCrashed,
    EnvironmentFailure,
)
from surfer.models.imaging import prepare_image
from surfer.models.profiles import Profile
from surfer.tools.base import Environment

from .answers import AnswerSchema
from .config import AgentConfig
from .confirm import REFUSED, ConfirmationRequest, Refusal, how_to_allow, origin_of
from .confirm import ask as ask_confirmer
from .control import RunControl
from .handover import agent_asks, take_turn
from .events import (
    ActionPerformed,
    ErrorOccurred,
    Event,
    ModelAsked,
    ModelCall,
    ModelCalled,
    Observed,
    StepFinished,
    StepRecord,
    StepStarted,
    Validated,
    Verdict,
)
from .layouts import Layout
from .memory import Memory
from .questions import PresetAnswers, Question, QuestionHandler
from .questions import ask as ask_question
from .repetition import RepetitionDetector, screen_fingerprint, step_seen
from .result import RunResult, TimingTotals, TokenTotals
from .roles import StepFailed
from .secrets import Secrets


MAX_REFUSALS = 3  # distinct sensitive actions refused before the run ends needs_approval


@dataclass
class RunState:
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
    calls: int = 0  # model calls made so far (each call's number in the run: ModelCall.seq)
    start_origin: str = ""  # where the task started: typing a card number elsewhere is sensitive
    refusals: list[Refusal] = field(default_factory=list)  # sensitive actions refused so far
    needs_approval: str | None = None  # set when the policy asks again for what was refused: the run ends
    on_question: QuestionHandler | None = None  # who replies to the policy's ask_user (agent/questions.py)
    answers: PresetAnswers = field(default_factory=PresetAnswers)  # replies given beforehand, by question pattern
    earlier: str = ""  # the session's account of its earlier tasks (agent/session.py), for the prompt
    question: str | None = None  # the question nobody answered: the run ends needs_input
    waited: float = 0.0  # seconds spent waiting for the user's replies (not charged to the time limit)
    human: float = 0.0  # seconds a person held the controls (agent/handover.py; not charged either)

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
            waiting_seconds=round(self.waited, 3) if self.waited else None,
            human_seconds=round(self.human, 3) if self.human else None,
        )
        if status == "needs_input" and self.question:
            fields.setdefault("question", self.question)
        fields = {k: self.scrub(v) if isinstance(v, str) else v for k, v in fields.items()}
        return RunResult(
            status=status, task=self.task, url=self.url, steps=len(self.records), run_id=self.run_id,
            run_dir=self.run_dir, usage=usage, timings=timings, **fields,  # type: ignore[arg-type]
        )


def time_limit_reason(max_seconds: float) -> str:
    return f"time limit of {max_seconds:g} s reached"


async def _waiting_for_person(asking: Awaitable[Any], run: RunState) -> Any:
    """Await a person's reply, moving the run's limits later while it waits."""
    loop = asyncio.get_running_loop()
    waiting = asyncio.ensure_future(asking)
    last = started = loop.time()
    try:
        while True:
            done, _ = await asyncio.wait({waiting}, timeout=0.5)
            now = loop.time()
            pause_deadline(now - last)
            last = now
            if done:
                return waiting.result()
    finally:
        run.waited += loop.time() - started
        if not waiting.done():
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)


def _answer_data(action: Any) -> Any:
    return action.data if isinstance(action, Answer) else None


def _answer_text(action: Answer) -> str:
    """The answer as the validator judges it: its text, and its data when typed."""
    if action.data is None:
        return action.text
    data = action.data.model_dump_json() if hasattr(action.data, "model_dump_json") else json.dumps(action.data)
    return f"{action.text}\nData: {data}"


class StepMachinery:
    """What `Agent` does inside a run (see the module's docstring)."""

    config: AgentConfig
    secrets: Secrets
    layout: Layout
    profile: Profile
    continuation: dict[str, bool]  # per role: does it continue the policy's request of the step?

    async def _steps(self, run: RunState, env: Environment, clock: RunClock) -> RunResult:
        """Steps until an outcome or a limit. A step still running at `clock.steps_until`
        is cut off (its model call cancelled) and dropped; the final answer then
        gets the time left until `clock.end`."""
        cfg = self.config
        task = "\n\n".join([
            *([run.earlier] if run.earlier else []), run.task, *([self.secrets.prompt_note()] if self.secrets else []),
            *([run.answer.describe()] if run.answer else []),
        ])
        memory = Memory(task, max_images=self.layout.memory_images, history_window=cfg.history_window)
        limit = time_limit_reason(cfg.max_seconds)
        loop = asyncio.get_running_loop()
        rejections = failed_streak = 0
        for index in range(1, cfg.max_steps + 1):
            for hint in await run.control.checkpoint():  # waits here while paused
                hint = self.secrets.scrub(hint)
                memory.add_note(f"Hint from the user: {hint}")
                run.hints.append(hint)
            if (ended := await take_turn(run, env, memory, index - 1)) is not None:  # a person's turn, if asked for
                return run.result(ended[0], reason=ended[1])
            if run.control.finish_requested:
                return await self._final(run, env, memory, index, "the user asked to finish now", clock)
            if loop.time() >= clock.steps_until:
                return await self._final(run, env, memory, index, limit, clock)
            try:
                async with clock.limit() as stepping:
                    record, outcome = await self._step(run, env, memory, index)
            except TimeoutError:
                if not stepping.expired():
                    raise
                await run.emit(ErrorOccurred(index, f"step {index} was cut off at the time limit and dropped"))
                return await self._final(run, env, memory, index, f"{limit} during step {index}", clock)
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
        return await self._final(run, env, memory, cfg.max_steps + 1, f"step limit of {cfg.max_steps} reached", clock)

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

    def _sink(self, run: RunState, record: StepRecord) -> Callable[[ModelCall], Awaitable[None]]:
        async def sink(call: ModelCall) -> None:
            call.seq = run.calls
            run.calls += 1
            record.calls.append(call)
            record.timings.model += call.seconds
            await run.emit(ModelCalled(record.index, call))
        return sink

    @contextlib.asynccontextmanager
    async def _recorded_step(self, run: RunState, index: int) -> AsyncIterator[StepRecord]:
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

    async def _finish_step(self, run: RunState, record: StepRecord, started: float) -> None:
        record.timings.total = time.perf_counter() - started
        run.records.append(record)
        await run.emit(StepFinished(record))
        if run.run_dir is not None:  # written to tokens.jsonl: a long run does not hold every call's ids in memory
            for call in record.calls:
                call.tokens = None if call.tokens is None else call.tokens.without_ids()

    async def _step(self, run: RunState, env: Environment, memory: Memory, index: int) -> tuple[StepRecord, tuple[str, str | None, str | None] | None]:
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
                    memory.add_note(decision.notes, own=True)
                action = decision.action
                if isinstance(action, (Answer, Fail)):  # no browser work, but the trace shows where the run ended
                    async with env.step_group(f"step {index}: {headline(action)}"):
                        pass
                if isinstance(action, Answer):
                    verdict_outcome = await self._judge(run, memory, record, action, sink)
                elif isinstance(action, Fail):
                    memory.add_history(index, action.describe(), "gave up")
                    verdict_outcome = ("failed", None, action.reason)
                elif isinstance(action, AskUser) and action.kind == "take_over":  # a person's turn next (handover.py)
                    verdict_outcome = agent_asks(run, env, memory, record, self.secrets.scrub(action.question))
                elif isinstance(action, AskUser):
                    verdict_outcome = await self._ask_user(run, memory, record, action)
                else:
                    points = []
                    for target in targets_of(action):
                        await run.emit(ModelAsked(index, "localizer"))
                        points.append(await self.localizer.locate(target, prepared, sink, self._after("localizer", memory)))
                    record.points = points
                    record.action = action = with_points(action, points)
                    run.start_origin = run.start_origin or origin_of(record.url)
                    if await self._confirmed(run, env, memory, record, action, observation.notices):
                        await self._perform(run, env, memory, record, action, points)
                        await self._watch_repetition(run, memory, record, action, points)
                    elif run.needs_approval:
                        verdict_outcome = ("needs_approval", None, run.needs_approval)
            except StepFailed as exc:
                record.error = str(exc)
                memory.add_history(index, record.action.describe() if record.action else "(no action)", f"error: {exc}")
                await run.emit(ErrorOccurred(index, str(exc)))
        return record, verdict_outcome

    async def _ask_user(self, run: RunState, memory: Memory, record: StepRecord, action: AskUser) -> tuple[str, str | None, str | None] | None:
        """The policy's question to the user: the reply goes into memory (a secret one as a placeholder);
        with nobody to reply, the run ends `needs_input`. Time spent waiting is not the task's."""
        text = self.secrets.scrub(action.question)
        question = Question(record.index, text, action.secret, record.url, record.screenshot, record.screenshot_ext)
        reply, by = await _waiting_for_person(ask_question(run.on_question, run.answers, question), run)
        if reply is None:
            record.outcome = {"question": text, "answered": False}
            memory.add_history(record.index, action.describe(), "nobody replied")
            run.question = text
            return ("needs_input", None, f"the agent needs the user's reply to: {text}")
        if reply.secret:
            shown = "{{" + self.secrets.add_reply(reply.text) + "}}"
            note = f"The user replied to {text!r} with a secret: type it as {shown} (its value is hidden from you)."
        else:
            shown = self.secrets.scrub(reply.text)
            note = f"The user replied to {text!r}: {shown}"
        record.outcome = {"question": text, "reply": shown, "by": by, **({"secret": True} if reply.secret else {})}
        memory.add_note(note)
        memory.add_history(record.index, action.describe(), f"the user replied: {shown}")
        await self._watch_repetition(run, memory, record, action, [])  # the same question again is a repetition
        return None

    def _after(self, role: str, memory: Memory) -> Any:
        """The policy's turn for `role` to continue (None: a request of its own)."""
        return memory.policy_turn if self.continuation[role] else None

    async def _ask(self, record: StepRecord, action: Any, reason: str) -> bool:
        request = ConfirmationRequest(record.index, action, reason, record.url, record.screenshot, record.screenshot_ext)
        approved = await ask_confirmer(self.confirm, request)
        record.confirmation = {"reason": reason, "approved": approved, "by": getattr(self.confirm, "__name__", "confirm")}
        return approved

    def _download_confirmer(self, run: RunState) -> Callable[[str, str], Awaitable[bool]]:
        async def confirm_download(name: str, url: str) -> bool:
            record = run.current or StepRecord(0)
            reason = f"it downloads a file ({name} from {self.secrets.scrub(url)})"
            if self._approved_without_asking(record, reason, url):
                return True
            return await self._ask(record, record.action, reason)
        return confirm_download

    def _approved_without_asking(self, record: StepRecord, reason: str, *urls: str) -> bool:
        """On a host of `approve_domains` (and not of `confirm_domains`) the rules' yes is given."""
        if self.sensitive.on_confirm_domain(record.url):
            return False
        host = next(filter(None, (self.sensitive.approved_host(u) for u in (record.url, *urls))), None)
        if host is None:
            return False
        record.confirmation = {"reason": reason, "approved": True, "by": f"approve_domain:{host}"}
        return True

    async def _confirmed(
        self, run: RunState, env: Environment, memory: Memory, record: StepRecord, action: Any, notices: tuple[str, ...],
    ) -> bool:
        """Whether the action may be performed: sensitive ones need a yes. A refusal
        goes into the history with what to do instead; asking again for a refused
        action (or too many refusals) sets `run.needs_approval`, which ends the run."""
        point = getattr(action, "point", None)
        element = await env.element_at(point) if point is not None and action.type in ("click", "type", "upload") else None
        if element is not None:
            record.element = element.to_dict()
        reason = self.sensitive.reason(action, record.url, "\n".join(notices), element, run.start_origin)
        if reason is None or self._approved_without_asking(record, reason):
            return True
        if await self._ask(record, action, reason):
            return True
        refusal = Refusal.of(action, element)
        again = any(refusal.same(earlier) for earlier in run.refusals)
        run.refusals.append(refusal)
        record.outcome = {"error": f"not performed: {reason}; {REFUSED}", "refused": True}
        memory.add_history(record.index, action.describe(), f"not performed: {reason}; {REFUSED}")
        if again or len(run.refusals) >= MAX_REFUSALS:
            why = "was asked for again after a refusal" if again else f"was the {len(run.refusals)}th sensitive action refused"
            run.needs_approval = (
                f"needs a person's approval: {action.describe()} ({reason}) {why}; {how_to_allow(record.url)}"
            )
        return False

    async def _watch_repetition(self, run: RunState, memory: Memory, record: StepRecord, action: Any, points: list[Any]) -> None:
        if not record.screenshot or action.type == "wait":  # waiting on a screen that does not change is what waiting is
            return
        # decoding the screenshot (a PNG is decoded whole) is kept off the event loop that other sessions share
        screen = await asyncio.to_thread(screen_fingerprint, record.screenshot)
        warning = run.repetition.seen(step_seen(screen, action.describe(), points))
        if warning is None:
            return
        run.repeats += 1
        text = f"{warning} (warning {run.repeats} of {self.config.max_repeats})"
        record.outcome = {**(record.outcome or {}), "repetition": text}
        memory.add_note(f"You are repeating yourself: {text}. Do something different, or answer or give up.")

    async def _perform(self, run: RunState, env: Environment, memory: Memory, record: StepRecord, action: Any, points: list[Any]) -> None:
        scrub = self.secrets.scrub
        try:
            async with env.step_group(f"step {record.index}: {headline(action)}"):
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

    async def _judge(self, run: RunState, memory: Memory, record: StepRecord, action: Answer, sink: Any) -> tuple[str, str | None, str | None]:
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

    async def _final(self, run: RunState, env: Environment, memory: Memory, index: int, why: str, clock: RunClock) -> RunResult:
        """At a limit, ask the policy once for a final answer (validated like any
        answer), within the time left until `clock.end`."""
        outcome: dict[str, Any] = {"status": "limit", "reason": f"{why}; no final answer (no time was left to ask)"}
        if asyncio.get_running_loop().time() >= clock.end:
            return run.result(**outcome)
        try:
            async with clock.limit(final=True) as asking, self._recorded_step(run, index) as record:
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
