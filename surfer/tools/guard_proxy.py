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
"""

from __future__ import annotations

import asyncio
import html
import logging
from typing import Callable
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024
_HOP_HEADERS = {"proxy-connection", "proxy-authorization", "keep-alive", "connection"}

# (url, reason) -> None: told about each refused request.
OnRefused = Callable[[str, str], None]
# (scheme, host, port) -> reason it is refused, or None.
Check = Callable[[str, str, int], "str | None"]


class GuardProxy:
    def __init__(self, check: Check, on_refused: OnRefused) -> None:
        self.check = check
        self.on_refused = on_refused
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
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port_number)
        except OSError as exc:
            body = f"surfer's proxy could not reach {host}:{port_number}: {exc.strerror or exc}"
            await _answer(writer, 502, "Bad Gateway", body)
            return
        try:
            if method.upper() == "CONNECT":
                writer.write(f"{version or 'HTTP/1.1'} 200 Connection established\r\n\r\n".encode())
                await writer.drain()
            else:
                up_writer.write(_origin_form(method, target, version, lines[1:]))
                await up_writer.drain()
            await _pipe_both(reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()


def _origin_form(method: str, target: str, version: str, header_lines: list[str]) -> bytes:
    parts = urlsplit(target)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
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
