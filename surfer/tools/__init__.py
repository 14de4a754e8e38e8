"""Environments the agent acts in. Each is one object whose methods are the
actions: `BrowserEnvironment` (Playwright) and, as an extra, the desktop."""

from .base import ActionOutcome, Environment
from .browser import BrowserEnvironment

__all__ = ["ActionOutcome", "BrowserEnvironment", "DesktopEnvironment", "Environment"]


def __getattr__(name: str) -> object:
    # Lazy, so `import surfer` never touches the desktop extra (pyautogui, mss).
    if name == "DesktopEnvironment":
        from .desktop import DesktopEnvironment

        return DesktopEnvironment
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
