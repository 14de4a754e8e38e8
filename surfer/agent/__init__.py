"""The loop, the three roles, memory and events."""

from .config import AgentConfig, BrowserSettings, RoleSettings, load_config
from .events import (
    ActionPerformed, ErrorOccurred, Event, Finished, ModelAsked, ModelCalled, RunStarted, StepFinished, StepStarted, Validated,
)
from .loop import Agent
from .result import RunResult

__all__ = [
    "ActionPerformed", "Agent", "AgentConfig", "BrowserSettings", "ErrorOccurred", "Event", "Finished",
    "ModelAsked", "ModelCalled", "RoleSettings", "RunResult", "RunStarted", "StepFinished", "StepStarted", "Validated", "load_config",
]
