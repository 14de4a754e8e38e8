"""surfer — a computer-use agent runtime: policy, localizer and validator
over a real browser or desktop, served by any OpenAI-compatible model server.

    from surfer import Agent
    result = Agent(base_url="http://127.0.0.1:8000/v1", model="Hcompany/Holotron-12B").run_sync(
        "What is the title of the page?", url="https://example.com")
"""

from surfer.agent import (
    ActionPerformed, Agent, AgentConfig, ErrorOccurred, Event, Finished, ModelCalled, RunResult, RunStarted,
    StepFinished, StepStarted, Validated, load_config,
)
from surfer.agent.answers import AnswerSchema
from surfer.agent.confirm import ConfirmationRequest
from surfer.agent.control import RunHandle
from surfer.agent.secrets import Secrets
from surfer.core import actions
from surfer.core.errors import (
    ActionFailed, ActionNotSupported, ConfigError, EnvironmentFailure, ModelNotFound, ModelOutputError,
    ModelServerUnreachable, SurferError,
)
from surfer.models.scripted import ScriptedModel
from surfer.tools.browser import BrowserEnvironment


def __getattr__(name: str) -> object:
    if name == "DesktopEnvironment":  # lazy: never load pyautogui/mss at `import surfer`
        from surfer.tools.desktop import DesktopEnvironment

        return DesktopEnvironment
    if name == "rollouts":  # lazy: the batch runner is an app
        from surfer.apps.rollouts import rollouts

        return rollouts
    raise AttributeError(f"module 'surfer' has no attribute {name!r}")

__version__ = "0.1.0"

__all__ = [
    "ActionFailed", "ActionNotSupported", "ActionPerformed", "Agent", "AgentConfig", "AnswerSchema", "BrowserEnvironment",
    "ConfigError", "ConfirmationRequest", "RunHandle", "Secrets", "DesktopEnvironment", "EnvironmentFailure", "ErrorOccurred", "Event", "Finished", "ModelCalled", "ModelNotFound",
    "ModelOutputError", "ModelServerUnreachable", "RunResult", "RunStarted", "ScriptedModel", "StepFinished",
    "StepStarted", "SurferError", "Validated", "actions", "load_config", "rollouts", "__version__",
]
