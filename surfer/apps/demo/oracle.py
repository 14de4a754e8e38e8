"""The demo site shipped with surfer and a ground-truth oracle for it.

The oracle answers as a perfect model would, through the normal HTTP model
path (via `StandInServer`): the policy from the page URL and history in its
prompt, the localizer with the real layout of each target measured in
Chromium and expressed in the profile's coordinate frame. Used by `surfer demo`
(command.py), the end-to-end tests and the benchmarks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import parse_qs, urlparse

if TYPE_CHECKING:  # imported where used: building the CLI loads neither pydantic nor the stand-in
    from surfer.core.actions import CssPoint
    from surfer.core.coordinates import CoordinateFrame
    from surfer.models.standin import Answer, ChatRequest

DEMO_SITE = Path(__file__).with_name("demo_site")
DEMO_TASK = (
    "Register as a new library member named Ada Lovelace with the email ada@example.com, "
    "then report the confirmation code shown."
)
NAME, EMAIL = "Ada Lovelace", "ada@example.com"

# target description -> (page, CSS selector)
TARGETS: dict[str, tuple[str, str]] = {
    "the 'Register as a member' link": ("index.html", "#register"),
    "the 'Full name' text field": ("register.html", "#name"),
    "the 'Email address' text field": ("register.html", "#email"),
    "the green 'Create account' button": ("register.html", "#submit"),
}


def confirmation_code(name: str, email: str) -> str:
    """The code welcome.html shows (same formula as its script)."""
    h = 7
    for ch in name + "|" + email:
        h = (h * 31 + ord(ch)) % 1000003
    return f"ACME-{h:06d}"


async def measure_targets(
    site_url: str, viewport: tuple[int, int], scale: float = 1.0, targets: dict[str, tuple[str, str]] | None = None,
    browser: Any = None,
) -> dict[str, CssPoint]:
    """Centres (CSS px) of every target (default: TARGETS), measured in a real Chromium
    (Playwright's driver in its own session, as a run's: a Ctrl-C to the command's
    process group is the command's to handle, not the driver's). `browser`: an open
    Playwright Browser to measure in instead (a context of its own, closed after)."""
    if browser is not None:
        context = await browser.new_context(viewport={"width": viewport[0], "height": viewport[1]}, device_scale_factor=scale)
        try:
            return await _measure(await context.new_page(), site_url, targets or TARGETS)
        finally:
            await context.close()
    from surfer.tools.chromium import start_chromium

    playwright, browser = await start_chromium(headless=True)
    try:
        page = await browser.new_page(viewport={"width": viewport[0], "height": viewport[1]}, device_scale_factor=scale)
        return await _measure(page, site_url, targets or TARGETS)
    finally:
        try:
            await browser.close()
        finally:
            await playwright.stop()


async def _measure(page: Any, site_url: str, targets: dict[str, tuple[str, str]]) -> dict[str, CssPoint]:
    from surfer.core.actions import CssPoint

    centres: dict[str, CssPoint] = {}
    for target, (path, selector) in targets.items():
        if not page.url.endswith(path):
            await page.goto(site_url.rstrip("/") + "/" + path)
        box = await page.locator(selector).bounding_box()
        if box is None:
            raise RuntimeError(f"{selector} on {path} has no box")
        centres[target] = CssPoint(x=box["x"] + box["width"] / 2, y=box["y"] + box["height"] / 2)
    return centres


FrameMapper = Callable[["CssPoint", tuple[int, int]], tuple[int, int]]


def frame_mapper(frame: CoordinateFrame, viewport: tuple[int, int], scale: float) -> FrameMapper:
    """CSS point + size of the image the model received -> answer in `frame`."""
    from surfer.core.coordinates import ImageGeometry, Size, css_to_model

    screenshot = Size(round(viewport[0] * scale), round(viewport[1] * scale))

    def to_frame(point: CssPoint, sent: tuple[int, int]) -> tuple[int, int]:
        return css_to_model(point, frame, ImageGeometry(sent=Size(*sent), screenshot=screenshot, scale=scale))

    return to_frame


def demo_oracle(centres: dict[str, CssPoint], frame: CoordinateFrame, viewport: tuple[int, int], scale: float = 1.0) -> "DemoOracle":
    """A picklable way to build the oracle (e.g. in a `StandInProcess`)."""
    return DemoOracle(centres, frame_mapper(frame, viewport, scale))


_LOCATION = re.compile(r"Current page: (?:.* — )?(\S+)")
_TARGET = re.compile(r"Target: (.+)")
_ANSWER = re.compile(r'Proposed answer: "(.*)"')


@dataclass
class DemoOracle:
    """Responder for `StandInServer` that solves the demo task."""

    centres: dict[str, CssPoint]
    to_frame: FrameMapper
    wrong_first_answer: bool = False  # propose a wrong code once, to exercise the validator
    answers_given: int = 0
    calls: dict[str, int] = field(default_factory=dict)

    def __call__(self, request: ChatRequest) -> Answer:
        self.calls[request.role] = self.calls.get(request.role, 0) + 1
        return getattr(self, request.role)(request)

    def policy(self, request: ChatRequest) -> dict[str, Any]:
        match = _LOCATION.search(request.text)
        url = match.group(1) if match else ""
        path = urlparse(url).path
        history = request.text.split("History:", 1)[-1].split("Current page:", 1)[0]
        if path.endswith("welcome.html"):
            query = parse_qs(urlparse(url).query)
            code = confirmation_code(query.get("name", [""])[0], query.get("email", [""])[0])
            self.answers_given += 1
            if self.wrong_first_answer and self.answers_given == 1:
                code = "ACME-000000"
            return {"thought": "The welcome page shows the code.", "notes": f"code {code}", "action": {"type": "answer", "text": code}}
        if path.endswith("register.html"):
            if f"text={NAME!r}" not in history:
                action = {"type": "type", "text": NAME, "target": "the 'Full name' text field", "clear": True}
            elif f"text={EMAIL!r}" not in history:
                action = {"type": "type", "text": EMAIL, "target": "the 'Email address' text field"}
            else:
                action = {"type": "click", "target": "the green 'Create account' button"}
            return {"thought": "Filling the registration form.", "notes": "", "action": action}
        if path.endswith("index.html") or path.endswith("/"):
            return {"thought": "Open the registration page.", "notes": "", "action": {"type": "click", "target": "the 'Register as a member' link"}}
        return {"thought": "Lost; go home.", "notes": "", "action": {"type": "back"}}

    def localizer(self, request: ChatRequest) -> dict[str, Any]:
        match = _TARGET.search(request.text)
        target = match.group(1).strip() if match else ""
        if target not in self.centres:
            return {"x": 0, "y": 0}
        x, y = self.to_frame(self.centres[target], request.image_size(-1))
        return {"x": x, "y": y}

    def validator(self, request: ChatRequest) -> dict[str, Any]:
        match = _ANSWER.search(request.text)
        proposed = match.group(1) if match else ""
        expected = confirmation_code(NAME, EMAIL)
        if proposed == expected:
            return {"verdict": "accept", "reasons": "The code matches the welcome page."}
        return {"verdict": "reject", "reasons": f"The welcome page does not show {proposed}."}
