"""Environments the agent acts in. Each is one object whose methods are the
actions: `BrowserEnvironment` (Playwright) and, as an extra, the desktop."""

from .base import ActionOutcome, Environment
from .browser import BrowserEnvironment

__all__ = ["ActionOutcome", "BrowserEnvironment", "Environment"]
