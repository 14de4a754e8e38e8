"""The JSON-able form of the SDK's events (`event.to_dict()`): what a program that logs or forwards
`agent.stream(...)` writes, without code of its own per event. Images are never in it as bytes: a
step's screenshot is its file in the run directory (a path relative to it, "" when nothing is
recorded), and `Observed`'s screenshot is left out (its bytes are the event's; its file comes with
the step's record)."""

from __future__ import annotations

import dataclasses
from typing import Any

from .result import RunResult


class EventDict:
    """The base of every event: `to_dict()`, its JSON-able form, with `"event"` naming its class."""

    def to_dict(self) -> dict[str, Any]:
        """`{"event": "StepFinished", ...its fields}`: values JSON can hold (a step's record as its
        trajectory.jsonl line, a RunResult as result.json's fields, actions as their JSON), no bytes."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return {"event": type(self).__name__, **{k: jsonable(v) for k, v in fields.items() if not isinstance(v, bytes)}}


def jsonable(value: Any) -> Any:
    """`value` as JSON holds it: its own `to_dict()` where it has one (a step's record, a model call), a
    pydantic model's JSON dump (an action, a RunResult), a dataclass's fields, lists and mappings of them;
    bytes as None (never their content)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, bytes):
        return None
    if hasattr(value, "to_dict") and not isinstance(value, type):
        return value.to_dict()
    if hasattr(value, "model_dump"):  # an action as trajectory.jsonl writes it; a RunResult as result.json
        return value.model_dump(mode="json", exclude_none=not isinstance(value, RunResult))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    return str(value)
