"""The three roles. Each builds its messages from templates, asks its backend
with its own JSON schema (named after the role), parses and validates the
answer, and retries malformed output a bounded number of times with the
error fed back to the model."""

from __future__ import annotations

import copy
import functools
import json
import re
import time
from typing import Any, Awaitable, Callable, Literal, TypeVar, Union

from pydantic import BaseModel, Field, ValidationError

from surfer.core.actions import Action, Answer, CssPoint, Fail
from surfer.core.coordinates import model_to_css
from surfer.core.errors import ConfigError, ContextTooLong, ModelOutputError, ModelRequestError, RunError
from surfer.core.observation import Observation
from surfer.models.backend import Completion, Message, ModelBackend, ModelRequest, TextPart, Usage
from surfer.models.imaging import PreparedImage
from surfer.models.profiles import Profile
from surfer.models.schema import parse_json_object, portable_schema
from surfer.prompts import render

from .answers import AnswerSchema
from .events import NO_ANSWER, ModelCall, Verdict
from .layouts import DEFAULT_LAYOUT, Layout, image_parts
from .memory import Memory, Turn

T = TypeVar("T")
MAX_REPEATED_REPLY = 2000  # characters of a rejected reply repeated to the model with the error
CallSink = Callable[[ModelCall], Awaitable[None]]


class StepFailed(Exception):
    """A role could not get usable output within its retries."""


class PolicyDecision(BaseModel):
    thought: str = ""
    notes: str = ""
    action: Action


class FinalDecision(BaseModel):
    thought: str = ""
    notes: str = ""
    action: Union[Answer, Fail] = Field(discriminator="type")


class ValidatorAnswer(BaseModel):
    verdict: Literal["accept", "reject"]
    reasons: str = ""


