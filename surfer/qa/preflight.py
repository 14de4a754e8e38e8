"""Is the app under test there? Checked once before a suite runs, before the
browser starts: something must accept a connection at the suite's
`base_url`. Nothing listening there, a host name that does not resolve, or
no connection in `APP_WAIT_S`: the run stops before any case, with one line
that says so, instead of every case failing on its own with the same error.
A case whose page does not open mid-suite has its base URL checked again
(the app crashed): gone, the run stops there.

Something must also answer there: a GET of the base URL gets the first byte
of an answer in `APP_ANSWER_S` (the browser's navigation timeout), or the app
"accepts connections but sends no answer" (a hung process, a port held by
something else). Any HTTP answer, a 404 or a 500 included, is the app's, for
the cases to judge; a TLS handshake that fails is the browser's to judge.
Cases that start on another host fail on their own. Addresses reached through
a proxy (the `*_proxy` environment variables) and browsers surfer attaches to
(on another machine, with its own network) are not checked."""

from __future__ import annotations

import asyncio
import socket
import ssl
import urllib.request
from typing import Iterable, Optional
from urllib.parse import urlsplit

APP_WAIT_S = 10.0  # how long a connection to the app may take
APP_ANSWER_S = 30.0  # how long its first byte of an answer may take (the browser's navigation timeout)


def same_origin(url: Optional[str], base: Optional[str]) -> bool:
    """Whether `url` is on `base`'s origin (scheme, host and port)."""
    if not url or not base:
        return False
    a, b = urlsplit(url), urlsplit(base)
    return (a.scheme, a.netloc) == (b.scheme, b.netloc) and a.scheme in ("http", "https")


def _proxied(url: str, host: str) -> bool:
    proxies = urllib.request.getproxies()
    return urlsplit(url).scheme in proxies and not urllib.request.proxy_bypass(host)


async def unreachable_app(urls: list[str], wait: float = APP_WAIT_S, answer: float = APP_ANSWER_S) -> Optional[str]:
    """Why the app at one of `urls` cannot be reached (one line), or None when each accepts a connection and
    answers a GET."""
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
            why = await _no_answer(url, host, port, wait, answer)
        except socket.gaierror:
            why = f"the host name {host} does not resolve"
        except ConnectionRefusedError:
            why = f"nothing listens on port {port}"
        except (TimeoutError, asyncio.TimeoutError):
            why = f"no connection in {wait:g} s"
        except ssl.SSLError:
            why = None  # the browser's to judge (it may be told to ignore certificate errors)
        except OSError as exc:
            why = exc.strerror or str(exc)
        if why is not None:
            return f"the app under test cannot be reached at {url}: {why} (is it running?)"
    return None


async def _no_answer(url: str, host: str, port: int, wait: float, answer: float) -> Optional[str]:
    """Connect (in `wait` seconds), GET `url`'s path and wait `answer` seconds for the first byte: None when it
    comes, else what happened. Connection errors are raised."""
    tls = None
    if urlsplit(url).scheme == "https":
        tls = ssl.create_default_context()
        tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE  # any certificate: only an answer is asked for
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls else None), wait)
    try:
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        writer.write(f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nUser-Agent: surfer-qa-preflight\r\n"
                     f"Accept: */*\r\nConnection: close\r\n\r\n".encode("latin-1", "replace"))
        await writer.drain()
        try:
            first = await asyncio.wait_for(reader.read(1), answer)
        except (TimeoutError, asyncio.TimeoutError):
            return f"it accepts connections but sent no answer in {answer:g} s"
        except ConnectionResetError:
            first = b""
        return None if first else "it accepts connections but closes them without an answer"
    finally:
        writer.close()
