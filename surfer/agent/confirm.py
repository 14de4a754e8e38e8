"""Confirmation of sensitive actions.

An action is sensitive when it commits the user to something: a click that
activates a button, submit input or menu item named for a commitment (buy,
place order, pay, delete, send money, unsubscribe ...), a click that submits a
form holding payment fields, typing into a payment or password-change field of
another site than the task's start (`agent.commitments` owns those rules and
judges what the page says about the element at the point; on the desktop, or
when the page says nothing, the model's target description with the
imperative-phrase rule). Also sensitive: answering a dialog that mentions a
commitment, every action on a listed domain (`confirm_domains`), and a file
the page downloads (kept only with a yes, `confirm_downloads`). A navigation
link, a tab, a sort or filter control and a search box are never sensitive for
their words alone.

Before a sensitive action is performed, the run's confirmer decides: a person
at the interactive CLI, a callable given to the SDK (`Agent(confirm=...)`), or
the configured default — `deny` for runs nobody watches, `approve` with
`--approve-all`; on hosts listed in `approve_domains` (`--approve-domain`) the
rules' yes is given without asking. Every decision is recorded in the step
(`confirmation`), and a refusal goes into the agent's history with what to do
instead; asking again for a refused action ends the run `needs_approval`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Union
from urllib.parse import urlsplit

from surfer.core.actions import Click, Dialog, Drag, PressKeys, TypeText, Upload
from surfer.core.elements import ElementFacts
from surfer.core.errors import ConfigError

from .commitments import Commitments, activating_key
from .questions import call_person
from .vocabulary import foreign_evidence

# Words that make an open dialog's OK a commitment ("Delete 3 files?", "Confirm your order").
DIALOG_WORDS = ("buy", "pay", "purchase", "order", "delete", "remove", "transfer", "send", "checkout")
SENSITIVE_WORDS = DIALOG_WORDS  # the name older configs and code know
_SUFFIXES = r"(?:s|es|ed|ing|ment|ments|al)?"
OPEN_DIALOG = "Open dialog:"  # how the browser environment's notices name an open JavaScript dialog
REFUSED = "this needs a person's approval; finish with what you have or choose another way"


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


def host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)


def origin_of(url: str | None) -> str:
    """scheme://host[:port] of a URL ('' for none or a URL without a host)."""
    parts = urlsplit(url or "")
    return f"{parts.scheme}://{parts.netloc}".lower() if parts.scheme and parts.netloc else ""


class SensitiveRules:
    """Which actions need a yes. `words` are extra commitment verbs (a button named
    with one is sensitive; a noun in a link's name is not); `exempt` phrases are
    never sensitive; `approve_domains` are hosts where the rules' yes is given
    without asking (a QA suite's own app)."""

    def __init__(
        self, words: Iterable[str] = (), domains: Iterable[str] = (), downloads: bool = True,
        approve_domains: Iterable[str] = (), exempt: Iterable[str] = (),
    ) -> None:
        from surfer.tools.url_policy import parse_patterns

        self.downloads = downloads  # a file the page sends is kept only with a yes
        words = [w.strip().lower() for w in words if w.strip()]
        self.commitments = Commitments.from_sensitive_words([w for w in words if w not in DIALOG_WORDS], exempt=exempt)
        dialog = list(dict.fromkeys([*DIALOG_WORDS, *words]))
        self._dialog = re.compile(r"\b(" + "|".join(map(re.escape, dialog)) + r")" + _SUFFIXES + r"\b", re.I)
        self._domains = parse_patterns(domains)
        self._approved = parse_patterns(approve_domains)

    def on_confirm_domain(self, url: str) -> bool:
        host, port = host_port(url)
        return bool(host) and any(p.matches(host, port) for p in self._domains)

    def approved_host(self, url: str) -> str | None:
        """The page's host when it is one where sensitive actions are approved without asking."""
        host, port = host_port(url)
        return host if host and any(p.matches(host, port) for p in self._approved) else None

    def reason(
        self, action: Any, url: str, notices: str = "", element: ElementFacts | None = None, start_origin: str = "",
    ) -> str | None:
        """Why `action` on the page at `url` needs a yes, or None. `notices` is what the
        screen says besides the page (an open dialog's text); `element` what the page
        says about the element at the action's point, or for a key or a `type` without a target the
        focused element (None on the desktop or when the page could not tell); `start_origin` the origin
        the task started on."""
        if self.on_confirm_domain(url):
            return f"{host_port(url)[0]} is a domain where every action is confirmed"
        dialog = next((n for n in notices.split("\n") if n.startswith(OPEN_DIALOG)), "")
        found = self._dialog.search(dialog) if dialog else None
        said = found.group(0) if found else foreign_evidence(dialog) if dialog else None
        if said and (isinstance(action, (Click, PressKeys, TypeText)) or (isinstance(action, Dialog) and action.response == "accept")):
            # while a dialog is open, a click or a key answers it: its OK may be what deletes
            return f"it may accept a dialog that mentions {said!r}"
        rules = self.commitments
        if isinstance(action, PressKeys):  # Enter in a field submits its form, Enter or Space presses a button
            return rules.key(element, action.keys)
        if isinstance(action, TypeText):
            if element is not None:
                return rules.typing(element, start_origin, submit=action.submit)
            return rules.described(action.target or "", typing=True, submit=action.submit) if action.target else None
        if isinstance(action, (Click, Upload)):
            if element is None or element.plain:  # nothing the page calls actionable there: a <div> with a click
                return rules.described(action.target)  # listener ("Place order") is judged as the model saw it
            return rules.click(element)
        if isinstance(action, Drag):  # dropping onto "Trash" or "Delete": judged by where it lands
            if action.to_target and rules.described(action.to_target):
                return f"it drops {action.target!r} onto {action.to_target!r} (as described)"
            return rules.described(f"{action.target} to {action.to_target}")
        return None


