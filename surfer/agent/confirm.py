"""Confirmation of sensitive actions.

An action is sensitive when a click, typing or upload targets something that
buys, pays, orders, deletes, removes, transfers or sends (word match on the
target the model described), when it accepts a dialog that says so, or when
the page it acts on is on a listed domain (`confirm_domains`); a file the page
downloads is kept only with a yes (`confirm_downloads`). Before a sensitive action is performed, the run's
confirmer decides: a person at the interactive CLI, a callable given to the
SDK (`Agent(confirm=...)`), or the configured default — `deny` for runs
nobody watches, `approve` with `--approve-all`. Every decision is recorded in
the step (`confirmation`), and a denial goes into the agent's memory.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Union
from urllib.parse import urlsplit

from surfer.core.actions import Click, Dialog, Drag, PressKeys, TypeText, Upload

SENSITIVE_WORDS = ("buy", "pay", "purchase", "order", "delete", "remove", "transfer", "send", "checkout")
_SUFFIXES = r"(?:s|es|ed|ing|ment|ments|al)?"
OPEN_DIALOG = "Open dialog:"  # how the browser environment's notices name an open JavaScript dialog


@dataclass(frozen=True)
class ConfirmationRequest:
    """What a confirmer is asked about."""

    step: int
    action: Any
    reason: str
    url: str
    screenshot: bytes = b""
    screenshot_ext: str = "jpg"

    def describe(self) -> str:
        return f"step {self.step}: {self.action.describe()} on {self.url or 'the screen'} ({self.reason})"


Decision = Union[bool, Awaitable[bool]]
Confirmer = Callable[[ConfirmationRequest], Decision]


class SensitiveRules:
    def __init__(self, words: Iterable[str] = SENSITIVE_WORDS, domains: Iterable[str] = (), downloads: bool = True) -> None:
        from surfer.tools.url_policy import parse_patterns

        self.downloads = downloads  # a file the page sends is kept only with a yes
        words = [w.strip().lower() for w in words if w.strip()]
        self._words = re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")" + _SUFFIXES + r"\b", re.I) if words else None
        self._domains = parse_patterns(domains)

    def reason(self, action: Any, url: str, notices: str = "") -> str | None:
        """Why `action` on the page at `url` needs a yes, or None. `notices` is what the
        screen says besides the page (an open dialog's text)."""
        if self._domains:
            parts = urlsplit(url)
            host, port = (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)
            if host and any(p.matches(host, port) for p in self._domains):
                return f"{host} is a domain where every action is confirmed"
        if self._words is None:
            return None
        if isinstance(action, (Click, TypeText, Drag, Upload)):
            target = " ".join(filter(None, [getattr(action, "target", None), getattr(action, "to_target", None)]))
            found = self._words.search(target)
            if found:
                return f"its target mentions {found.group(0)!r}"
        dialog = next((n for n in notices.split("\n") if n.startswith(OPEN_DIALOG)), "")
        found = self._words.search(dialog) if dialog else None
        if found and (isinstance(action, (Click, PressKeys, TypeText)) or (isinstance(action, Dialog) and action.response == "accept")):
            # while a dialog is open, a click or a key answers it: its OK may be what deletes
            return f"it may accept a dialog that mentions {found.group(0)!r}"
        return None


def fixed_decision(approve: bool) -> Confirmer:
    """The default confirmer of runs nobody watches: always `approve`."""

    def decide(request: ConfirmationRequest) -> bool:
        return approve

    decide.__name__ = "approve_all" if approve else "deny_all"
    return decide


async def ask(confirmer: Confirmer, request: ConfirmationRequest) -> bool:
    decision = confirmer(request)
    if asyncio.iscoroutine(decision) or isinstance(decision, asyncio.Future):
        decision = await decision
    return bool(decision)
