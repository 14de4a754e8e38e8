"""Running the MCP server: stdio (until the client closes it) or streamable
HTTP (uvicorn, behind the bearer token when one is set). SIGTERM and Ctrl-C
cancel the runs still going (each records `interrupted`) before the exit;
on stdio they end the transport as the client closing stdin does (stdin_relay.py), and a client that stopped
reading cannot hold the server open (stdout_relay.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any, Optional

from .runs import ServerSettings
from .stdin_relay import StdinRelay
from .stdout_relay import StdoutRelay

log = logging.getLogger("surfer.mcp")


def _log_to_stderr() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logger = logging.getLogger("surfer")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # the SDK's handler on the root logger would print each line twice


def serve(settings: ServerSettings, *, http: Optional[int], host: str, token: Optional[str], console: Any) -> None:
    """Serve until stdin closes (stdio) or a signal (both)."""
    _log_to_stderr()
    from .server import build_server

    server, runs = build_server(settings)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        current = asyncio.current_task()
        out = StdoutRelay.start() if http is None else None
        relay = StdinRelay.start(out.end if out is not None else None) if http is None else None

        def stop() -> None:  # the runs still going are recorded as closed with the server, not as cancelled by the client
            runs.closing = True
            if relay is not None:
                relay.end()  # the transport reads end-of-file, as when the client goes away
            else:
                current.cancel()  # type: ignore[union-attr]

        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, stop)
        try:
            if http is None:
                log.info("surfer mcp on stdio · runs in %s", settings.runs_root.resolve())
                await server.run_stdio_async()
            else:
                await _serve_http(server, settings, http, host, token, console, runs)
        finally:
            runs.closing = True
            await asyncio.shield(runs.aclose())
            if relay is not None:
                relay.restore()
            if out is not None:
                out.restore()

    with contextlib.suppress(asyncio.CancelledError, KeyboardInterrupt):
        asyncio.run(main())


class _QuietWhenClosing(logging.Filter):
    """What uvicorn says of the requests and the lifespan a closing server cancels (a signal) is left
    out: a person pressing Ctrl-C saw a hundred lines of tracebacks; the runs' records say what was stopped."""

    def __init__(self, runs: Any) -> None:
        super().__init__()
        self.runs = runs

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.runs.closing


async def _serve_http(server: Any, settings: ServerSettings, port: int, host: str, token: Optional[str], console: Any,
                      runs: Any) -> None:
    import uvicorn

    from .http_auth import BearerToken

    app: Any = server.streamable_http_app(host=host)
    if token:
        app = BearerToken(app, token)
    from surfer.apps.options import url_host

    console.print(f"surfer mcp: http://{url_host(host)}:{port}/mcp" + (" · bearer token required" if token else "")
                  + f" · runs in {settings.runs_root.resolve()}")
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    logging.getLogger("uvicorn.error").addFilter(_QuietWhenClosing(runs))
    await uvicorn.Server(config).serve()