async def acted_on(env: Any, action: Any) -> ElementFacts | None:
    """What the page says about the element `action` acts on: the one at its point (a click, typing, an
    upload), or the focused one (a key that activates it, typing without a target); None otherwise."""
    point = getattr(action, "point", None)
    if point is not None and action.type in ("click", "type", "upload"):
        return await env.element_at(point)
    if (isinstance(action, PressKeys) and activating_key(action.keys)) or (isinstance(action, TypeText) and point is None):
        return await env.focused_element()
    return None


def fixed_decision(approve: bool) -> Confirmer:
    """The default confirmer of runs nobody watches: always `approve`."""

    def decide(request: ConfirmationRequest) -> bool:
        return approve

    decide.__name__ = "approve_all" if approve else "deny_all"
    decide.fixed = True  # type: ignore[attr-defined]  # decided at once: nobody is waited for
    return decide


async def ask(confirmer: Confirmer, request: ConfirmationRequest) -> bool:
    if getattr(confirmer, "fixed", False):
        decision = confirmer(request)  # decided at once
    else:
        decision = await call_person(confirmer, request)  # (a plain function waiting for a person: in a thread)
    if not isinstance(decision, bool):  # ("n" from input() approved: any answer but "" is true)
        name = getattr(confirmer, "__name__", "confirm")
        raise ConfigError(f"the confirm= callback ({name}) returned {decision!r}, a {type(decision).__name__}: return True "
                          "to approve the action, False to refuse it (nothing was approved)")
    return decision


@dataclass(frozen=True)
class Refusal:
    """A refused sensitive action, to know it when the policy asks for it again."""

    type: str
    target: str
    element: str
    point: tuple[float, float] | None

    @classmethod
    def of(cls, action: Any, element: ElementFacts | None) -> "Refusal":
        point = getattr(action, "point", None)
        return cls(
            action.type, " ".join(str(getattr(action, "target", "") or "").lower().split()),
            f"{element.role}|{element.name}|{element.selector}".lower() if element is not None else "",
            (point.x, point.y) if point is not None else None,
        )

    def same(self, other: "Refusal", tolerance: float = 24.0) -> bool:
        if self.type != other.type:
            return False
        if self.element and self.element == other.element:
            return True
        if self.target and self.target == other.target:
            return True
        return self.point is not None and other.point is not None and all(
            abs(a - b) <= tolerance for a, b in zip(self.point, other.point)
        )


def how_to_allow(url: str) -> str:
    host = host_port(url)[0]
    domain = f"--approve-domain {host}, " if host else ""
    return f"allow it with --approve-all, {domain}or the SDK's confirm= callback"
