"""`surfer` command line.

Exit codes: 0 success, 1 task failed or gave up (or hit a limit), 2 bad
usage or configuration, 3 model server unreachable, 130 interrupted by
Ctrl-C (SIGINT), 143 stopped by SIGTERM."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from surfer.apps import early_start, options
from surfer.apps.signals import Interrupted, run_interruptible

from surfer.core.errors import ConfigError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 3, 130, 143

app = typer.Typer(
    name="surfer", add_completion=False, no_args_is_help=True, rich_markup_mode="rich",
    help="surfer — a computer-use agent: policy, localizer and validator over a real browser.",
)


def _print_version(value: bool) -> None:
    if value:
        from surfer import __version__

        print(__version__)
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", "-V", callback=_print_version, is_eager=True, help="Print surfer's version and exit."
    ),
) -> None:
    """surfer — a computer-use agent: policy, localizer and validator over a real browser."""


def exit_code(result: object) -> int:
    status = getattr(result, "status", "error")
    if status == "success":
        return EXIT_OK
    if status == "interrupted":
        return EXIT_INTERRUPTED
    if status == "error":
        kind = getattr(result, "error_kind", None)
        return {"config": EXIT_USAGE, "unreachable": EXIT_UNREACHABLE}.get(kind or "", EXIT_FAILED)
    return EXIT_FAILED


@app.command()
def run(
    task: str = typer.Argument(..., help="What the agent should do, in plain language."),
    url: Optional[str] = typer.Option(None, "--url", help="Page to open first."),
    base_url: options.BaseUrl = None,
    model: options.Model = None,
    api_key: options.ApiKey = None,
    profile: options.Profile = None,
    prompt_layout: options.PromptLayout = None,
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Step limit (default 30)."),
    max_seconds: Optional[float] = typer.Option(None, "--max-seconds", help="Wall-time limit in seconds (default 600)."),
    headful: bool = typer.Option(False, "--headful", help="Show the browser window."),
    allow_file_urls: options.AllowFileUrls = False,
    allow_domain: options.AllowDomain = None,
    block_domain: options.BlockDomain = None,
    secret: options.Secret = None,
    approve_all: options.ApproveAll = False,
    approve_domain: options.ApproveDomain = None,
    answer_schema: Optional[Path] = typer.Option(
        None, "--answer-schema", help="JSON Schema file: the answer must carry data of that shape (validated; in --json as 'data')."),
    viewport: Optional[str] = typer.Option(None, "--viewport", help="Viewport as WxH in CSS pixels (default 1280x800)."),
    scale: Optional[float] = typer.Option(None, "--device-scale-factor", help="Device scale factor (default 1)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Run directory (default runs/<timestamp>-<slug>)."),
    no_validator: bool = typer.Option(False, "--no-validator", help="Accept answers without the validator."),
    upload_file: options.UploadFiles = None,
    config: options.ConfigFile = None,
    as_json: bool = typer.Option(False, "--json", help="Print the final result as one JSON object on stdout."),
    env: str = typer.Option("browser", "--env", help="Where to act: 'browser' (Chromium), 'desktop' (the screen, via mss + pyautogui) or 'replay' (recorded screenshots, see --replay)."),
    replay: options.Replay = None,
    display: Optional[str] = typer.Option(None, "--display", help="Desktop only: X display to drive, e.g. :99 (default $DISPLAY)."),
    monitor: int = typer.Option(1, "--monitor", help="Desktop only: monitor number to watch (1 = first; 0 = all together)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Desktop only: log each action without performing it."),
) -> None:
    """Run one task in a real browser (or on the desktop) and watch it step by step."""
    from surfer.agent.answers import AnswerSchema
    from surfer.agent.loop import Agent, default_run_dir
    from surfer.apps.controls import TerminalControls
    from surfer.apps.live import LiveView

    console = options.console(stderr=as_json)
    with options.setup_errors(console):
        overrides = {
            "base_url": base_url, "model": model, "api_key": api_key, "profile": profile, "prompt_layout": prompt_layout,
            "max_steps": max_steps, "max_seconds": max_seconds,
            "validate_answers": False if no_validator else None,
            **options.safety_overrides(allow_domain, block_domain, approve_all, approve_domain),
            "browser": {
                "headless": False if headful else None, "viewport": viewport, "device_scale_factor": scale,
                "allow_file_urls": True if allow_file_urls else None,
                "upload_files": [str(f) for f in upload_file] if upload_file else None,
            },
        }
        cfg = options.load_cli_config(config, overrides, console)
        if env not in ("browser", "desktop", "replay"):
            raise ConfigError(f"--env must be 'browser', 'desktop' or 'replay', got {env!r}")
        if url:
            from surfer.agent.environments import check_start_url

            check_start_url(url, cfg)
        environment = None
        recordings = options.replay_recordings(env, replay)
        if recordings:
            from surfer.tools.replay import ReplayEnvironment

            environment = ReplayEnvironment(recordings[0])
        if env == "desktop":
            from surfer.tools.desktop import DesktopEnvironment

            if url:
                raise ConfigError("--url is for the browser; with --env desktop, start the application yourself and describe it in the task")
            environment = DesktopEnvironment(display=display, monitor=monitor, dry_run=dry_run)
        elif display or monitor != 1 or dry_run:
            raise ConfigError("--display, --monitor and --dry-run apply to --env desktop only")
        elif environment is None and early_start.current() is not None:  # Chromium started at process start
            from surfer.agent.environments import browser_environment

            environment = browser_environment(cfg, early=early_start.current().early_browser())  # type: ignore[union-attr]
        run_dir = out or default_run_dir(task)
        # At a terminal the person steers the run and confirms sensitive actions.
        controls = TerminalControls(console, run_dir) if sys.stdin.isatty() else None
        confirm = controls.confirm if controls is not None and cfg.sensitive_actions != "approve" else None
        agent = Agent(cfg, environment=environment, listeners=[LiveView(console)], secrets=options.secrets_from(secret),
                      confirm=confirm)
        answer = AnswerSchema.load(answer_schema) if answer_schema else None

    async def main() -> object:
        try:
            handle = agent.start(task, url, out_dir=run_dir, answer_schema=answer)
            if controls is not None:
                controls.attach(handle)
            return await handle.result()
        finally:
            if controls is not None:
                controls.detach()
            await agent.aclose()
            if agent.environment is not None:  # the agent closes only environments it made
                await agent.environment.close()

    try:
        result = run_interruptible(main())
    except Interrupted as stop:
        options.say(console, "interrupted", "yellow", f"by {stop}; what was done is saved in {run_dir}")
        if as_json:
            saved = Path(run_dir) / "result.json"
            print(saved.read_text() if saved.exists() else json.dumps({"status": "interrupted", "run_dir": str(run_dir)}))
        raise typer.Exit(stop.exit_code) from None
    if as_json:
        sys.stdout.write(json.dumps(result.model_dump(mode="json")) + "\n")  # type: ignore[attr-defined]
    raise typer.Exit(exit_code(result))


@app.command()
def version() -> None:
    """Print surfer's version."""
    from surfer import __version__

    print(__version__)


bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks: print figures and write JSON (not tests).")
app.add_typer(bench_app, name="bench")

# Front-end modules that add commands: each defines register(app, bench_app).
COMMAND_MODULES = [
    "surfer.apps.demo",
    "surfer.apps.overhead",
    "surfer.apps.batch_command",
    "surfer.apps.view",
    "surfer.apps.export",
    "surfer.apps.miniwob",
    "surfer.apps.throughput",
    "surfer.apps.serve",
    "surfer.apps.doctor",
    "surfer.apps.calibrate",
    "surfer.apps.qa.cli",
    "surfer.apps.gpu_bench",
    "surfer.apps.prompt_bench",
]


def _register_commands() -> None:
    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app, bench_app)


_register_commands()


def main() -> None:
    app()
