"""The backends a `surfer bench gpu` run puts around the HTTP one: recording what
each session sends (for the bare replay), keeping sessions from ending
(--no-ending), and answering a session's first steps without the server
(warm steps)."""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass, replace
from typing import Any

from surfer.models.backend import Completion, ModelBackend, ModelRequest
from surfer.models.limits import WrappedBackend

# the session whose task is running: set by the level's listener when a session's run starts
bench_session: contextvars.ContextVar[str] = contextvars.ContextVar("surfer_bench_session", default="")


# -- what surfer sends ---------------------------------------------------------------


@dataclass
class SentRequest:
    session: str
    body: dict[str, Any]  # the JSON body on the wire
    path: str = "chat/completions"  # or "generate": tokens in, SGLang's native route (at the server's root, not /v1)


def wire_body(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON the OpenAI SDK sends for `body` (its `extra_body` merged in)."""
    out = {k: v for k, v in body.items() if k != "extra_body"}
    out.update(body.get("extra_body") or {})
    return out


class _Wrapper(WrappedBackend):
    """A backend in front of `inner`: its label, checks and close are the inner one's."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def label(self) -> str:
        return self.inner.label


class RecordingBackend(_Wrapper):
    """The HTTP backend, remembering each request body by session (a context
    variable set when the session's run starts); `shaper`: the HTTP backend that
    lays the bodies out (default `inner`; with several servers, the first one's)."""

    def __init__(self, inner: Any, shaper: Any = None, generated: dict[int, dict[str, Any]] | None = None) -> None:
        super().__init__(inner)
        self.shaper = shaper or inner
        self.sent: list[SentRequest] = []
        # tokens in: the /generate body each answered request went as, by id(request) (the HTTP backends'
        # on_generate puts them here); a request not found here went by chat
        self.generated = {} if generated is None else generated

    async def complete(self, request: ModelRequest) -> Completion:
        try:
            return await self.inner.complete(request)
        finally:
            generate = self.generated.pop(id(request), None)
            if generate is None:
                # in full (no image refs): the bare generator replays these bodies after the server's caches were emptied
                body = self.shaper._body(request, self.shaper.structured_mode, full_images=True)
                self.sent.append(SentRequest(bench_session.get(), wire_body(body)))
            else:  # the ids as sent, the server's own request id left for it to give again
                self.sent.append(SentRequest(bench_session.get(), {k: v for k, v in generate.items() if k != "rid"}, "generate"))


# The actions that end a session or pause it for a person: NoEnding takes them out of the policy's schema.
ENDING_ACTIONS = frozenset({"answer", "fail", "ask_user"})


class NoEnding(_Wrapper):
    """The policy's schema without the actions that end or pause a session, so that every session runs
    its recording's length (--no-ending): under the grammar, a model with random weights otherwise ends
    most sessions within a few steps, and a measure of long sessions (a prefix kept across steps) sees
    mostly first requests. The schema is the same for every variant of a run."""

    async def complete(self, request: ModelRequest) -> Completion:
        if request.schema_name == "policy" and request.schema is not None:
            request = replace(request, schema=without_actions(request.schema, ENDING_ACTIONS))
        return await self.inner.complete(request)


def without_actions(schema: dict[str, Any], kinds: frozenset[str]) -> dict[str, Any]:
    """`schema` with the members of its `action` union whose `type` is one of `kinds` left out."""
    action = (schema.get("properties") or {}).get("action") or {}
    members = action.get("anyOf") or action.get("oneOf")
    if not members:
        return schema
    key = "anyOf" if "anyOf" in action else "oneOf"
    kept = [m for m in members if ((m.get("properties") or {}).get("type") or {}).get("const") not in kinds]
    if not kept:  # a schema of ending actions only (the last step's): left as it is
        return schema
    return {**schema, "properties": {**schema["properties"], "action": {**action, key: kept}}}


WARM = "warm-start"  # Completion.structured of the answers WarmStart gives itself


class WarmStart(_Wrapper):
    """Answers each session's first `steps` steps itself, without the server: the policy clicks a
    described target (a different one each step), the localizer points at it. The agent builds those
    steps' history as in any run (screenshots, step lines), so a session enters the measured run with
    `steps` screenshots in its requests, as a session deep into a long task does; its first request
    reaches the server cold. Later requests go to `inner`."""

    def __init__(self, inner: ModelBackend, steps: int) -> None:
        super().__init__(inner)
        self.steps = steps
        self._answered: dict[str, int] = {}  # session -> policy answers given here
        self._last_local: dict[str, bool] = {}  # session -> the last policy answer was given here

    async def complete(self, request: ModelRequest) -> Completion:
        session, role = bench_session.get(), request.schema_name
        if role == "policy":
            step = self._answered.get(session, 0)
            self._last_local[session] = local = step < self.steps
            if local:
                self._answered[session] = step + 1
                return self._answer({"thought": f"Step {step + 1}: open the next part of the form.",
                                     "notes": f"Form section {step + 1} visited.",
                                     "action": {"type": "click", "target": f"the link of section {step + 1}"}})
        elif role == "localizer" and self._last_local.get(session):
            step = self._answered[session]
            return self._answer({"x": 200 + (step * 37) % 600, "y": 200 + (step * 53) % 600})
        return await self.inner.complete(request)

    @staticmethod
    def _answer(data: dict[str, Any]) -> Completion:
        return Completion(text=json.dumps(data), model=WARM, structured=WARM)
