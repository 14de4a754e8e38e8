"""A Chromium launched before the run asks for one.

`surfer run` starts Playwright's driver and Chromium at process start, while
Python is still importing the agent and reading the configuration
(surfer/apps/early_start.py), and opens a context and page as the defaults
say (viewport, scale factor); the run's `BrowserEnvironment` then takes this
launch, and the page when its options are the same, instead of starting its
own. What was guessed from the command line can be wrong (a configuration
file may ask for a headful browser or another viewport): an environment that
wants something else opens its own, and what it did not take is closed."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from .chromium import start_chromium

DISCARD_TIMEOUT_S = 10.0


class EarlyBrowser:
    """One launch of (playwright, browser) and a first (context, page) on it, begun on
    the running loop at construction, handed to the first caller that wants them."""

    def __init__(
        self, *, headless: bool = True, viewport: tuple[int, int] = (1280, 800), scale: float = 1.0, driver: Any = None,
        guarded: bool = False,
    ) -> None:
        self.headless, self.viewport, self.scale, self.guarded = headless, viewport, scale, guarded
        self._loop = asyncio.get_running_loop()
        self._launch: asyncio.Future[tuple[Any, Any]] = asyncio.ensure_future(
            start_chromium(headless=headless, driver=driver, guarded=guarded))
        self._page: asyncio.Future[tuple[Any, Any]] = asyncio.ensure_future(self._open_page())
        for future in (self._launch, self._page):
            future.add_done_callback(lambda f: f.cancelled() or f.exception())  # a failure is read by its taker
        self.taken = self.page_taken = False

    async def _open_page(self) -> tuple[Any, Any]:
        _, browser = await self._launch
        context = await browser.new_context(
            viewport={"width": self.viewport[0], "height": self.viewport[1]}, device_scale_factor=self.scale,
        )
        return context, await context.new_page()

    def take(self, *, headless: bool, guarded: bool = False) -> asyncio.Future[tuple[Any, Any]] | None:
        """The launch (the taker owns what it yields: close the browser, stop
        playwright), or None when it is taken or does not fit (`guarded`: launched for domain rules)."""
        if self.taken or headless != self.headless or guarded != self.guarded or asyncio.get_running_loop() is not self._loop:
            return None
        self.taken = True
        return self._launch

    def take_page(self, *, viewport: tuple[int, int], scale: float, plain: bool = True) -> asyncio.Future[tuple[Any, Any]] | None:
        """(context, page) opened with these options and no others (`plain`: no
        proxy), for the taker of the launch; None when they differ (the early
        context is then closed)."""
        if not self.taken or self.page_taken:
            return None
        self.page_taken = True
        if plain and (tuple(viewport), scale) == (tuple(self.viewport), self.scale):
            return self._page
        asyncio.ensure_future(self._close_page())
        return None

    async def _close_page(self) -> None:
        with contextlib.suppress(Exception):
            context, _ = await self._page
            await asyncio.wait_for(context.close(), DISCARD_TIMEOUT_S)

    async def discard(self) -> None:
        """Close the launch if nobody took it."""
        if self.taken:  # its taker owns the browser, and with it the early context
            return
        self.taken = self.page_taken = True
        with contextlib.suppress(Exception):  # a launch that failed left nothing open
            playwright, browser = await asyncio.wait_for(asyncio.shield(self._launch), DISCARD_TIMEOUT_S)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(browser.close(), DISCARD_TIMEOUT_S)
            await playwright.stop()
