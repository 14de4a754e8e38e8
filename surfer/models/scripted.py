"""A scripted model double shipped in the library, for offline tests of your
own agents (no server, no network).

    model = ScriptedModel(policy=[{"thought": "...", "action": {...}}],
                          localizer=[{"x": 500, "y": 500}],
                          validator=[{"verdict": "accept", "reasons": "ok"}])
    agent = Agent(backend=model, ...)

Each role gets its answers in order. An answer is a dict (sent as JSON), a
string (sent verbatim, e.g. to simulate malformed output), or a callable
taking the `ModelRequest` and returning either.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any, Callable, Iterable, Union

from .backend import Completion, ModelBackend, ModelRequest, Usage

Reply = Union[str, dict[str, Any], Callable[[ModelRequest], Union[str, dict[str, Any]]]]


class ScriptExhausted(AssertionError):
    """The agent asked a role for more answers than the script holds."""


class ScriptedModel(ModelBackend):
    """A model backend that answers each role from a script, for tests of your own agents: no server.

        ScriptedModel(policy=[...], localizer=[{"x": 230, "y": 218}], validator=[{"verdict": "accept", "reasons": "ok"}])

    `policy`, `localizer`, `validator`: each role's replies, used in order, one per request. A reply is a dict
    (sent as JSON), a str (sent verbatim: malformed output, to test the retry with feedback) or a callable
    given the `ModelRequest` and returning either. Points are in the profile's frame (0..1000 for holotron
    and holo2). `default={"policy": reply}`: a role's reply once its list is used up (a callable decides
    each time). A role asked for more than it holds raises `ScriptExhausted` (an AssertionError): the run
    ends `error` and it is raised to you. `requests` keeps every request received; `enqueue(role, *replies)`
    adds replies. One instance serves every run of the agents given it, their replies taken in turn."""

    def __init__(
        self,
        policy: Iterable[Reply] = (),
        localizer: Iterable[Reply] = (),
        validator: Iterable[Reply] = (),
        *,
        default: dict[str, Reply] | None = None,
    ) -> None:
        self.queues: dict[str, deque[Reply]] = {
            "policy": deque(policy), "localizer": deque(localizer), "validator": deque(validator),
        }
        self.defaults = default or {}
        self.requests: list[ModelRequest] = []

    def enqueue(self, role: str, *replies: Reply) -> None:
        self.queues.setdefault(role, deque()).extend(replies)

    async def complete(self, request: ModelRequest) -> Completion:
        self.requests.append(request)
        queue = self.queues.setdefault(request.schema_name, deque())
        if queue:
            reply = queue.popleft()
        elif request.schema_name in self.defaults:
            reply = self.defaults[request.schema_name]
        else:
            role = request.schema_name
            raise ScriptExhausted(f"ScriptedModel has no more {role!r} answers: the run asked for more than the script "
                                  f"holds; give more replies, or default={{{role!r}: reply}} for every later one")
        if callable(reply):
            reply = reply(request)
        text = reply if isinstance(reply, str) else json.dumps(reply)
        return Completion(text=text, usage=Usage(100, len(text) // 4), model="scripted", structured="scripted")
