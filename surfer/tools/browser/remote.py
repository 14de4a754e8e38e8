"""Browsers surfer did not launch: a Chromium or Chrome reached over the
DevTools protocol (`--cdp-url`: the user's own browser started with
`--remote-debugging-port`, or a browser service), or a Playwright browser
server (`--browser-ws`: `chromium.launchServer()`, `npx playwright
run-server`). surfer opens its own tab (or context) there and, when the run
ends, closes only what it opened and disconnects: the browser and the user's
tabs go on.

Such a browser reaches the network from where it runs, so surfer's local
guard proxy (guard_proxy.py) cannot stand in its way; the domain rules are
enforced by routing instead (`RouteGuard`): every request of surfer's pages
passes through Playwright's router, and a refused host is aborted there."""

from __future__ import annotations

from typing import Any, Callable
from urllib.parse import urlsplit

from surfer.core.errors import ConfigError

CONNECT_TIMEOUT_S = 15.0
CDP_SCHEMES = ("http", "https", "ws", "wss")
WS_SCHEMES = ("ws", "wss")


def check_remote_url(flag: str, url: str) -> None:
    """A URL of `--cdp-url` or `--browser-ws` that cannot be one is a usage error."""
    parts = urlsplit(url)
    schemes = CDP_SCHEMES if flag == "--cdp-url" else WS_SCHEMES
    if parts.scheme not in schemes or not parts.hostname:
        example = "http://127.0.0.1:9222" if flag == "--cdp-url" else "ws://127.0.0.1:3000/"
        raise ConfigError(f"{flag} takes a {' or '.join(s + ':' for s in schemes)} URL such as {example}, got {url!r}")


async def connect_remote(*, cdp_url: str | None = None, browser_ws: str | None = None) -> tuple[Any, Any]:
    """(playwright, browser) attached to a running browser. ConfigError when it cannot be
    reached (nothing listens there, or not a browser): a usage error, not a crash."""
    from surfer.tools.chromium import with_playwright

    return await with_playwright(lambda playwright: attach(playwright, cdp_url=cdp_url, browser_ws=browser_ws))


async def attach(playwright: Any, *, cdp_url: str | None = None, browser_ws: str | None = None) -> Any:
    """The browser at `cdp_url` (DevTools protocol) or `browser_ws` (a Playwright server) on `playwright`."""
    flag, url = ("--cdp-url", cdp_url) if cdp_url else ("--browser-ws", browser_ws)
    assert url is not None
    check_remote_url(flag, url)
    try:
        if cdp_url:
            return await playwright.chromium.connect_over_cdp(cdp_url, timeout=CONNECT_TIMEOUT_S * 1000)
        return await playwright.chromium.connect(url, timeout=CONNECT_TIMEOUT_S * 1000)
    except Exception as exc:  # noqa: BLE001 - Playwright's plain Error: refused, timed out, not a browser
        first = str(exc).splitlines()[0] if str(exc) else repr(exc)
        hint = ("start Chrome/Chromium with --remote-debugging-port=9222 and pass http://127.0.0.1:9222"
                if cdp_url else "start a server with `npx playwright run-server --port 3000` or chromium.launchServer()")
        raise ConfigError(f"cannot attach to the browser at {url} ({flag}): {first}. Is it running? {hint}") from None


class RouteGuard:
    """The domain rules enforced on a browser surfer did not launch: a route on
    every request (and web socket) of a context or a page; a refused one is
    aborted and told to the agent through `on_refused(url, reason)`."""

    def __init__(self, refusal: Callable[[str], str | None], on_refused: Callable[[str, str], None]) -> None:
        self.refusal = refusal
        self.on_refused = on_refused

    async def install(self, target: Any) -> None:
        """Route `target` (a BrowserContext, or one Page of a context that is not surfer's)."""
        await target.route("**/*", self._request)
        await target.route_web_socket("**/*", self._web_socket)

    async def _request(self, route: Any) -> None:
        url = route.request.url
        reason = self.refusal(url)
        try:
            if reason is None:
                await route.fallback()
                return
            self.on_refused(url, reason)
            await route.abort("blockedbyclient")
        except Exception:  # noqa: BLE001 - the page or context closed under the request
            pass

    async def _web_socket(self, socket: Any) -> None:
        reason = self.refusal(socket.url)
        if reason is None:
            socket.connect_to_server()
            return
        self.on_refused(socket.url, reason)
        await socket.close(code=1008, reason="refused by surfer's domain rules")
