"""The steps of one task run: steps until an outcome or a limit; one step's
observe → policy → localizer → confirm → act → settle → record; the validator
on answers; the final answer at a limit.

A `Stepper` is given everything it works with as `StepInputs` — the roles,
the prompt layout, the image rule, the configuration, the secrets, the
sensitive-action guards, the environment, the memory, the run control and the
sink of the run's events — and the `RunState` it updates (agent/run_state.py).
It reads nothing else: the task run (agent/task_run.py) builds its inputs."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping

from surfer.core.actions import Answer, AskUser, Fail, TypeText, headline, targets_of, with_points
from surfer.core.deadline import RunClock
from surfer.core.errors import ActionFailed, ActionNotSupported, BrowserCrashed, EnvironmentFailure, SurferError
from surfer.models.imaging import ImagePolicy, prepare_image
from surfer.tools.base import Environment

from .config import AgentConfig
from .confirm import REFUSED, ConfirmationRequest, Confirmer, Refusal, SensitiveRules, acted_on, how_to_allow, origin_of
from .confirm import ask as ask_confirmer
from .control import RunControl
from .handover import agent_asks, take_turn
from .events import (
    ActionPerformed, ErrorOccurred, Event, ModelAsked, ModelCall, ModelCalled, Observed, StepFinished, StepRecord,
    StepStarted, Validated, Verdict,
)
from .layouts import Layout
from .memory import Memory
from .questions import Question
from .questions import ask as ask_question
from .repetition import screen_fingerprint, step_seen
from .result import RunResult
from .roles import Localizer, Policy, StepFailed, Validator
from .run_state import RunState, time_limit_reason, waiting_for_person
from .secrets import Secrets, refused_outcome

MAX_REFUSALS = 3  # distinct sensitive actions refused before the run ends needs_approval

Outcome = tuple[str, str | None, str | None]  # (status, answer, reason): the run ends, or an answer was judged


@dataclass(frozen=True)
class Roles:
    """The three roles a step asks, and per role (localizer, validator) whether it
    continues the policy's request of the step (one backend and model)."""

    policy: Policy
    localizer: Localizer
    validator: Validator
    continuation: Mapping[str, bool]

    def after(self, role: str, memory: Memory) -> Any:
        """The policy's turn for `role` to continue (None: a request of its own)."""
        return memory.policy_turn if self.continuation[role] else None

    def for_environment(self, environment: Any) -> "Roles":
        """These roles for a run in `environment`: its policy offered only the actions it takes."""
        policy = self.policy.for_environment(frozenset(getattr(environment, "unsupported_actions", frozenset())))
        return self if policy is self.policy else dataclasses.replace(self, policy=policy)


@dataclass(frozen=True)
class Guards:
    """Who says yes to a sensitive action, and the rules that say which are."""

    sensitive: SensitiveRules
    confirm: Confirmer


@dataclass(frozen=True)
class Imaging:
    """How a screenshot is prepared for the model: the profile's image rule and each image's token cap."""

    rule: ImagePolicy
    tokens: int | None = None


@dataclass(frozen=True)
class StepInputs:
    """Everything a step depends on."""

    roles: Roles
    layout: Layout
    imaging: Imaging
    config: AgentConfig
    secrets: Secrets
    guards: Guards
    environment: Environment
    memory: Memory
    control: RunControl  # pause, hints, finish now: read between steps
    emit: Callable[[Event], Awaitable[None]]  # the sink of the run's events


def task_prompt(run: RunState, secrets: Secrets) -> str:
    """The task as the policy reads it: the session's earlier tasks, the task, the secrets' note, the answer's shape."""
    return "\n\n".join([
        *([run.earlier] if run.earlier else []), run.task, *([secrets.prompt_note()] if secrets else []),
        *([run.answer.describe()] if run.answer else []),
    ])


def _answer_data(action: Any) -> Any:
    return action.data if isinstance(action, Answer) else None


def _answer_text(action: Answer) -> str:
    """The answer as the validator judges it: its text, and its data when typed."""
    if action.data is None:
        return action.text
    data = action.data.model_dump_json() if hasattr(action.data, "model_dump_json") else json.dumps(action.data)
    return f"{action.text}\nData: {data}"


