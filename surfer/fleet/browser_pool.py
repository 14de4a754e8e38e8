"""One Chromium shared by many sessions (each its own context), relaunched when it dies."""

from __future__ import annotations

import asyncio
from typing import Any





class SharedBrowser:
    """One Chromium for every session; relaunched when it dies."""

    def __init__(self, headless: bool = True, *, legacy: bool = False) -> None:
        self.headless = headless
        self.legacy = legacy  # Chromium's flags before issue 14 (chromium.launch_args)
        self.browser: Any = None
        self.relaunches = 0
        self._playwright: Any = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        from surfer.tools.chromium import start_chromium

        self._playwright, self.browser = await start_chromium(headless=self.headless, legacy=self.legacy)

    async def get(self) -> Any:
        browser = self.browser
        if not browser.is_connected():
            await self.relaunch(browser)
        return self.browser

    def alive(self, browser: Any) -> bool:
        return browser is self.browser and browser.is_connected()

    async def relaunch(self, dead: Any) -> None:
        from surfer.tools.chromium import launch_chromium

        async with self._lock:
            if self.browser is not dead:
                return  # another session relaunched it already
            if dead.is_connected():  # a killed Chromium's connection is gone: closing it would never answer
                try:
                    await asyncio.wait_for(dead.close(), 10)
                except Exception:  # noqa: BLE001 - it is dying already
                    pass
            self.browser = await launch_chromium(self._playwright, headless=self.headless, legacy=self.legacy)
            self.relaunches += 1

    async def close(self) -> None:
        try:
            if self.browser is not None:
                await self.browser.close()
        except Exception:  # noqa: BLE001
            pass
        if self._playwright is not None:
            await self._playwright.stop()
