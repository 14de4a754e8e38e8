"""The environment a QA case acts through: it wraps the real one to record
every performed action with its anchor (the action cache's entries), and to
perform cached actions with secrets revealed.

Secrets are the agent's (`surfer.agent.secrets.Secrets`): the model and the
cache only ever hold the placeholder `{{NAME}}`; whatever reaches this
environment with a real value in it (the agent reveals before performing) is
scrubbed back to the placeholder before it is recorded."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any, Optional

from surfer.agent.secrets import Secrets
from surfer.core.actions import Action, CssPoint, targets_of
from surfer.core.errors import ActionFailed, ActionNotSupported, EnvironmentFailure, SurferError
from surfer.core.observation import Observation
from surfer.tools.base import ActionOutcome, EpisodeEnd, Environment

from .anchors import Fingerprint, crop_around, fingerprint_at, url_pattern
from .cache import CachedAction


# The rendered text of a document: its body's innerText, then that of the elements shown in each open shadow
# root (web components: innerText does not enter them).
_BODY_TEXT = """() => {
  if (!document.body) return '';
  const texts = [document.body.innerText];
  const shown = (el) => (el.checkVisibility ? el.checkVisibility({ visibilityProperty: true }) : true);
  const walk = (root) => {
    for (const host of root.querySelectorAll('*')) {
      if (!host.shadowRoot) continue;
      for (const child of host.shadowRoot.children) if (child.innerText && shown(child)) texts.push(child.innerText);
      walk(host.shadowRoot);
    }
  };
  walk(document);
  return texts.join('\\n');
}"""


class QaEnvironment(Environment):
    def __init__(self, inner: Environment, secrets: Optional[Secrets], base_url: Optional[str]) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.secrets = secrets or Secrets()
        self.base_url = base_url
        self.last: Optional[Observation] = None
        self._seen: dict[tuple[str, float, float], Any] = {}  # fingerprints and crops of the current observation
        self.log: list[CachedAction] = []  # actions performed since the last `take_log`

    @property
    def supported_actions(self) -> frozenset[str]:
        return self.inner.supported_actions

    # -- delegation ------------------------------------------------------------

    async def start(self, url: str | None = None) -> None:
        await self.inner.start(url)

    async def observe(self) -> Observation:
        """The screen; a secret a page put in its URL or title is masked there
        (the screenshot itself shows password fields as dots)."""
        observation = await self.inner.observe()
        if self.secrets:
            observation = dataclasses.replace(
                observation, url=self.conceal(observation.url), title=self.conceal(observation.title),
                tabs=tuple(self.conceal(t) for t in observation.tabs),
            )
        self.last = observation
        self._seen.clear()
        return observation

    async def settle(self, mark: Any) -> str:
        return await self.inner.settle(mark)

    async def mark(self) -> Any:
        return await self.inner.mark()

    async def element_at(self, point: Any) -> Any:
        return await self.inner.element_at(point)

    async def focused_element(self) -> Any:
        return await self.inner.focused_element()

    # a browser's checks of a `type` the agent sets (agent/steps.py: a secret's keys_guard, hide_typed): on the
    # wrapped environment, which types
    @property
    def keys_guard(self) -> Any:
        return getattr(self.inner, "keys_guard", None)

    @keys_guard.setter
    def keys_guard(self, guard: Any) -> None:
        if hasattr(self.inner, "keys_guard"):
            self.inner.keys_guard = guard  # type: ignore[attr-defined]

    @property
    def hide_typed(self) -> bool:
        return bool(getattr(self.inner, "hide_typed", False))

    @hide_typed.setter
    def hide_typed(self, hide: bool) -> None:
        if hasattr(self.inner, "hide_typed"):
            self.inner.hide_typed = hide  # type: ignore[attr-defined]

    async def episode_end(self) -> EpisodeEnd | None:
        return await self.inner.episode_end()

    async def close(self) -> None:
        await self.inner.close()

    def step_group(self, name: str) -> Any:
        return self.inner.step_group(name)

    async def save_trace(self, folder: Path, status: str) -> Path | None:
        """The attempt's Playwright trace (every step of the case, one chunk) as folder/trace.zip when kept."""
        from surfer.tools.browser.tracing import scrub_archive

        trace = getattr(self.inner, "trace", None)
        saved = await trace.finish(folder, status) if trace is not None else None
        if saved is not None and self.secrets:
            await asyncio.to_thread(scrub_archive, saved, self.secrets.scrub)
        return saved

    # -- what a user sees -------------------------------------------------------

    @property
    def page(self) -> Any:
        """The browser's current page; None on the desktop or before the browser started."""
        if self.kind != "browser":
            return None
        try:
            return getattr(self.inner, "page", None)
        except EnvironmentFailure:
            return None

    @property
    def url(self) -> str:
        page = self.page
        return self.conceal(page.url) if page is not None else ""

    def page_pattern(self) -> str:
        return url_pattern(self.url, self.base_url) if self.url else ""

    async def visible_text(self) -> str:
        """The text a user can see: the rendered innerText of the page, of its frames that are shown
        and of its web components (display:none and visibility:hidden content left out)."""
        page = self.page
        if page is None:
            return ""
        texts = []
        for frame in page.frames:
            try:
                if frame is not page.main_frame and not await (await frame.frame_element()).is_visible():
                    continue
                texts.append(await frame.evaluate(_BODY_TEXT))
            except Exception:  # noqa: BLE001 - mid-navigation: nothing readable yet
                if frame is page.main_frame:
                    return ""
        return self.conceal(" ".join(" ".join(map(str, texts)).split()))

    async def fingerprint(self, point: CssPoint) -> Optional[Fingerprint]:
        """The element at `point` (browser), the same for the same point until the next observation."""
        key = ("element", point.x, point.y)
        if key not in self._seen:
            page = self.page
            self._seen[key] = await fingerprint_at(page, point) if page is not None else None
        return self._seen[key]

    async def crop(self, point: CssPoint) -> bytes:
        """The image around `point` in the last observation."""
        if self.last is None:
            return b""
        key = ("crop", point.x, point.y)
        if key not in self._seen:
            self._seen[key] = await asyncio.to_thread(crop_around, self.last.screenshot, point)
        return self._seen[key]

    # -- acting -----------------------------------------------------------------

    def conceal(self, text: str) -> str:
        return self.secrets.scrub(text) if self.secrets else text

    async def perform(self, action: Action) -> ActionOutcome:
        recorded = await self._anchor(action)
        try:
            outcome = await self.inner.perform(self.secrets.reveal_action(action))
        except (ActionFailed, ActionNotSupported) as exc:
            raise type(exc)(self.conceal(str(exc))) from None
        except ValueError as exc:
            raise ValueError(self.conceal(str(exc))) from None
        except SurferError as exc:
            exc.args = tuple(self.conceal(str(a)) for a in exc.args)
            raise
        outcome.detail = self.conceal(outcome.detail)
        self._seen.clear()  # the page changed
        self.log.append(recorded)
        return outcome

    async def _anchor(self, action: Action) -> CachedAction:
        points = [p for p in (getattr(action, "point", None), getattr(action, "to_point", None)) if p is not None]
        data = self.secrets.scrub_obj(action.model_dump(mode="json", exclude_none=True, exclude={"point", "to_point"}))
        recorded = CachedAction(data, [{"x": round(p.x, 2), "y": round(p.y, 2)} for p in points], self.page_pattern())
        if points and targets_of(action):
            element = await self.fingerprint(points[0])
            recorded.element = vars(element) if element else None
            recorded.crop_png = await self.crop(points[0])
        return recorded

    def take_log(self) -> list[CachedAction]:
        log, self.log = self.log, []
        return log
