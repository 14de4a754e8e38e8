"""The typed event stream. The CLI live view, the SDK's iterator and the run
directory writer are all consumers of these.

A run emits `RunStarted`, then for each step `StepStarted`, `Observed`, and per
model request `ModelAsked` and its `ModelCalled` (policy, then localizer for a
pointed action), then `ActionPerformed` (or `Validated` for an answer) and
`StepFinished`; `ErrorOccurred` where something failed; `Finished` last, always
(also for a run cancelled or ended by an error). A person's take-over adds
`HandedOver`, `HumanActed` and `HandedBack` between steps (agent/handover.py).

Every event has `to_dict()`, its JSON-able form (agent/event_json.py): `{"event": "StepFinished", ...}`,
never an image's bytes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Union

from surfer.core.actions import Action, CssPoint
from surfer.models.backend import Tokens, Usage

from .event_json import EventDict
from .result import RunResult


NO_ANSWER = "no answer: "  # the error of a call the server never answered (the step's error says why too)


@dataclass
class ModelCall:
    """One request to one role's model: its `role` (policy, localizer, validator), the `request` as
    recorded (counts, sampling and the prompt, images named by step), the raw `completion`, its wall
    `seconds` and token `usage`, `error` when the completion was rejected (the role asked again), and
    the `model` the server answered with."""

    role: str
    request: dict[str, Any]
    completion: str
    seconds: float
    usage: Usage
    structured: str = ""
    error: str | None = None  # why the completion was rejected, when it was
    model: str = ""  # the model (or adapter) the server answered with
    policy_version: str | None = None  # the session's policy's version, else the configured policy_version
    # token for token, when recorded (record_tokens); with a run directory the ids are in its tokens.jsonl and
    # dropped here once the step is finished (Tokens.without_ids), so a long run does not hold them all
    tokens: Tokens | None = None
    seq: int | None = None  # the call's number in the run (its line in tokens.jsonl)

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role, "request": self.request, "completion": self.completion,
            "seconds": round(self.seconds, 4), "structured": self.structured, "error": self.error,
            "usage": {"prompt_tokens": self.usage.prompt_tokens, "completion_tokens": self.usage.completion_tokens},
            "model": self.model, **({"policy_version": self.policy_version} if self.policy_version is not None else {}),
            **({"call": self.seq} if self.tokens is not None else {}),
        }


@dataclass
class Verdict:
    """The validator's verdict on a proposed answer: `accepted`, its `reasons`, and the `answer` judged."""

    accepted: bool
    reasons: str
    answer: str


@dataclass
class Timings:
    model: float = 0.0
    action: float = 0.0
    settle: float = 0.0
    screenshot: float = 0.0
    encode: float = 0.0
    total: float = 0.0
    waiting: float = 0.0  # waiting for a person: a reply, a yes, a take-over (not surfer's time)

    @property
    def overhead(self) -> float:
        """Everything but model time and the time a person was waited for."""
        return max(0.0, self.total - self.model - self.waiting)

    def to_dict(self) -> dict[str, float]:
        data = {k: round(v, 4) for k, v in vars(self).items() if k != "waiting" or round(v, 4)}
        data["overhead"] = round(self.overhead, 4)
        return data


@dataclass
class StepRecord:
    """Everything known about one step; one line of trajectory.jsonl (its fields are that line's,
    docs/reference/formats.md): `index` (1, 2, ...), `url` and `title` of the page it looked at, the
    `screenshot` bytes, the policy's `thought` and `notes`, the `action` (a surfer Action, None when the
    step failed), the `points` acted at (CSS pixels), the action's `outcome`, the model `calls`, the
    validator's `verdicts`, `error`, and `timings` (seconds: model, action, settle, screenshot, total)."""

    index: int
    url: str = ""
    title: str = ""
    screenshot: bytes = b""
    screenshot_ext: str = "jpg"
    screenshot_file: str = ""
    screen: dict[str, Any] = field(default_factory=dict)  # pixel size, scale, CSS origin of the screenshot
    thought: str = ""
    notes: str = ""
    action: Action | None = None
    points: list[CssPoint] = field(default_factory=list)
    outcome: dict[str, Any] = field(default_factory=dict)
    calls: list[ModelCall] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)  # the user's hints that reached this step's prompt
    confirmation: dict[str, Any] | None = None  # a sensitive action's confirmation: reason, approved, by whom
    element: dict[str, Any] | None = None  # what the page said about the element acted on (role, name, form)
    error: str | None = None
    timings: Timings = field(default_factory=Timings)

    @property
    def usage(self) -> Usage:
        total = Usage()
        for call in self.calls:
            total.add(call.usage)
        return total

    def to_dict(self) -> dict[str, Any]:
        calls: dict[str, list[dict[str, Any]]] = {}
        for call in self.calls:
            calls.setdefault(call.role, []).append(call.to_dict())
        usage = self.usage
        return {
            "index": self.index, "url": self.url, "title": self.title, "screenshot": self.screenshot_file,
            "screen": self.screen,
            "thought": self.thought, "notes": self.notes,
            "action": self.action.model_dump(mode="json", exclude_none=True, exclude={"point", "to_point"}) if self.action else None,
            "points": [{"x": round(p.x, 2), "y": round(p.y, 2)} for p in self.points],
            "outcome": self.outcome, "calls": calls,
            "verdicts": [vars(v) for v in self.verdicts], "error": self.error,
            **({"hints": self.hints} if self.hints else {}),
            **({"confirmation": self.confirmation} if self.confirmation else {}),
            **({"element": self.element} if self.element else {}),
            "timings": self.timings.to_dict(),
            "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens},
        }


