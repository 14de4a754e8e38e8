"""surfer — a computer-use agent runtime: policy, localizer and validator
over a real browser or desktop, served by any OpenAI-compatible model server.

    from surfer import Agent
    result = Agent(base_url="http://127.0.0.1:8000/v1", model="Hcompany/Holotron-12B").run_sync(
        "What is the title of the page?", url="https://example.com")

The names below are imported on first use (PEP 562), so `import surfer` — and
`surfer --help` — load neither the openai SDK, Playwright, PIL nor pydantic's
models until something needs them (tests/test_startup.py).
"""

from __future__ import annotations

import importlib
TYPE_CHECKING = False  # typing's flag without importing typing: `surfer run` spawns its browser's driver sooner

from surfer.core.lazy import lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    **dict.fromkeys(
        ("ActionPerformed", "ErrorOccurred", "Event", "Finished", "ModelAsked", "ModelCalled", "Observed", "RunStarted",
         "StepFinished", "StepStarted", "Validated"),
        "surfer.agent.events",
    ),
    **dict.fromkeys(("HandedBack", "HandedOver", "HumanActed"), "surfer.agent.handover"),
    "Agent": "surfer.agent.loop",
    "AgentConfig": "surfer.agent.config",
    "load_config": "surfer.agent.config",
    "RunResult": "surfer.agent.result",
    "AnswerSchema": "surfer.agent.answers",
    "ConfirmationRequest": "surfer.agent.confirm",
    "RunHandle": "surfer.agent.control",
    "Question": "surfer.agent.questions",
    "Reply": "surfer.agent.questions",
    "Session": "surfer.agent.session",
    "TakeOverRefused": "surfer.agent.handover",
    "Secret": "surfer.agent.secrets",
    "Secrets": "surfer.agent.secrets",
    **dict.fromkeys(
        ("ActionFailed", "ActionNotSupported", "ConfigError", "ContextTooLong", "EnvironmentFailure", "ModelNotFound",
         "ModelOutputError", "ModelRequestError", "ModelServerUnreachable", "RunError", "SurferError"),
        "surfer.core.errors",
    ),
    "ScriptedModel": "surfer.models.scripted",
    "BrowserEnvironment": "surfer.tools.browser",
    "DesktopEnvironment": "surfer.tools.desktop",  # never loads pyautogui/mss before it is used
    "rollouts": "surfer.fleet.rollouts",  # many sessions: the fleet
}

if TYPE_CHECKING:
    from typing import Any

    from surfer.agent.answers import AnswerSchema
    from surfer.agent.config import AgentConfig, load_config
    from surfer.agent.confirm import ConfirmationRequest
    from surfer.agent.control import RunHandle
    from surfer.agent.questions import Question, Reply
    from surfer.agent.session import Session
    from surfer.agent.handover import HandedBack, HandedOver, HumanActed, TakeOverRefused
    from surfer.agent.events import (
        ActionPerformed, ErrorOccurred, Event, Finished, ModelAsked, ModelCalled, Observed, RunStarted, StepFinished,
        StepStarted, Validated,
    )
    from surfer.agent.loop import Agent
    from surfer.agent.result import RunResult
    from surfer.agent.secrets import Secret, Secrets
    from surfer.fleet.rollouts import rollouts
    from surfer.core import actions
    from surfer.core.errors import (
        ActionFailed, ActionNotSupported, ConfigError, ContextTooLong, EnvironmentFailure, ModelNotFound,
        ModelOutputError, ModelRequestError, ModelServerUnreachable, RunError, SurferError,
    )
    from surfer.fleet import policy
    from surfer.models.scripted import ScriptedModel
    from surfer.tools.browser import BrowserEnvironment
    from surfer.tools.desktop import DesktopEnvironment


_lazy = lazy_exports(globals(), _EXPORTS)


_MODULES = {"actions": "surfer.core.actions", "policy": "surfer.fleet.policy"}  # `from surfer import policy`


if not TYPE_CHECKING:  # (a type checker sees the imports above: with a module __getattr__, a misspelt name passed)
    def __getattr__(name: str) -> Any:
        if name in _MODULES:
            return importlib.import_module(_MODULES[name])
        return _lazy(name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS, *_MODULES])


__all__ = [
    "ActionFailed", "ActionNotSupported", "ActionPerformed", "Agent", "AgentConfig", "AnswerSchema", "BrowserEnvironment",
    "ConfigError", "ContextTooLong", "ModelRequestError", "RunError", "ConfirmationRequest", "Question", "Reply", "RunHandle", "Session", "Secret", "Secrets", "DesktopEnvironment", "EnvironmentFailure", "ErrorOccurred", "Event", "Finished", "HandedBack", "HandedOver", "HumanActed", "ModelAsked", "ModelCalled", "ModelNotFound",
    "ModelOutputError", "ModelServerUnreachable", "Observed", "RunResult", "RunStarted", "ScriptedModel", "StepFinished",
    "StepStarted", "SurferError", "TakeOverRefused", "Validated", "actions", "load_config", "policy", "rollouts", "__version__",
]
