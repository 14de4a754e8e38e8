"""`surfer mcp`: the command (options as `surfer run` takes them); the server
itself is surfer/apps/mcp_server.py, imported only when the command runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import typer

from surfer.apps import options

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def token_gate(app: Any, token: str) -> Any:
    """The HTTP app, answering 401 to a request without `Authorization: Bearer TOKEN`."""
    import hmac

    async def gated(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            sent = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
            if not hmac.compare_digest(sent, f"Bearer {token}"):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b"surfer mcp: a bearer token is required\n"})
                return
        await app(scope, receive, send)

    return gated


def register(app: typer.Typer) -> None:
    @app.command("mcp")
    def mcp_command(
        base_url: options.BaseUrl = None,
        model: options.Model = None,
        api_key: options.ApiKey = None,
        profile: options.Profile = None,
        server_wait: options.ServerWait = None,
        config: options.ConfigFile = None,
        allow_domain: options.AllowDomain = None,
        block_domain: options.BlockDomain = None,
        approve_all: options.ApproveAll = False,
        approve_domain: options.ApproveDomain = None,
        trace: options.Trace = None,
        video: options.Video = None,
        out: Path = typer.Option(Path("surfer-runs/mcp"), "--out", help="Where the runs' directories go."),
        http: Optional[int] = typer.Option(None, "--http", metavar="PORT", help="Serve streamable HTTP on PORT "
                                           "(path /mcp) instead of stdio."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address for --http; off 127.0.0.1 a token is required."),
        token: Optional[str] = typer.Option(None, "--token", help="Bearer token HTTP clients must send "
                                            "\\[env: SURFER_MCP_TOKEN]."),
    ) -> None:
        """Serve surfer to MCP clients (stdio, or streamable HTTP): run_task, start_task / task_status /
        cancel_task, run_suite; run reports and screenshots as resources."""
        import asyncio
        import logging
        import sys

        console = options.console(stderr=True)  # stdout is the protocol's
        with options.setup_errors(console):
            from surfer.core.errors import ConfigError

            try:
                from surfer.apps.mcp_server import SurferMcp, build_server
            except ImportError as exc:
                raise ConfigError(f"surfer mcp needs the MCP SDK: pip install 'surfer-agent[mcp]' ({exc})") from None
            token = token or os.environ.get("SURFER_MCP_TOKEN")
            if http is not None and host not in LOOPBACK and not token:
                raise ConfigError(f"--http on {host} (not this machine only) needs --token or SURFER_MCP_TOKEN")
            options.check_artifact_modes(trace, video)
            cfg = options.load_cli_config(config, {
                "base_url": base_url, "model": model, "api_key": api_key, "profile": profile, "server_wait": server_wait,
                "video": video, **options.safety_overrides(allow_domain, block_domain, approve_all, approve_domain),
                "browser": {"trace": trace},
            }, console)
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
        server = build_server(SurferMcp(cfg, out))
        if http is None:
            asyncio.run(server.run_stdio_async())
            return
        import uvicorn

        web = server.streamable_http_app(host=host)
        uvicorn.run(token_gate(web, token) if token else web, host=host, port=http, log_level="warning")
