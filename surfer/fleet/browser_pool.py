"""One Chromium shared by many sessions (each its own context), relaunched when it dies;
or one browser surfer did not launch (CDP, a Playwright server), attached to once and
reattached when the connection drops; or none at all for a persistent profile, which
one session at a time opens itself; or an open Playwright browser the caller holds (`given`)."""

from __future__ import annotations

import asyncio
from typing import Any

from surfer.core.errors import ConfigError

PROFILE_ALONE = (
    "a persistent profile (--user-data-dir) holds one session at a time: run with --concurrency 1, or share one "
    "sign-in between concurrent sessions with --storage-state"
)


class SharedBrowser:
    """One Chromium for every session; relaunched when it dies."""

    def __init__(
        self, headless: bool = True, *, legacy: bool = False, cdp_url: str | None = None, browser_ws: str | None = None,
        profile: bool = False, guarded: bool = False,
    ) -> None:
        self.headless = headless
        self.legacy = legacy  # Chromium's flags before issue 14 (chromium.launch_args)
        self.cdp_url, self.browser_ws = cdp_url, browser_ws  # a browser surfer did not launch: attach, never close it
        self.profile = profile  # each session opens the profile itself (get() gives None)
        self.guarded = guarded  # its sessions have domain rules: launched with chromium.GUARDED_ARGS
        self.browser: Any = None
        self.relaunches = 0
        self.is_given = False  # the caller's open browser: used as it is, never closed nor relaunched here
        self._playwright: Any = None
        self._lock = asyncio.Lock()

    @classmethod
    def of(cls, settings: Any, concurrency: int | str = 1, *, guarded: bool = False) -> "SharedBrowser":
        """The shared browser of a configuration's BrowserSettings (`guarded`: its sessions have domain rules);
        ConfigError for a persistent profile asked to serve several sessions at once (said before anything starts)."""
        if settings.user_data_dir and concurrency != 1:
            raise ConfigError(PROFILE_ALONE)
        return cls(headless=settings.headless, cdp_url=settings.cdp_url, browser_ws=settings.browser_ws,
                   profile=bool(settings.user_data_dir), guarded=guarded)

    @classmethod
    def given(cls, browser: Any) -> "SharedBrowser":
        """The sessions' contexts in `browser`, an open Playwright Browser of the caller's event loop (e.g. a
        test's shared one): not launched, closed nor relaunched here (sessions on it after it died fail)."""
        shared = cls()
        shared.browser, shared.is_given = browser, True
        return shared

    @property
    def attached(self) -> bool:
        return bool(self.cdp_url or self.browser_ws)

    async def start(self) -> None:
        if self.profile or self.is_given:
            return
        if self.attached:
            from surfer.tools.browser.remote import connect_remote

            self._playwright, self.browser = await connect_remote(cdp_url=self.cdp_url, browser_ws=self.browser_ws)
            return
        from surfer.tools.chromium import start_chromium

        self._playwright, self.browser = await start_chromium(headless=self.headless, legacy=self.legacy, guarded=self.guarded)

    async def get(self) -> Any:
        browser = self.browser
        if browser is None:
            return None  # a profile: the session opens it
        if not browser.is_connected():
            await self.relaunch(browser)
        return self.browser

    def alive(self, browser: Any) -> bool:
        return browser is None or (browser is self.browser and browser.is_connected())

    async def relaunch(self, dead: Any) -> None:
        from surfer.tools.chromium import launch_chromium

        async with self._lock:
            if self.browser is not dead or self.is_given:
                return  # another session relaunched it already (or it is the caller's: theirs to replace)
            if dead.is_connected() and not self.attached:  # a killed Chromium's connection is gone: closing it would never answer
                try:
                    await asyncio.wait_for(dead.close(), 10)
                except Exception:  # noqa: BLE001 - it is dying already
                    pass
            if self.attached:
                from surfer.tools.browser.remote import attach

                self.browser = await attach(self._playwright, cdp_url=self.cdp_url, browser_ws=self.browser_ws)
            else:
                self.browser = await launch_chromium(self._playwright, headless=self.headless, legacy=self.legacy, guarded=self.guarded)
            self.relaunches += 1

    async def close(self) -> None:
        if self.is_given:
            return
        try:
            if self.browser is not None and not self.attached:  # a browser surfer did not launch goes on
                await self.browser.close()
        except Exception:  # noqa: BLE001
            pass
        if self._playwright is not None:
            await self._playwright.stop()
