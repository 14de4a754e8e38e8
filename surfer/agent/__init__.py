"""The loop, the three roles, memory and events (imported on first use, so
`import surfer.agent.events` does not load the loop)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from surfer.core.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("AgentConfig", "BrowserSettings", "RoleSettings", "load_config"), "surfer.agent.config"),
    **dict.fromkeys(
        ("ActionPerformed", "ErrorOccurred", "Event", "Finished", "ModelAsked", "ModelCalled", "RunStarted", "StepFinished",
         "StepStarted", "Validated"),
        "surfer.agent.events",
    ),
    "Agent": "surfer.agent.loop",
    "RunResult": "surfer.agent.result",
}

if TYPE_CHECKING:
    from .config import AgentConfig, BrowserSettings, RoleSettings, load_config
    from .events import (
        ActionPerformed, ErrorOccurred, Event, Finished, ModelAsked, ModelCalled, RunStarted, StepFinished, StepStarted,
        Validated,
    )
    from .loop import Agent
    from .result import RunResult


__getattr__ = lazy_exports(globals(), _EXPORTS)

__all__ = [
    "ActionPerformed", "Agent", "AgentConfig", "BrowserSettings", "ErrorOccurred", "Event", "Finished",
    "ModelAsked", "ModelCalled", "RoleSettings", "RunResult", "RunStarted", "StepFinished", "StepStarted", "Validated", "load_config",
]
