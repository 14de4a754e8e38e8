"""`surfer view OUT`: a live page over a batch output directory, a runs/
folder or one run directory (see server.py and state.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional


def register(app: Any) -> None:
    import typer

    from surfer.apps import options

    @app.command("view")
    def view(
        out: Path = typer.Argument(..., help="A batch --out directory, a runs/ folder or one run directory."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (other than loopback needs the token)."),
        port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port to listen on (0: any free port)."),
        token: Optional[str] = typer.Option(
            None, "--token", envvar="SURFER_VIEW_TOKEN", help="Token required off loopback (default: a random one)."),
    ) -> None:
        """Serve a live page over a batch (running or finished), a runs/ folder or a run directory."""
        from surfer.apps.signals import Interrupted, run_interruptible

        from .server import ViewServer

        console = options.console(stderr=True)

        async def serve() -> None:
            server = await ViewServer(out, host, port, token).start()
            options.say(console, "surfer view:", "bold cyan", f"{server.url}  (Ctrl-C to stop)")
            try:
                await server._task  # type: ignore[misc]
            finally:
                await server.stop()

        with options.setup_errors(console):
            if not out.is_dir():
                from surfer.core.errors import ConfigError

                raise ConfigError(f"{out} is not a directory")
            try:
                run_interruptible(serve())
            except Interrupted as stop:
                raise typer.Exit(0 if stop.exit_code == 130 else stop.exit_code) from None