@dataclass
class RunStarted(EventDict):
    """A run began: its `run_id`, `task`, start `url`, `run_dir` (None when nothing is recorded) and
    `config`, what the run directory's run.json says of the agent (profile, backends, limits)."""

    run_id: str
    task: str
    url: str | None
    run_dir: str | None
    config: dict[str, Any]


@dataclass
class StepStarted(EventDict):
    """Step `index` (1, 2, ...) began."""

    index: int


@dataclass
class Observed(EventDict):
    """The screen step `step` looks at, as soon as it is captured (before the model is asked): the
    page's `url` and the `screenshot` bytes, an image of type `extension` (jpg or png)."""

    step: int
    url: str
    screenshot: bytes
    extension: str


@dataclass
class ModelAsked(EventDict):
    """A request to `role`'s model (policy, localizer, validator) in step `step` is about to go out
    (the answer comes as ModelCalled)."""

    step: int
    role: str


@dataclass
class ModelCalled(EventDict):
    """A model request of step `step` was answered: `call` holds it (a ModelCall: role, completion,
    seconds, usage, error)."""

    step: int
    call: ModelCall


@dataclass
class ActionPerformed(EventDict):
    """Step `step` performed `action` (a surfer Action) at `points` (CSS pixels; none for actions
    without a point); `outcome`: what it did (detail, action_seconds, settle_seconds, settle_reason)."""

    step: int
    action: Action
    points: list[CssPoint]
    outcome: dict[str, Any]


@dataclass
class Validated(EventDict):
    """The validator judged the answer proposed in step `step`: `verdict` (accepted, reasons, answer)."""

    step: int
    verdict: Verdict


@dataclass
class StepFinished(EventDict):
    """A step ended: `record`, everything known about it (a StepRecord, its trajectory.jsonl line)."""

    record: StepRecord


@dataclass
class ErrorOccurred(EventDict):
    """Something failed in step `step` (None: outside a step): `message` says what. Not `fatal`: the
    run goes on (an action that failed, a step cut off at the time limit); `fatal`: the run ends, with
    status error (its `Finished` follows)."""

    step: int | None
    message: str
    fatal: bool = False


@dataclass
class Finished(EventDict):
    """The run ended: `result`, its RunResult (the last event of every run, also one cancelled or
    ended by an error)."""

    result: "RunResult"


from .handover import HandedBack, HandedOver, HumanActed  # noqa: E402  (a person's turn: agent/handover.py)

Event = Union[RunStarted, StepStarted, Observed, ModelAsked, ModelCalled, ActionPerformed, Validated, StepFinished, ErrorOccurred, Finished,
              HandedOver, HumanActed, HandedBack]


class Waiting:
    """What a session waits for: the role asked and since when (monotonic).
    Rendered each refresh, so the seconds count up while the call is in flight."""

    def __init__(self, step: int, role: str) -> None:
        self.step, self.role, self.since = step, role, time.monotonic()

    def describe(self) -> str:
        from surfer.models.outage import outage_note

        note = outage_note()  # the server went away: say so rather than count up silently
        return f"step {self.step}: {note}" if note else f"step {self.step}: asking the {self.role}… {time.monotonic() - self.since:.0f}s"

    def __rich__(self) -> Any:
        from rich.text import Text

        return Text(self.describe())
