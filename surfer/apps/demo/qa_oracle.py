"""The sample suite's model: an oracle for the demo site that answers like a
perfect vision model would, over the stand-in server's real HTTP path. It
reads the task, the page URL and the history from its prompt (never the DOM)
and locates targets at their layout measured in Chromium.

Used by `surfer qa --demo`, `surfer bench qa` and the tests."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from surfer.apps.demo.oracle import DEMO_SITE, DemoOracle, frame_mapper, measure_targets
from surfer.core.actions import CssPoint
from surfer.models.standin import ChatRequest

SAMPLE_SUITE = Path(__file__).resolve().parents[3] / "examples" / "qa" / "library.yaml"
SAMPLE_PASSWORD_ENV = "LIBRARY_PASSWORD"
OPENING_HOURS = "Monday to Friday, 9:00–18:00."
ORDERS = {"1044", "1045"}

# target description -> (page, CSS selector), measured on the demo site
QA_TARGETS: dict[str, tuple[str, str]] = {
    "the 'User name' text field": ("login.html", "#user"),
    "the 'Password' text field": ("login.html", "#password"),
    "the blue 'Sign in' button": ("login.html", "#signin"),
    "the 'Register as a member' link": ("index.html", "#register"),
    "the 'Full name' text field": ("register.html", "#name"),
    "the 'Email address' text field": ("register.html", "#email"),
    "the green 'Create account' button": ("register.html", "#submit"),
}

_TASK = re.compile(r"Task: (.+)")
_LOCATION = re.compile(r"Current page: (?:.* — )?(\S+)")
_ANSWER = re.compile(r'Proposed answer: "(.*)"')
_SIGN_IN = re.compile(r"sign in as (\S+) with the password (\S+)", re.I)
_REGISTER = re.compile(r"register as (.+?) with the email (\S+)", re.I)


def _act(thought: str, action: dict[str, Any]) -> dict[str, Any]:
    return {"thought": thought, "notes": "", "action": action}


def _answer(text: str) -> dict[str, Any]:
    return _act("The step is done.", {"type": "answer", "text": text})


@dataclass
class QaDemoOracle(DemoOracle):
    """Responder for `StandInServer` (the demo oracle's localizer, its own
    policy and validator). `flaky_hours`: the first opening-hours answer is
    wrong (to exercise retries)."""

    flaky_hours: bool = False
    _hours_answers: int = 0

    def policy(self, request: ChatRequest) -> dict[str, Any]:
        task_match = _TASK.search(request.text)
        task = task_match.group(1).strip() if task_match else ""
        where = _LOCATION.search(request.text)
        page = urlparse(where.group(1) if where else "").path.rsplit("/", 1)[-1] or "index.html"
        history = request.text.split("History:", 1)[-1].split("Current page:", 1)[0]
        if sign_in := _SIGN_IN.search(task):
            return self._sign_in(page, history, sign_in.group(1), sign_in.group(2))
        if register := _REGISTER.search(task):
            return self._register(page, history, register.group(1), register.group(2))
        if "registration page" in task.lower():
            if page == "register.html":
                return _answer("The registration page is open.")
            return _act("Open the registration page.", {"type": "click", "target": "the 'Register as a member' link"})
        if "total of order #1044" in task.lower():  # an extraction: the typed answer's data
            return _act("The orders table shows the total.", {"type": "answer", "text": "794.36", "data": {"value": 794.36}})
        if "opening hours" in task.lower():
            self._hours_answers += 1
            if self.flaky_hours and self._hours_answers == 1:
                return _answer("Closed today.")
            return _answer(OPENING_HOURS)
        return _act("I do not know this task.", {"type": "fail", "reason": f"unknown task: {task}"})

    def _sign_in(self, page: str, history: str, user: str, password: str) -> dict[str, Any]:
        if page == "orders.html":
            return _answer(f"Signed in as {user}.")
        if page != "login.html":
            return _act("Go to the sign-in page.", {"type": "goto", "url": "login.html"})
        if f"text={user!r}" not in history:
            return _act("Enter the user name.", {"type": "type", "text": user, "target": "the 'User name' text field"})
        if f"text={password!r}" not in history:
            return _act("Enter the password.", {"type": "type", "text": password, "target": "the 'Password' text field"})
        return _act("Submit.", {"type": "click", "target": "the blue 'Sign in' button"})

    def _register(self, page: str, history: str, name: str, email: str) -> dict[str, Any]:
        if page == "welcome.html":
            return _answer("Registered.")
        if page != "register.html":
            return _act("Open the registration page.", {"type": "click", "target": "the 'Register as a member' link"})
        if f"text={name!r}" not in history:
            return _act("Enter the name.", {"type": "type", "text": name, "target": "the 'Full name' text field", "clear": True})
        if f"text={email!r}" not in history:
            return _act("Enter the email.", {"type": "type", "text": email, "target": "the 'Email address' text field"})
        return _act("Submit.", {"type": "click", "target": "the green 'Create account' button"})

    def validator(self, request: ChatRequest) -> dict[str, Any]:
        match = _ANSWER.search(request.text)
        proposed = match.group(1) if match else ""
        if proposed.startswith("Confirmed: "):  # an expectation about the screen
            unknown = [n for n in re.findall(r"#(\d+)", proposed) if n not in ORDERS]
            if unknown:
                return {"verdict": "reject", "reasons": f"The orders table does not list order #{unknown[0]}."}
            return {"verdict": "accept", "reasons": "The screen shows it."}
        return {"verdict": "accept", "reasons": "The step is done."}


async def measure_qa_targets(site_url: str, viewport: tuple[int, int] = (1280, 800), browser: Any = None) -> dict[str, CssPoint]:
    return await measure_targets(site_url, viewport, targets=QA_TARGETS, browser=browser)


def qa_oracle(centres: dict[str, CssPoint], frame: Any, viewport: tuple[int, int] = (1280, 800), flaky_hours: bool = False) -> QaDemoOracle:
    """A picklable way to build the oracle (e.g. in a `StandInProcess`)."""
    return QaDemoOracle(centres, frame_mapper(frame, viewport, 1.0), flaky_hours=flaky_hours)


__all__ = ["DEMO_SITE", "QaDemoOracle", "QA_TARGETS", "SAMPLE_SUITE", "measure_qa_targets", "qa_oracle"]
