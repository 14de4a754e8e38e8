"""The tabs of a session's context as the page opens and closes them: a tab a click opens becomes the agent's;
a tab the page opens by itself (a timer, a `window.open` loop) is closed, as a browser's popup blocker would
(Playwright turns Chromium's blocker off, and the headless shell has none); a tab that closes itself, or one
that only downloaded a file, hands the run back to a tab still open. A mixin of `BrowserEnvironment`
(session.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

# A page may open a tab this long after an action that gives it a user activation (a click, a key), and one per
# action, as a browser's popup blocker allows.
POPUP_ACTIVATION_S = 5.0
ACTIVATING = frozenset({"click", "type", "press", "drag", "upload", "dialog"})


class PageTabs:
    """Which tab the agent works in as tabs open and close (see the module's docstring)."""

    async def _work_in_open_tab(self, index: int = -1) -> None:
        """After the agent's tab closed: work in the open tab at `index` (the last one by default; the last one
        if fewer are open), brought to the front, or in a new blank tab when none is left."""
        remaining = self._tabs
        if not remaining:
            self._use(await self._new_tab())
            return
        self._use(remaining[min(index, len(remaining) - 1)] if index >= 0 else remaining[index])
        await self._page.bring_to_front()

    async def _close_download_tab(self) -> None:
        """A tab the action opened only to download a file (a target=_blank link to one) never shows a page: the
        full browser closes it, the headless shell leaves it blank. It is closed, and the run goes on in the
        tab it left."""
        page = self._page
        if page is not None and not page.is_closed() and page.url in ("", "about:blank") and len(self._tabs) > 1:
            await page.close()
            await self._work_in_open_tab()
            self._notices.append(f"the new tab only downloaded a file and was closed; the current tab is {self._page.url}")

    async def _leave_closed_tab(self) -> None:
        """When the current tab closed itself (`window.close()`: a sign-in popup that is done), the tab the
        agent works in becomes the last one still open (the one that opened it, most often), or a new blank
        one when none is left, and the next outcome says so; never a closed page to screenshot."""
        if self._page is None or not self._page.is_closed() or self._browser_gone or self._context is None:
            return
        closed = self._page.url
        await self._work_in_open_tab()
        self._notices.append(f"the tab at {closed} closed itself; the current tab is now {self._page.url}")

    async def _open_own_tab(self) -> Any:
        """A tab surfer opens itself (never taken for a popup of the page)."""
        self._opening_tab += 1
        try:
            return await self._context.new_page()
        finally:
            self._opening_tab -= 1

    def activated(self, action_type: str) -> None:
        """An action is performed: one of ACTIVATING gives the page a user activation (it may open one tab)."""
        if action_type in ACTIVATING:
            self._activated_at, self._tabs_opened = time.monotonic(), 0

    def may_open_tab(self, page: Any) -> bool:
        """Whether a tab the page opened may stay: one per action that activated the page, within
        POPUP_ACTIVATION_S of it (as a popup blocker allows), any while a person has the controls; else it is
        closed and the next outcome says so."""
        if self._opening_tab or self.person_turn:
            return True
        fresh = self._activated_at is not None and time.monotonic() - self._activated_at <= POPUP_ACTIVATION_S
        if fresh and self._tabs_opened < 1:
            self._tabs_opened += 1
            return True
        self._notices.append(f"the page opened a tab by itself ({page.url or 'about:blank'}) without a click: "
                             "closed, as a browser's popup blocker would")
        closing = asyncio.ensure_future(page.close())
        closing.add_done_callback(lambda t: t.cancelled() or t.exception())
        return False

    def _on_new_page(self, page: Any) -> None:
        # A click that opens a tab makes that tab current; a tab the page opens by itself is closed.
        if self.may_open_tab(page):
            self._use(page)
        self._tab_report.arrived()  # (a blocked popup too: the settle waiting for the tab stops waiting)
