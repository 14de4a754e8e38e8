"""Whether a session's browser and page are alive, and why not: a page that crashed, a browser surfer launched
that died (or whose window a person closed), one it attached to that went away. A mixin of `BrowserEnvironment`
(session.py), which sets the state it reads."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from surfer.core.errors import BrowserCrashed

ALIVE_CHECK_S = 5.0  # a browser that does not answer its liveness check in this long is taken as alive (busy)


class Liveness:
    _page: Any
    _context: Any
    _died: Any
    _crashed: Any
    _browser_gone: bool
    headless: bool
    cdp_url: Any
    browser_ws: Any
    attached: bool  # (a property of BrowserEnvironment's)

    def _on_crash(self, page: Any) -> None:
        if page is self._page:
            self._crashed = page.url
            if self._died is not None:
                self._died.set()

    def _on_browser_gone(self) -> None:
        self._browser_gone = True
        if self._died is not None:
            self._died.set()

    @property
    def alive(self) -> bool:
        return not self._browser_gone and self._crashed is None

    async def check_alive(self) -> bool:
        """A round trip to the browser (not to the page's script): Playwright reports a browser
        that died before it answers, so `alive` is current afterwards."""
        if self.alive and self._context is not None:
            with contextlib.suppress(Exception):  # (a dead browser's error: `alive` says it)
                await asyncio.wait_for(self._context.cookies("https://alive.invalid/"), ALIVE_CHECK_S)
        return self.alive

    def _gone_reason(self) -> str:
        """Why the browser is gone: one surfer launched crashed; one it attached to went away (the user's
        own browser, closed or killed, or its connection lost)."""
        if not self.attached and not self.headless:  # a window a person can close (during a take-over, say)
            return "the browser is gone: its window was closed, or the Chromium process died"
        if not self.attached:
            return "the browser crashed (the Chromium process died)"
        flag, url = ("--cdp-url", self.cdp_url) if self.cdp_url else ("--browser-ws", self.browser_ws)
        return f"the browser at {url} ({flag}) went away: it was closed, its process ended, or the connection to it was lost"

    def _check_alive(self) -> None:
        if self._browser_gone:
            raise BrowserCrashed(self._gone_reason())
        if self._crashed is not None:
            raise BrowserCrashed(f"the page crashed (at {self._crashed or 'about:blank'})")
