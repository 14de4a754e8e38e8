"""A local forward proxy that holds a browser context to its domain policy.

Playwright's request routing misses redirect hops, WebSockets and service
workers, so the policy is enforced where nothing passes by: every connection
the context opens goes through this proxy (loopback included), which checks
the host of each request — navigations, redirects (each hop is a new
request), popups, iframes, subresources, `fetch`, form posts, WebSockets and
HTTPS tunnels — and answers a refused one with 403 without ever contacting
the host. It runs on 127.0.0.1 in the session's event loop.

Each plain-HTTP request gets its own upstream connection (`Connection:
close`), so a kept-alive client connection can never carry a request to a
second host past the check.

Behind a proxy of the user's (`http_proxy` / `https_proxy` / `no_proxy` in the
environment, which Chromium follows without domain rules), allowed requests go
on through it, as the browser's own would: loopback addresses directly, as
Chromium sends them.
"""

from __future__ import annotations

import asyncio
import base64
import html
import logging
import urllib.request
from typing import Callable, Mapping
from urllib.parse import unquote, urlsplit

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024
_HOP_HEADERS = {"proxy-connection", "proxy-authorization", "keep-alive", "connection"}

# (url, reason) -> None: told about each refused request.
OnRefused = Callable[[str, str], None]
# (scheme, host, port) -> reason it is refused, or None.
Check = Callable[[str, str, int], "str | None"]


LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


class Upstream:
    """The user's proxies from the environment (`urllib.request.getproxies()`: http_proxy, https_proxy, no_proxy)."""

    def __init__(self, proxies: Mapping[str, str] | None = None) -> None:
        self.proxies = dict(urllib.request.getproxies() if proxies is None else proxies)

    def for_request(self, scheme: str, host: str) -> tuple[str, int, str | None] | None:
        """(host, port, Proxy-Authorization value or None) of the proxy a request to `host` goes through, or None."""
        address = self.proxies.get("https" if scheme in ("https", "wss") else "http")
        if not address or host in LOOPBACK or host.endswith(".localhost") or self._bypassed(host):
            return None
        parts = urlsplit(address if "://" in address else f"http://{address}")
        if not parts.hostname:
            return None
        auth = None
        if parts.username is not None:
            credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            auth = "Basic " + base64.b64encode(credentials.encode()).decode()
        return parts.hostname, parts.port or 80, auth

    def _bypassed(self, host: str) -> bool:
        """no_proxy's hosts and domains go directly."""
        return bool(self.proxies.get("no")) and bool(urllib.request.proxy_bypass_environment(host, self.proxies))


class GuardProxy:
    def __init__(self, check: Check, on_refused: OnRefused, upstream: Upstream | None = None) -> None:
        self.check = check
        self.on_refused = on_refused
        self.upstream = upstream if upstream is not None else Upstream()
        self.refused = 0
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None, "the proxy is not started"
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def start(self) -> "GuardProxy":
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=1024)
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._handle(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except Exception:  # noqa: BLE001 - one broken connection must not stop the proxy
            log.exception("guard proxy connection failed")
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > MAX_HEAD:
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = (lines[0].split(" ", 2) + ["", ""])[:3]
        if method.upper() == "CONNECT":
            host, _, port = target.rpartition(":")
            scheme, url, port_number = "https", f"https://{target}/", int(port or 443)
            host = host.strip("[]")
        else:
            parts = urlsplit(target)
            scheme, host, url = parts.scheme or "http", parts.hostname or "", target
            port_number = parts.port or (443 if scheme in ("https", "wss") else 80)
        reason = self.check(scheme, host.lower(), port_number) if host else "no host in the request"
        if reason is not None:
            self.refused += 1
            self.on_refused(url, reason)
            await _refuse(writer, url, reason, connect=method.upper() == "CONNECT")
            return
        via = self.upstream.for_request(scheme, host.lower())
        try:
            up_reader, up_writer = await asyncio.open_connection(*(via[:2] if via else (host, port_number)))
        except OSError as exc:
            where = f"your proxy {via[0]}:{via[1]}" if via else f"{host}:{port_number}"
            await _answer(writer, 502, "Bad Gateway", f"surfer's proxy could not reach {where}: {exc.strerror or exc}")
            return
        try:
            if method.upper() == "CONNECT":
                if via is not None:  # a tunnel through the user's proxy
                    refused = await _tunnel(up_reader, up_writer, target, via[2])
                    if refused:
                        await _answer(writer, 502, "Bad Gateway", f"your proxy {via[0]}:{via[1]} refused {target}: {refused}")
                        return
                writer.write(f"{version or 'HTTP/1.1'} 200 Connection established\r\n\r\n".encode())
                await writer.drain()
            else:
                up_writer.write(_origin_form(method, target, version, lines[1:], via=via))
                await up_writer.drain()
            await _pipe_both(reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()


async def _tunnel(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: str, auth: str | None) -> str:
    """Ask the user's proxy for a tunnel to `target`: '' when it opened one, else its status line."""
    writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n".encode("latin-1")
                 + (f"Proxy-Authorization: {auth}\r\n" if auth else "").encode("latin-1") + b"\r\n")
    await writer.drain()
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    status = head.split("\r\n", 1)[0]
    return "" if status.split(" ")[1:2] == ["200"] else status


def _origin_form(method: str, target: str, version: str, header_lines: list[str],
                 via: tuple[str, int, str | None] | None = None) -> bytes:
    """The request for the server (origin form), or for the user's proxy `via` (the absolute URL, its credentials)."""
    parts = urlsplit(target)
    path = target if via else (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    upgrade = False
    headers = []
    for line in header_lines:
        if not line:
            continue
        name, _, value = line.partition(":")
        lowered = name.strip().lower()
        if lowered == "connection" and "upgrade" in value.lower():
            upgrade = True
        if lowered in _HOP_HEADERS:
            continue
        headers.append(line)
    if via is not None and via[2]:
        headers.append(f"Proxy-Authorization: {via[2]}")
    headers.append("Connection: Upgrade" if upgrade else "Connection: close")
    return (f"{method} {path} {version}\r\n" + "\r\n".join(headers) + "\r\n\r\n").encode("latin-1")


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        if sink.can_write_eof():
            try:
                sink.write_eof()
            except (OSError, RuntimeError):
                pass


async def _pipe_both(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter,
) -> None:
    upstream = asyncio.ensure_future(_pipe(reader, up_writer))
    try:
        await _pipe(up_reader, writer)  # the exchange ends when the server is done
    finally:
        upstream.cancel()
        await asyncio.gather(upstream, return_exceptions=True)


async def _answer(writer: asyncio.StreamWriter, status: int, phrase: str, text: str) -> None:
    body = (
        "<!doctype html><meta charset=utf-8><link rel=icon href='data:,'><title>Blocked</title>"
        f"<body style='font:16px sans-serif;margin:2em'><h1>{phrase}</h1><p>{html.escape(text)}</p>"
    ).encode()
    writer.write(
        f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
    )
    await writer.drain()


async def _refuse(writer: asyncio.StreamWriter, url: str, reason: str, *, connect: bool) -> None:
    await _answer(writer, 403, "Blocked by surfer's domain policy", f"{url}: {reason}")