def _validation_feedback(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "answer"
        problems.append(f"{where}: {err['msg']}")
    return "The answer does not match the required format: " + "; ".join(problems) + "."


def _pydantic_parser(model: type[BaseModel]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        data = parse_json_object(text)
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise ModelOutputError(_validation_feedback(exc)) from None
    return parse


class RoleClient:
    """One role's connection: backend, sampling and the retry-with-feedback loop."""

    def __init__(
        self, name: str, backend: ModelBackend, profile: Profile, *,
        temperature: float | None = None, max_tokens: int | None = None, output_retries: int = 2,
        redact: Callable[[str], str] | None = None, record_tokens: bool = False,
    ) -> None:
        sampling = profile.sampling_for(name)
        self.record_tokens = record_tokens  # every completion must carry its token ids (Completion.tokens)
        # Applied to every text sent and every completion received (secrets never cross).
        self.redact = redact
        self.name = name
        self.backend = backend
        self.profile = profile
        self.temperature = temperature if temperature is not None else sampling.temperature
        self.max_tokens = max_tokens if max_tokens is not None else sampling.max_tokens
        self.output_retries = output_retries
        self.extra_body = profile.extra_body_for(name)

    async def ask(
        self, messages: list[Message], schema: dict[str, Any], parse: Callable[[str], T], sink: CallSink,
    ) -> T:
        value, _ = await self.ask_turn(messages, schema, parse, sink)
        return value

    async def ask_continuing(
        self, continued: list[Message], alone: Callable[[], list[Message]] | None, schema: dict[str, Any],
        parse: Callable[[str], T], sink: CallSink,
    ) -> T:
        """`ask` with `continued` (the policy's turn and this role's instruction); when that outgrew the
        model's context, with the role's own request `alone()` instead (None: not a continuation)."""
        try:
            return await self.ask(continued, schema, parse, sink)
        except ContextTooLong:
            if alone is None:
                raise
            return await self.ask(alone(), schema, parse, sink)

    async def ask_turn(
        self, messages: list[Message], schema: dict[str, Any], parse: Callable[[str], T], sink: CallSink,
    ) -> tuple[T, Turn]:
        """`ask`, also returning the request that got the usable reply and that reply (a `Turn`)."""
        conversation = list(messages)
        last_error = ""
        for _attempt in range(self.output_retries + 1):
            request = ModelRequest(
                messages=self._redacted(conversation), schema_name=self.name, schema=schema,
                temperature=self.temperature, max_tokens=self.max_tokens, extra_body=self.extra_body,
            )
            completion = await self._complete(request, sink)
            if self.record_tokens and completion.tokens is None:
                raise ModelRequestError(f"{self.backend.label} answered the {self.name} without its token ids (record_tokens)")
            text = self.redact(completion.text) if self.redact else completion.text
            call = ModelCall(self.name, request.summary(), text, completion.seconds, completion.usage, completion.structured,
                             model=completion.model, policy_version=completion.policy_version, tokens=completion.tokens)
            try:
                value = parse(text)
            except ModelOutputError as exc:
                last_error = str(exc)
                if completion.finish_reason == "length":  # not malformed: cut off, which "not JSON" would hide
                    limit = f"max_tokens {request.max_tokens}" if request.max_tokens else "the server's limit"
                    last_error = f"The answer was cut off at the token limit ({limit}) before it was complete. Answer more briefly."
                call.error = last_error
                await sink(call)
                # the rejected reply as the server computed it (the generation prompt's tail first), so that the
                # retry extends the rejected call token for token; a long one is cut short
                shown = self.profile.reply_prefix + text if len(text) <= MAX_REPEATED_REPLY else text[:MAX_REPEATED_REPLY]
                conversation += [Message.text("assistant", shown), Message.text("user", f"{last_error} Answer again.")]
                continue
            await sink(call)
            return value, Turn(request.messages, text)
        raise StepFailed(f"{self.name} output unusable after {self.output_retries + 1} attempt(s): {last_error}")


    async def _complete(self, request: ModelRequest, sink: CallSink) -> Completion:
        """The backend's completion of `request`. A call that ends in an error the run stops for (the server
        gone past its wait, a refused request) is recorded with it, and its time as the model's, not surfer's."""
        started = time.perf_counter()
        try:
            return await self.backend.complete(request)
        except ContextTooLong:
            raise  # asked again, shorter (ask_continuing, Layout.shorten)
        except (RunError, ConfigError) as exc:
            await sink(ModelCall(self.name, request.summary(), "", time.perf_counter() - started, Usage(),
                                 error=f"{NO_ANSWER}{exc}"))
            raise

    def _redacted(self, messages: list[Message]) -> tuple[Message, ...]:
        if self.redact is None:
            return tuple(messages)
        redact = self.redact
        return tuple(
            Message(m.role, tuple(TextPart(redact(p.text)) if isinstance(p, TextPart) else p for p in m.content))
            for m in messages
        )


@functools.cache
def _made_schema(model: type[BaseModel]) -> dict[str, Any]:
    return portable_schema(model.model_json_schema())


def role_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s portable JSON schema, made once in a process (the policy's takes ~14 ms of CPU, and a batch
    makes its roles for every task); each role is given a copy of its own."""
    return copy.deepcopy(_made_schema(model))


def without_actions(prompt: str, unsupported: frozenset[str]) -> str:
    """`prompt` less the lines of its action list that offer only action types in `unsupported`."""
    if not unsupported:
        return prompt
    kept = []
    for line in prompt.splitlines():
        offered = re.findall(r'\{"type": "(\w+)"', line)
        if not (line.startswith("  {") and offered and set(offered) <= unsupported):
            kept.append(line)
    return "\n".join(kept)


class Policy:
    def __init__(self, client: RoleClient, layout: Layout | None = None, unsupported: frozenset[str] = frozenset()) -> None:
        self.client = client
        self.layout = layout or Layout(DEFAULT_LAYOUT, client.profile.max_images)
        self.schema = role_schema(PolicyDecision)
        self.final_schema = role_schema(FinalDecision)
        self.unsupported = unsupported
        prompt = render(client.profile.templates.get("policy", "policy"))
        self._system = Message.text("system", without_actions(prompt, unsupported))

    def for_environment(self, unsupported: frozenset[str]) -> "Policy":
        """This policy for an environment that refuses `unsupported` action types: they are not offered."""
        return self if unsupported == self.unsupported else Policy(self.client, self.layout, unsupported)

    def messages(self, memory: Memory, observation: Observation, *, final: bool = False) -> list[Message]:
        closing = render("policy_final" if final else "policy_next")
        return self.layout.policy_messages(self._system, memory, observation, closing)

    async def decide(
        self, memory: Memory, observation: Observation, sink: CallSink, *, final: bool = False,
        answer: AnswerSchema | None = None,
    ) -> PolicyDecision | FinalDecision:
        messages = self.messages(memory, observation, final=final)
        model: type[BaseModel] = FinalDecision if final else PolicyDecision
        schema = self.final_schema if final else self.schema
        parse = _pydantic_parser(model)
        if answer is not None:
            schema = answer.policy_schema(schema)
            parse = _typed_answers(parse, answer)
        while True:
            try:
                decision, turn = await self.client.ask_turn(messages, schema, parse, sink)
                # as later requests repeat it: what the server computed, the generation prompt's tail included
                memory.keep_turn(Turn(turn.messages, self.client.profile.reply_prefix + turn.reply),
                                 retried=turn.messages[len(messages):])
                return decision
            except ContextTooLong:
                if not self.layout.shorten(memory):  # one screenshot is already too long: nothing to drop
                    raise
                messages = self.messages(memory, observation, final=final)


def _typed_answers(parse: Callable[[str], Any], answer: AnswerSchema) -> Callable[[str], Any]:
    """A parser whose answers carry data validated against the run's answer schema."""

    def typed(text: str) -> Any:
        decision = parse(text)
        if isinstance(decision.action, Answer):
            decision.action = decision.action.model_copy(update={"data": answer.validate(decision.action.data)})
        return decision

    return typed


class Localizer:
    def __init__(self, client: RoleClient) -> None:
        self.client = client
        self.schema = dict(client.profile.localizer_schema)

    def messages(self, target: str, image: PreparedImage, after: Turn | None = None) -> list[Message]:
        """The screenshot first, then the instruction: targets on one screen share the prefix.
        `after` (role continuation): the policy's turn, continued with the instruction; `image`
        must then be the last image of that turn (the coordinates are read in its frame)."""
        profile = self.client.profile
        if after is not None:
            name = profile.templates.get("localizer_continue", "localizer_continue")
            return after.continued(render(name, target=target, frame_hint=profile.frame_hint))
        prompt = render(profile.templates.get("localizer", "localizer"), target=target, frame_hint=profile.frame_hint)
        return [Message("user", (*image_parts([image]), TextPart(prompt)))]

    async def locate(self, target: str, image: PreparedImage, sink: CallSink, after: Turn | None = None) -> CssPoint:
        profile = self.client.profile

        def parse(text: str) -> CssPoint:
            x, y = profile.parse_point(parse_json_object(text))
            return model_to_css(x, y, profile.frame, image.geometry)

        alone = (lambda: self.messages(target, image)) if after is not None else None
        return await self.client.ask_continuing(self.messages(target, image, after), alone, self.schema, parse, sink)


class Validator:
    def __init__(self, client: RoleClient) -> None:
        self.client = client
        self.schema = role_schema(ValidatorAnswer)

    def messages(self, task: str, answer: str, images: list[PreparedImage], after: Turn | None = None) -> list[Message]:
        """The last screenshots and the instruction; with `after` (role continuation), the
        policy's turn of the answer step continued with the instruction (its images, not `images`)."""
        templates = self.client.profile.templates
        if after is not None:
            return after.continued(render(templates.get("validator_continue", "validator_continue"), task=task, answer=json.dumps(answer)))
        prompt = render(templates.get("validator", "validator"), task=task, answer=json.dumps(answer))
        return [Message("user", (*image_parts(images[-self.client.profile.max_images:]), TextPart(prompt)))]

    async def judge(self, task: str, answer: str, images: list[PreparedImage], sink: CallSink,
                    after: Turn | None = None) -> Verdict:
        shown, parsed = images, None
        while parsed is None:
            alone = (lambda shown=shown: self.messages(task, answer, shown)) if after is not None else None
            try:
                parsed = await self.client.ask_continuing(
                    self.messages(task, answer, shown, after), alone, self.schema, _pydantic_parser(ValidatorAnswer), sink)
            except ContextTooLong:  # too long, or more images than the server takes: the later half of them
                count = min(len(shown), self.client.profile.max_images)
                if count <= 1:
                    raise
                shown, after = shown[-(count // 2):], None
        return Verdict(accepted=parsed.verdict == "accept", reasons=parsed.reasons, answer=answer)
