"""Is the app under test there? Checked once before a suite runs, before the
browser starts: something must accept a connection at each origin the cases
start on. Nothing listening there, a host name that does not resolve, or no
answer in `APP_WAIT_S`: the run stops before any case, with one line that
says so, instead of every case failing on its own with the same error.

Only the connection is checked (any HTTP answer, a 404 or a 500 included, is
the app's, for the cases to judge). Addresses reached through a proxy (the
`*_proxy` environment variables) and browsers surfer attaches to (on
another machine, with its own network) are not checked."""

from __future__ import annotations

import asyncio
import socket
import urllib.request
from typing import Iterable, Optional
from urllib.parse import urlsplit

APP_WAIT_S = 10.0  # how long a connection to the app may take


def start_addresses(urls: Iterable[Optional[str]]) -> list[str]:
    """The first http(s) start address of each origin, in order."""
    seen: dict[str, str] = {}
    for url in urls:
        if not url:
            continue
        parts = urlsplit(url)
        if parts.scheme in ("http", "https") and parts.hostname:
            seen.setdefault(f"{parts.scheme}://{parts.netloc}", url)
    return list(seen.values())


def _proxied(url: str, host: str) -> bool:
    proxies = urllib.request.getproxies()
    return urlsplit(url).scheme in proxies and not urllib.request.proxy_bypass(host)


async def unreachable_app(urls: list[str], wait: float = APP_WAIT_S) -> Optional[str]:
    """Why the app at one of `urls` cannot be reached (one line), or None when each accepts a connection."""
    for url in urls:
        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:  # a port that is no number: the browser says so for the case
            continue
        if _proxied(url, host):
            continue
        why = None
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), wait)
            writer.close()
        except socket.gaierror:
            why = f"the host name {host} does not resolve"
        except ConnectionRefusedError:
            why = f"nothing listens on port {port}"
        except (TimeoutError, asyncio.TimeoutError):
            why = f"no connection in {wait:g} s"
        except OSError as exc:
            why = exc.strerror or str(exc)
        if why is not None:
            return f"the app under test cannot be reached at {url}: {why} (is it running?)"
    return None
