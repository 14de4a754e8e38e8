"""A person signs in, surfer keeps the state (`surfer auth save`), and a state
is tried for real (`surfer auth check --load`).

`record_sign_in` opens a visible browser on a URL and waits until the person
is done: they close the window (every tab of it), press Enter in the
terminal (`done` set), or the time runs out. The context's storage state is
read every few seconds while they work, so a browser that quits with its
last window still leaves its last state to save."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

SNAPSHOT_EVERY_S = 2.0
PROBE_TIMEOUT_S = 30.0
# What a sign-in form shows: a visible password field on the page (or one of its frames).
PASSWORD_FIELD = "input[type=password]"


async def record_sign_in(
    url: str, *, headless: bool = False, done: asyncio.Event | None = None, timeout: float = 600.0,
    on_open: Callable[[Any], Awaitable[None]] | None = None,
) -> tuple[dict[str, Any] | None, str]:
    """(the storage state when the person was done, how they ended: "closed", "enter" or "timeout").
    `on_open(page)` runs once the page is open (tests play the person there)."""
    from surfer.tools.chromium import start_chromium

    playwright, browser = await start_chromium(headless=headless)
    try:
        context = await browser.new_context(no_viewport=True)
        page = await context.new_page()
        await page.goto(url)
        closed = asyncio.Event()

        def on_page_closed(*_: Any) -> None:
            if not any(not p.is_closed() for p in context.pages):
                closed.set()

        context.on("page", lambda p: p.on("close", on_page_closed))
        page.on("close", on_page_closed)
        browser.on("disconnected", lambda *_: closed.set())
        last: dict[str, Any] | None = await context.storage_state()
        if on_open is not None:
            asyncio.ensure_future(on_open(page))
        waits = {asyncio.ensure_future(closed.wait()): "closed", asyncio.ensure_future((done or asyncio.Event()).wait()): "enter"}
        loop = asyncio.get_running_loop()
        ends = loop.time() + timeout
        how = "timeout"
        try:
            while loop.time() < ends:
                finished, _ = await asyncio.wait(waits, timeout=min(SNAPSHOT_EVERY_S, ends - loop.time()),
                                                 return_when=asyncio.FIRST_COMPLETED)
                if finished:
                    how = waits[next(iter(finished))]
                    break
                last = await _snapshot(browser, context) or last
        finally:
            for waiter in waits:
                waiter.cancel()
        return (await _snapshot(browser, context) or last), how
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(browser.close(), 10)
        await playwright.stop()


async def _snapshot(browser: Any, context: Any) -> dict[str, Any] | None:
    """The context's state now (its windows may be closed: the context outlives them); None once the browser is gone."""
    if not browser.is_connected():
        return None
    try:
        return await asyncio.wait_for(context.storage_state(), 10)
    except Exception:  # noqa: BLE001 - the window closed under the call
        return None


@dataclass(frozen=True)
class Probe:
    """What a real load of a URL with a state showed."""

    url: str  # where the browser ended up
    title: str
    status: int | None
    password_field: bool  # a sign-in form is showing
    text_found: bool | None  # the expected text is on the page (None: none was asked for)

    @property
    def signed_in(self) -> bool:
        return not self.password_field and self.text_found is not False


async def probe(url: str, state: dict[str, Any], expect_text: str | None = None) -> Probe:
    """Open `url` headless with `state` and look: did it land on a sign-in form?"""
    from surfer.tools.chromium import start_chromium

    playwright, browser = await start_chromium(headless=True)
    try:
        context = await browser.new_context(storage_state=state)
        page = await context.new_page()
        response = await page.goto(url, timeout=PROBE_TIMEOUT_S * 1000, wait_until="load")
        password = False
        for frame in page.frames:
            with contextlib.suppress(Exception):
                password = password or await frame.locator(PASSWORD_FIELD).first.is_visible()
        found = None
        if expect_text is not None:
            found = expect_text in await page.inner_text("body")
        return Probe(page.url, await page.title(), response.status if response else None, password, found)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(browser.close(), 10)
        await playwright.stop()
