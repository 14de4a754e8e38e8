"""`surfer mcp`: the Model Context Protocol server, over stdio (the default:
an MCP client starts it as a subprocess) or streamable HTTP (`--http PORT`).

It takes `surfer run`'s configuration (model endpoint, profile, limits,
browser, safety flags, `--config` file) through the CLI's own loading:
file < environment < flags. Only protocol goes to stdout; logs go to stderr.
The `mcp` package is imported when the command runs, never to build
`surfer --help`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from surfer.apps import options


def writable_dir(path: Path, flag: str) -> Path:
    """`path` made absolute (the results name it to a client that does not know the server's working
    directory), checked that it is, or can be made, a directory surfer may write. A client app may
    start `surfer mcp` in / (read-only on macOS): every run failed then, with no reason given."""
    import os

    from surfer.core.errors import ConfigError

    path = path.expanduser().absolute()
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        why = "is not a directory" if not existing.is_dir() else "cannot be written"
        raise ConfigError(f"{flag} {path}: {existing} {why}; give {flag} a directory surfer may write "
                          "(a client app may start surfer mcp in /)")
    return path


def register(app: typer.Typer) -> None:
    @app.command("mcp")
    def mcp(
        http: Optional[int] = typer.Option(
            None, "--http", metavar="PORT", help="Serve streamable HTTP on PORT (endpoint /mcp) instead of stdio."),
        host: str = typer.Option(
            "127.0.0.1", "--host", help="With --http: the interface to bind; off 127.0.0.1 a --token is required."),
        token: Optional[str] = typer.Option(
            None, "--token", envvar="SURFER_MCP_TOKEN", show_envvar=False,
            help="With --http: the bearer token every request must carry \\[env: SURFER_MCP_TOKEN]."),
        runs_dir: Path = typer.Option(Path("runs"), "--runs-dir", help="Where the run directories go (default runs/)."),
        qa_dir: Path = typer.Option(Path("qa-runs"), "--qa-dir", help="Where run_suite's outputs go (default qa-runs/)."),
        session_idle: float = typer.Option(
            120.0, "--session-idle", metavar="SECONDS", help="Close a session's browser after this long without a task "
            "(a later call naming its session_id is told so)."),
        max_sessions: int = typer.Option(
            8, "--max-sessions", min=1, help="Sessions open at once, each a browser of its own; a task that would open "
            "one more is refused (it can name an open session_id instead)."),
        base_url: options.BaseUrl = None,
        model: options.Model = None,
        api_key: options.ApiKey = None,
        profile: options.Profile = None,
        prompt_layout: options.PromptLayout = None,
        server_wait: options.ServerWait = None,
        max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Default step limit per task (default 30)."),
        max_seconds: Optional[float] = typer.Option(
            None, "--max-seconds", help="Default time limit per task in seconds (default 600)."),
        headful: bool = typer.Option(False, "--headful", help="Show the browser windows."),
        viewport: Optional[str] = typer.Option(None, "--viewport", help="Viewport as WxH in CSS pixels (default 1280x800)."),
        scale: Optional[float] = typer.Option(None, "--device-scale-factor", help="Device scale factor (default 1)."),
        no_validator: bool = typer.Option(False, "--no-validator", help="Accept answers without the validator."),
        upload_file: options.UploadFiles = None,
        allow_file_urls: options.AllowFileUrls = False,
        ignore_https_errors: options.IgnoreHttpsErrors = False,
        allow_domain: options.AllowDomain = None,
        block_domain: options.BlockDomain = None,
        secret: options.Secret = None,
        approve_all: options.ApproveAll = False,
        approve_domain: options.ApproveDomain = None,
        trace: options.Trace = None,
        video: options.Video = None,
        storage_state: options.StorageState = None,
        save_storage_state: options.SaveStorageState = None,
        user_data_dir: options.UserDataDir = None,
        cdp_url: options.CdpUrl = None,
        browser_ws: options.BrowserWs = None,
        config: options.ConfigFile = None,
    ) -> None:
        """Serve surfer as an MCP server: run_task, start_task / task_status / cancel_task / answer_task, end_session,
        run_suite, run reports as resources."""
        from surfer.core.errors import ConfigError

        console = options.console(stderr=True)  # stdout carries the protocol only
        with options.setup_errors(console):
            try:
                import mcp as _sdk  # noqa: F401
            except ImportError:
                raise ConfigError("surfer mcp needs the MCP SDK: pip install 'surfer-agent[mcp]'") from None
            if http is not None:
                from .http_auth import needs_token

                if not 0 < http < 65536:
                    raise ConfigError(f"--http must be a port number, got {http}")
                if needs_token(host) and not token:
                    raise ConfigError(f"refusing to serve MCP on {host}:{http} without a bearer token: "
                                      "set --token or SURFER_MCP_TOKEN (or bind --host 127.0.0.1)")
            elif host != "127.0.0.1":
                raise ConfigError("--host applies to --http only")
            options.check_artifact_modes(trace, video)
            flags: dict[str, Any] = {
                "base_url": base_url, "model": model, "api_key": api_key, "profile": profile,
                "prompt_layout": prompt_layout, "server_wait": server_wait, "video": video,
                **options.safety_overrides(allow_domain, block_domain, approve_all, approve_domain),
                "browser": {
                    "headless": False if headful else None, "allow_file_urls": True if allow_file_urls else None,
                    "ignore_https_errors": True if ignore_https_errors else None,
                    "upload_files": [str(f) for f in upload_file] if upload_file else None, "trace": trace,
                    **options.signin_overrides(storage_state, save_storage_state, user_data_dir=user_data_dir,
                                               cdp_url=cdp_url, browser_ws=browser_ws),
                },
            }
            run_flags = {**flags, "max_steps": max_steps, "max_seconds": max_seconds,
                         "validate_answers": False if no_validator else None,
                         "browser": {**flags["browser"], "viewport": viewport, "device_scale_factor": scale}}
            cfg = options.load_cli_config(config, run_flags, console)
            options.check_browser(cfg, console)
            if profile == "auto":
                flags["profile"] = cfg.profile  # resolved once, for the suites too
            from .runs import ServerSettings

            if session_idle <= 0:
                raise ConfigError(f"--session-idle must be positive, got {session_idle:g}")
            runs_dir, qa_dir = writable_dir(runs_dir, "--runs-dir"), writable_dir(qa_dir, "--qa-dir")
            settings = ServerSettings(cfg, config, flags, options.secrets_from(secret, cfg, console), runs_dir, qa_dir,
                                      session_idle, max_sessions)
        from .serve import serve

        serve(settings, http=http, host=host, token=token, console=console)
