"""The `surfer view` server: Starlette + uvicorn over one output directory.

    GET /                 the page (one self-contained HTML file, no CDN)
    GET /api/state?since= the page's state (surfer.apps.view.state), polled every second
    GET /files/<path>     a file inside OUT (reports, thumbnails, screenshots)

Bound to 127.0.0.1 by default. On any other host every request needs the
token (`?token=` once, then a cookie; or `Authorization: Bearer`). Files are
served from inside OUT only: `..`, encoded `..`, absolute paths and symlinks
leading out of OUT are refused."""

from __future__ import annotations

import asyncio
import errno
import hmac
import mimetypes
import secrets
from pathlib import Path
from typing import Any

from surfer.core.errors import ConfigError

from .state import OutDir

PAGE = Path(__file__).with_name("page.html")
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
COOKIE = "surfer_view_token"
INSTALL = "surfer view needs starlette and uvicorn: pip install 'surfer-agent[view]'"


def _starlette() -> Any:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise ConfigError(INSTALL) from None


def needs_token(host: str) -> bool:
    return host not in LOCAL_HOSTS


def safe_file(root: Path, relative: str) -> Path | None:
    """The file at `relative` inside `root`, or None when it is not one (or leads out of it)."""
    if not relative or relative.startswith(("/", "\\")) or "\x00" in relative:
        return None
    parts = relative.replace("\\", "/").split("/")
    if any(part in ("..", "") for part in parts) or ":" in parts[0]:
        return None
    try:
        target = (root / relative).resolve(strict=True)  # follows symlinks: one pointing out of OUT is caught below
    except (OSError, RuntimeError):
        return None
    if not target.is_relative_to(root) or not target.is_file():
        return None
    return target


SMALL_FILE = 512 * 1024


def _small_file(root: Path, relative: str) -> tuple[Path, bytes | None] | None:
    """The file (as `safe_file`) and, when it is small, its bytes."""
    target = safe_file(root, relative)
    if target is None:
        return None
    try:
        if target.stat().st_size <= SMALL_FILE:
            return target, target.read_bytes()
    except OSError:
        return None
    return target, None


def create_app(out_dir: str | Path, *, token: str | None = None) -> Any:
    """The ASGI app; `token` (when given) is required on every request."""
    _starlette()
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    source = OutDir(out_dir)
    root = source.root
    page = PAGE.read_text(encoding="utf-8")
    lock = asyncio.Lock()

    def authorised(request: Request) -> bool:
        if token is None:
            return True
        given = request.query_params.get("token") or request.cookies.get(COOKIE) or ""
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            given = given or header[7:]
        return hmac.compare_digest(given.encode(), token.encode())

    def refuse() -> Response:
        return PlainTextResponse("a token is required: open the URL surfer view printed (with ?token=…)", status_code=403)

    def secured(response: Response, request: Request) -> Response:
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        if token is not None and request.query_params.get("token"):
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
        return response

    async def index(request: Request) -> Response:
        if not authorised(request):
            return refuse()
        response = HTMLResponse(page)
        response.headers["Content-Security-Policy"] = (
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:; "
            "connect-src 'self'; frame-ancestors 'none'"
        )
        return secured(response, request)

    async def state(request: Request) -> Response:
        if not authorised(request):
            return refuse()
        try:
            since = max(0, int(request.query_params.get("since", "0")))
        except ValueError:
            return PlainTextResponse("since must be a whole number", status_code=400)
        async with lock:  # one reader of the incremental files at a time
            try:
                snapshot = await asyncio.to_thread(source.snapshot, since)
            except OSError:
                if root.is_dir():
                    raise
                # deleted or moved while viewed: said on the page, where each poll was a 500 and a traceback here
                return secured(PlainTextResponse(f"{root.name} is gone (deleted or moved)", status_code=410), request)
        response = JSONResponse(snapshot)
        response.headers["Cache-Control"] = "no-store"
        return secured(response, request)

    async def files(request: Request) -> Response:
        if not authorised(request):
            return refuse()
        found = await asyncio.to_thread(_small_file, root, request.path_params["path"])
        if found is None:
            return PlainTextResponse("not found", status_code=404)
        target, data = found
        if data is not None:  # thumbnails, state: one read in the same thread hop, no streaming
            response: Response = Response(data, media_type=mimetypes.guess_type(target.name)[0] or "application/octet-stream")
        else:
            response = FileResponse(target)
        if target.suffix in (".html", ".htm"):  # a report: its own scripts only, nothing from elsewhere
            response.headers["Content-Security-Policy"] = (
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:; "
                "media-src 'self'"
            )
        response.headers["Cache-Control"] = "no-cache"
        return secured(response, request)

    async def favicon(request: Request) -> Response:
        # every page surfer writes declares its icon; a page written by an older version asks the server
        return Response(status_code=204)

    return Starlette(routes=[
        Route("/", index), Route("/api/state", state), Route("/files/{path:path}", files),
        Route("/favicon.ico", favicon),
    ])


def view_url(host: str, port: int, token: str | None) -> str:
    from surfer.apps.options import url_host

    return f"http://{url_host(host)}:{port}/" + (f"?token={token}" if token else "")


def _quiet_server_class() -> Any:
    import contextlib

    import uvicorn

    class QuietServer(uvicorn.Server):
        """Leaves signals to the host process (surfer's own Ctrl-C / SIGTERM handling)."""

        @contextlib.contextmanager
        def capture_signals(self):  # type: ignore[no-untyped-def]
            yield

    return QuietServer


def _QuietServer(config: Any) -> Any:  # noqa: N802
    return _quiet_server_class()(config)


def _listening_socket(host: str, port: int) -> Any:
    """The page's socket, bound here: a port in use is one line (exit 2), not uvicorn's exit from the event loop."""
    import socket

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise ConfigError(f"surfer view cannot listen on {host}: {exc.strerror or exc} (give --host an address of this machine)") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"surfer view cannot listen on {host}:{port}: the port is in use (another surfer view or "
                              "dashboard?): give another --port (--dashboard-port), or 0 for any free one") from None
        raise ConfigError(f"surfer view cannot listen on {host}:{port}: {exc.strerror or exc} "
                          "(give --host an address of this machine)") from None
    return sock


class ViewServer:
    """uvicorn serving `create_app` inside the current event loop (for `surfer batch --dashboard` and tests)."""

    def __init__(self, out_dir: str | Path, host: str = "127.0.0.1", port: int = 8765, token: str | None = None) -> None:
        _starlette()
        if needs_token(host) and not token:
            token = secrets.token_urlsafe(24)
        self.out_dir, self.host, self.port, self.token = Path(out_dir), host, port, token
        self._server: Any = None
        self._task: asyncio.Task[Any] | None = None

    @property
    def url(self) -> str:
        return view_url(self.host, self.port, self.token)

    async def start(self) -> "ViewServer":
        import uvicorn

        Path(self.out_dir).mkdir(parents=True, exist_ok=True)
        config = uvicorn.Config(create_app(self.out_dir, token=self.token), host=self.host, port=self.port,
                                log_level="warning", access_log=False, lifespan="off")
        self._server = _QuietServer(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[_listening_socket(self.host, self.port)]))
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise ConfigError(f"surfer view could not listen on {self.host}:{self.port}")
            await asyncio.sleep(0.02)
        if self.port == 0:
            self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await asyncio.gather(self._task, return_exceptions=True)