class Stepper:
    """The steps of one task run, over its `StepInputs` (see the module's docstring)."""

    def __init__(self, inputs: StepInputs, run: RunState) -> None:
        self.inputs = inputs
        self.run = run
        self.emit = inputs.emit
        self.env = inputs.environment
        self.memory = inputs.memory
        self.config = inputs.config
        self.secrets = inputs.secrets

    async def steps(self, clock: RunClock) -> RunResult:
        """Steps until an outcome or a limit (a `RunResult`). A step still running at
        `clock.steps_until` is cut off (its model call cancelled) and dropped; the
        final answer then gets the time left until `clock.end`."""
        run, env, cfg, memory = self.run, self.env, self.config, self.memory
        limit = time_limit_reason(cfg.max_seconds)
        loop = asyncio.get_running_loop()
        rejections = failed_streak = 0
        for index in range(1, cfg.max_steps + 1):
            for hint in await self.inputs.control.checkpoint():  # waits here while paused
                hint = self.secrets.scrub(hint)
                memory.add_note(f"Hint from the user: {hint}")
                run.hints.append(hint)
            ended = await take_turn(run, self.inputs.control, self.emit, env, memory, index - 1)  # a person's turn, if asked for
            if ended is not None:
                return run.result(ended[0], reason=ended[1])
            if self.inputs.control.finish_requested:
                return await self._final(index, "the user asked to finish now", clock)
            if loop.time() >= clock.steps_until:
                return await self._final(index, limit, clock)
            try:
                async with clock.limit() as stepping:
                    record, outcome = await self.step(index)
            except TimeoutError:
                if not stepping.expired():
                    raise
                await self.emit(ErrorOccurred(index, f"step {index} was cut off at the time limit and dropped"))
                return await self._final(index, f"{limit} during step {index}", clock)
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
        return await self._final(cfg.max_steps + 1, f"step limit of {cfg.max_steps} reached", clock)

    async def _observe(self, record: StepRecord) -> Any:
        t = time.perf_counter()
        observation = await self.env.observe()
        if self.secrets:  # a value a form put into the URL, or a page title showing it
            scrub = self.secrets.scrub
            observation = dataclasses.replace(
                observation, url=scrub(observation.url), title=scrub(observation.title),
                tabs=tuple(scrub(t) for t in observation.tabs), notices=tuple(scrub(n) for n in observation.notices),
            )
        record.timings.screenshot = time.perf_counter() - t
        t = time.perf_counter()
        imaging = self.inputs.imaging
        prepared = dataclasses.replace(await prepare_image(observation.screenshot, imaging.rule, imaging.tokens), step=record.index)
        record.timings.encode = time.perf_counter() - t
        self.memory.add_image(prepared)
        record.url, record.title = observation.url, observation.title
        shot = observation.screenshot
        record.screenshot, record.screenshot_ext = shot.data, shot.extension
        record.screen = {"width": shot.size.width, "height": shot.size.height, "scale": shot.scale, "origin": list(shot.origin)}
        return observation, prepared

    def _sink(self, record: StepRecord) -> Callable[[ModelCall], Awaitable[None]]:
        run = self.run

        async def sink(call: ModelCall) -> None:
            call.seq = run.calls
            run.calls += 1
            record.calls.append(call)
            record.timings.model += call.seconds
            await self.emit(ModelCalled(record.index, call))
        return sink

    @contextlib.asynccontextmanager
    async def _recorded_step(self, index: int) -> AsyncIterator[StepRecord]:
        """A step's record: appended and announced when the step ends, also with an
        error; dropped when the step is cancelled (time limit, Ctrl-C, SIGTERM)."""
        run = self.run
        started, waited = time.perf_counter(), run.waited
        record = run.current = StepRecord(index)
        record.hints, run.hints = run.hints, []
        await self.emit(StepStarted(index))
        try:
            yield record
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            if record.error is None and isinstance(exc, SurferError):
                record.error = str(exc)  # the step the run ended in says why (the server gone, a refused request)
            record.timings.waiting = run.waited - waited
            await self._finish_step(record, started)
            raise
        else:
            record.timings.waiting = run.waited - waited
            await self._finish_step(record, started)

    async def _finish_step(self, record: StepRecord, started: float) -> None:
        record.timings.total = time.perf_counter() - started
        self.run.records.append(record)
        await self.emit(StepFinished(record))
        if self.run.run_dir is not None:  # written to tokens.jsonl: a long run does not hold every call's ids in memory
            for call in record.calls:
                call.tokens = None if call.tokens is None else call.tokens.without_ids()

    async def step(self, index: int) -> tuple[StepRecord, Outcome | None]:
        """One step. Returns the record and, when the run should end or an answer
        was judged, (status, answer, reason)."""
        run, env, memory, roles = self.run, self.env, self.memory, self.inputs.roles
        verdict_outcome: Outcome | None = None
        async with self._recorded_step(index) as record:
            sink = self._sink(record)
            try:
                observation, prepared = await self._observe(record)
                await self.emit(Observed(index, record.url or "", record.screenshot or b"", record.screenshot_ext))
                await self.emit(ModelAsked(index, "policy"))
                decision = await roles.policy.decide(memory, observation, sink, answer=run.answer)
                record.thought, record.notes, record.action = decision.thought, decision.notes, decision.action
                if decision.notes:
                    memory.add_note(decision.notes, own=True)
                action = decision.action
                if isinstance(action, (Answer, Fail)):  # no browser work, but the trace shows where the run ended
                    async with env.step_group(f"step {index}: {headline(action)}"):
                        pass
                if isinstance(action, Answer):
                    verdict_outcome = await self._judge(record, action, sink)
                elif isinstance(action, Fail):
                    memory.add_history(index, action.describe(), "gave up")
                    verdict_outcome = ("failed", None, action.reason)
                elif isinstance(action, AskUser) and action.kind == "take_over":  # a person's turn next (handover.py)
                    verdict_outcome = agent_asks(run, self.inputs.control, env, memory, record, self.secrets.scrub(action.question))
                elif isinstance(action, AskUser):
                    verdict_outcome = await self._ask_user(record, action)
                else:
                    points = []
                    for target in targets_of(action):
                        await self.emit(ModelAsked(index, "localizer"))
                        points.append(await roles.localizer.locate(target, prepared, sink, roles.after("localizer", memory)))
                    record.points = points
                    record.action = action = with_points(action, points)
                    run.start_origin = run.start_origin or origin_of(record.url)
                    element = await acted_on(self.env, action)
                    if element is not None:
                        record.element = element.to_dict()
                    if await self._secret_refused(record, action, element):
                        await self._watch_repetition(record, action, points)  # asking again and again ends `stuck`
                    elif await self._confirmed(record, action, element, observation.notices):
                        await self._perform(record, action, points)
                        await self._watch_repetition(record, action, points)
                    elif run.needs_approval:
                        verdict_outcome = ("needs_approval", None, run.needs_approval)
            except StepFailed as exc:
                record.error = str(exc)
                memory.add_history(index, record.action.describe() if record.action else "(no action)", f"error: {exc}")
                await self.emit(ErrorOccurred(index, str(exc)))
        return record, verdict_outcome

    async def _ask_user(self, record: StepRecord, action: AskUser) -> Outcome | None:
        """The policy's question to the user: the reply goes into memory (a secret one as a placeholder);
        with nobody to reply, the run ends `needs_input`. Time spent waiting is not the task's."""
        run, memory, secrets = self.run, self.memory, self.secrets
        text = secrets.scrub(action.question)
        question = Question(record.index, text, action.secret, record.url, record.screenshot, record.screenshot_ext)
        reply, by = await waiting_for_person(ask_question(run.on_question, run.answers, question), run)
        if reply is None:
            record.outcome = {"question": text, "answered": False}
            memory.add_history(record.index, action.describe(), "nobody replied")
            run.question = text
            return ("needs_input", None, f"the agent needs the user's reply to: {text}")
        if reply.secret:
            shown = "{{" + secrets.add_reply(reply.text) + "}}"
            note = f"The user replied to {text!r} with a secret: type it as {shown} (its value is hidden from you)."
        else:
            shown = secrets.scrub(reply.text)
            note = f"The user replied to {text!r}: {shown}"
        record.outcome = {"question": text, "reply": shown, "by": by, **({"secret": True} if reply.secret else {})}
        memory.add_note(note)
        memory.add_history(record.index, action.describe(), f"the user replied: {shown}")
        await self._watch_repetition(record, action, [])  # the same question again is a repetition
        return None

    # -- sensitive actions ----------------------------------------------------

    async def _ask(self, record: StepRecord, action: Any, reason: str) -> bool:
        confirm = self.inputs.guards.confirm
        request = ConfirmationRequest(record.index, action, reason, record.url, record.screenshot, record.screenshot_ext)
        asking = ask_confirmer(confirm, request)
        # a person deciding (the terminal, an SDK callback) is waited for like a reply: not charged to the time limit
        approved = await (asking if getattr(confirm, "fixed", False) else waiting_for_person(asking, self.run))
        record.confirmation = {"reason": reason, "approved": approved, "by": getattr(confirm, "__name__", "confirm")}
        return approved

    def download_confirmer(self) -> Callable[[str, str], Awaitable[bool]]:
        """What the environment asks before it keeps a download (a sensitive action)."""
        async def confirm_download(name: str, url: str) -> bool:
            record = self.run.current or StepRecord(0)
            reason = f"it downloads a file ({name} from {self.secrets.scrub(url)})"
            if self._approved_without_asking(record, reason, url):
                return True
            return await self._ask(record, record.action, reason)
        return confirm_download

    def _approved_without_asking(self, record: StepRecord, reason: str, *urls: str) -> bool:
        """On a host of `approve_domains` (and not of `confirm_domains`) the rules' yes is given."""
        sensitive = self.inputs.guards.sensitive
        if sensitive.on_confirm_domain(record.url):
            return False
        host = next(filter(None, (sensitive.approved_host(u) for u in (record.url, *urls))), None)
        if host is None:
            return False
        record.confirmation = {"reason": reason, "approved": True, "by": f"approve_domain:{host}"}
        return True

    async def _secret_refused(self, record: StepRecord, action: Any, element: Any) -> bool:
        """A bound secret typed into a field of another site, or put into a URL to one, is refused (agent/secrets.py):
        not performed, the step's outcome and the policy's history say which secret and which host."""
        kind = getattr(self.env, "kind", "")
        if not self.secrets or kind == "replay":  # a replay types nothing anywhere
            return False
        refused = self.secrets.refusal(
            action, field_origin=element.origin if element is not None else None, page_url=record.url or "",
            form_origin=(element.form.sends_to or element.form.action_origin) if element is not None and element.form is not None
            else None,
            desktop=kind == "desktop", default=self.config.allowed_domains,
        )
        if refused is None:
            return False
        record.outcome = refused_outcome(refused)
        reason = refused[2]
        self.memory.add_history(record.index, action.describe(), reason)
        await self.emit(ErrorOccurred(record.index, reason))
        return True

    async def _confirmed(self, record: StepRecord, action: Any, element: Any, notices: tuple[str, ...]) -> bool:
        """Whether the action may be performed: sensitive ones need a yes. A refusal
        goes into the history with what to do instead; asking again for a refused
        action (or too many refusals) sets `run.needs_approval`, which ends the run."""
        run = self.run
        reason = self.inputs.guards.sensitive.reason(action, record.url, "\n".join(notices), element, run.start_origin)
        if reason is None or self._approved_without_asking(record, reason):
            return True
        if await self._ask(record, action, reason):
            return True
        refusal = Refusal.of(action, element)
        again = any(refusal.same(earlier) for earlier in run.refusals)
        run.refusals.append(refusal)
        record.outcome = {"error": f"not performed: {reason}; {REFUSED}", "refused": True}
        self.memory.add_history(record.index, action.describe(), f"not performed: {reason}; {REFUSED}")
        if again or len(run.refusals) >= MAX_REFUSALS:
            why = "was asked for again after a refusal" if again else f"was the {len(run.refusals)}th sensitive action refused"
            run.needs_approval = (
                f"needs a person's approval: {action.describe()} ({reason}) {why}; {how_to_allow(record.url)}"
            )
        return False

    # -- acting, repetition, answers --------------------------------------------

    async def _watch_repetition(self, record: StepRecord, action: Any, points: list[Any]) -> None:
        if not record.screenshot or action.type == "wait":  # waiting on a screen that does not change is what waiting is
            return
        # decoding the screenshot (a PNG is decoded whole) is kept off the event loop that other sessions share
        screen = await asyncio.to_thread(screen_fingerprint, record.screenshot)
        warning = self.run.repetition.seen(step_seen(screen, action.describe(), points))
        if warning is None:
            return
        self.run.repeats += 1
        text = f"{warning} (warning {self.run.repeats} of {self.config.max_repeats})"
        record.outcome = {**(record.outcome or {}), "repetition": text}
        self.memory.add_note(f"You are repeating yourself: {text}. Do something different, or answer or give up.")

    async def _perform(self, record: StepRecord, action: Any, points: list[Any]) -> None:
        scrub = self.secrets.scrub
        refusals: list[tuple[str, str, str]] = []  # a bound secret's keys held back (agent/secrets.py: keys_guard)
        guard = self.secrets.keys_guard(action, record.url or "", self.config.allowed_domains, refusals) \
            if hasattr(self.env, "keys_guard") else None
        hide = isinstance(action, TypeText) and hasattr(self.env, "hide_typed") and self.secrets.reveal(action.text) != action.text
        try:
            if guard is not None:
                self.env.keys_guard = guard  # type: ignore[attr-defined]
            if hide:  # the field that takes a secret draws dots (screenshots are pixels)
                self.env.hide_typed = True  # type: ignore[attr-defined]
            async with self.env.step_group(f"step {record.index}: {headline(action)}"):
                outcome = await self.env.perform(self.secrets.reveal_action(action))  # the executor alone sees real values
        except (ActionFailed, ActionNotSupported, ValueError) as exc:
            error = scrub(str(exc))
            record.error = error
            record.outcome = {"error": error}
            if refusals:  # a bound secret's keys held back: recorded as a refusal before the click is
                record.error, record.outcome = None, refused_outcome(refusals[0])
            self.memory.add_history(record.index, action.describe(), error if refusals else f"error: {error}")
            await self.emit(ErrorOccurred(record.index, error))
        else:
            outcome.detail = scrub(outcome.detail)
            record.timings.action, record.timings.settle = outcome.action_seconds, outcome.settle_seconds
            record.outcome = outcome.to_dict()
            self.memory.add_history(record.index, action.describe(), outcome.detail or "done")
            await self.emit(ActionPerformed(record.index, action, points, record.outcome))
        finally:
            if guard is not None:
                self.env.keys_guard = None  # type: ignore[attr-defined]
            if hide:
                self.env.hide_typed = False  # type: ignore[attr-defined]

    async def _judge(self, record: StepRecord, action: Answer, sink: Any) -> Outcome:
        memory, roles = self.memory, self.inputs.roles
        answer, judged = action.text, _answer_text(action)
        if not self.config.validate_answers:
            memory.add_history(record.index, f"answer({answer!r})", "accepted (no validator)")
            return ("success", answer, None)
        await self.emit(ModelAsked(record.index, "validator"))
        verdict: Verdict = await roles.validator.judge(
            self.run.task, judged, self.inputs.layout.validator_images(memory), sink, roles.after("validator", memory),
        )
        record.verdicts.append(verdict)
        await self.emit(Validated(record.index, verdict))
        if verdict.accepted:
            memory.add_history(record.index, f"answer({answer!r})", "accepted by the validator")
            return ("success", answer, verdict.reasons or None)
        memory.add_note(f"The validator rejected the answer {answer!r}: {verdict.reasons}")
        memory.add_history(record.index, f"answer({answer!r})", f"rejected: {verdict.reasons}")
        return ("rejected", answer, verdict.reasons)

    async def _final(self, index: int, why: str, clock: RunClock) -> RunResult:
        """At a limit, ask the policy once for a final answer (validated like any
        answer), within the time left until `clock.end`."""
        run = self.run
        outcome: dict[str, Any] = {"status": "limit", "reason": f"{why}; no final answer (no time was left to ask)"}
        if asyncio.get_running_loop().time() >= clock.end:
            return run.result(**outcome)
        try:
            async with clock.limit(final=True) as asking, self._recorded_step(index) as record:
                sink = self._sink(record)
                try:
                    observation, _ = await self._observe(record)
                    await self.emit(ModelAsked(index, "policy"))
                    decision = await self.inputs.roles.policy.decide(self.memory, observation, sink, final=True, answer=run.answer)
                    record.thought, record.action = decision.thought, decision.action
                    if isinstance(decision.action, Fail):
                        outcome = {"status": "failed", "reason": f"{why}; gave up: {decision.action.reason}"}
                    else:
                        status, _, reason = await self._judge(record, decision.action, sink)
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
