"""`surfer` command line.

Exit codes (surfer/apps/exit_codes.py): 0 success, 1 task failed or gave up
(or hit a limit), 2 bad usage or configuration, 3 model server unreachable,
4 the agent asked a question nobody answered (needs_input), 130 interrupted
by Ctrl-C (SIGINT), 141 its output closed (`| head`), 143 stopped by SIGTERM.

The built-in commands live in surfer/apps/; more come from the entry-point
group `surfer.commands` (surfer's own: `bench`, surfer/bench/commands.py),
read only when the command asked for is not a built-in one, so `surfer
--help` and `surfer run` never import a benchmark."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer
import typer.core
import typer.main

from surfer.apps import early_start, options
from surfer.apps.command_group import CommandGroup, unlabel_flags_below
from surfer.apps.exit_codes import (  # noqa: F401  (EXIT_* and exit_code: also imported from here)
    EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_OUTPUT_CLOSED, EXIT_TERMINATED, EXIT_UNREACHABLE, EXIT_USAGE, exit_code,
)
from surfer.apps.signals import Interrupted, never_started_json, run_interruptible

from surfer.core.errors import ConfigError


class _PluginGroup(CommandGroup):
    """Looks a command that is not built in up among the `surfer.commands`
    entry points, and only then: reading them costs start-up time `surfer
    --help` and `surfer run` need not pay. (What every command shares on its
    way to the user: CommandGroup, surfer/apps/command_group.py.)"""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is None and load_plugin(cmd_name):
            command = typer.main.get_command(app).commands.get(cmd_name)  # type: ignore[attr-defined]
            if command is not None:
                self.add_command(command, cmd_name)
                unlabel_flags_below(command, ctx)
        return command


def load_plugin(name: str) -> bool:
    """Register the plugin command `name` on the app; False when none is installed.
    surfer's own (OWN_PLUGINS) also work from a source tree on PYTHONPATH,
    which has no installed entry points (scripts/gpu_device.sh)."""
    import importlib
    from importlib.metadata import entry_points

    targets = [point.value for point in entry_points(group=PLUGIN_GROUP) if point.name == name]
    if not targets and name in OWN_PLUGINS:
        targets = [OWN_PLUGINS[name]]
    for target in targets:
        module, _, attr = target.partition(":")
        getattr(importlib.import_module(module), attr)(app)
    return bool(targets)


# Commands from other packages (surfer's own `bench` among them): entry points
# `NAME = "module:register"`, register(app) adding the command or group NAME.
PLUGIN_GROUP = "surfer.commands"
OWN_PLUGINS = {"bench": "surfer.bench.commands:register"}  # as in pyproject.toml

app = typer.Typer(
    name="surfer", add_completion=False, no_args_is_help=True, rich_markup_mode="rich", cls=_PluginGroup,
    epilog="Benchmarks: [bold]surfer bench --help[/bold] (installed commands of the `surfer.commands` entry points load on use).",
    help="surfer — a computer-use agent: policy, localizer and validator over a real browser.",
)


def _print_version(value: bool) -> None:
    if value:
        from surfer import __version__

        print(__version__)
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", "-V", callback=_print_version, is_eager=True, help="Print surfer's version and exit."
    ),
) -> None:
    """surfer — a computer-use agent: policy, localizer and validator over a real browser."""
    from surfer.core.surface import calling_from_cli

    ctx.with_resource(calling_from_cli())  # messages name flags (--base-url), not Agent(...) arguments


@app.command()
def run(
    task: Optional[str] = typer.Argument(
        None, help="What the agent should do, in plain language (at an interactive terminal: asked for when left out)."),
    url: Optional[str] = typer.Option(None, "--url", help="Page to open first."),
    base_url: options.BaseUrl = None,
    model: options.Model = None,
    api_key: options.ApiKey = None,
    profile: options.Profile = None,
    prompt_layout: options.PromptLayout = None,
    server_wait: options.ServerWait = None,
    record_tokens: options.RecordTokens = False,
    policy_version: options.PolicyVersion = None,
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Step limit (default 30)."),
    max_seconds: Optional[float] = typer.Option(None, "--max-seconds", help="Wall-time limit in seconds (default 600)."),
    headful: bool = typer.Option(False, "--headful", help="Show the browser window."),
    allow_file_urls: options.AllowFileUrls = False,
    ignore_https_errors: options.IgnoreHttpsErrors = False,
    allow_domain: options.AllowDomain = None,
    block_domain: options.BlockDomain = None,
    secret: options.Secret = None,
    approve_all: options.ApproveAll = False,
    approve_domain: options.ApproveDomain = None,
    answers: options.Answers = None,
    no_follow_up: bool = typer.Option(
        False, "--no-follow-up", help="One task, then exit, also at an interactive terminal (where `surfer run` otherwise "
        "asks for a next task in the same browser when a task ends)."),
    answer_schema: Optional[Path] = typer.Option(
        None, "--answer-schema", help="JSON Schema file: the answer must carry data of that shape (validated; in --json as 'data')."),
    viewport: Optional[str] = typer.Option(None, "--viewport", help="Viewport as WxH in CSS pixels (default 1280x800)."),
    scale: Optional[float] = typer.Option(None, "--device-scale-factor", help="Device scale factor (default 1)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Run directory (default runs/<timestamp>-<slug>)."),
    no_validator: bool = typer.Option(False, "--no-validator", help="Accept answers without the validator."),
    upload_file: options.UploadFiles = None,
    trace: options.Trace = None,
    video: options.Video = None,
    storage_state: options.StorageState = None,
    save_storage_state: options.SaveStorageState = None,
    save_storage_state_on_failure: options.SaveStorageStateOnFailure = False,
    user_data_dir: options.UserDataDir = None,
    cdp_url: options.CdpUrl = None,
    browser_ws: options.BrowserWs = None,
    config: options.ConfigFile = None,
    as_json: bool = typer.Option(False, "--json", help="Print the final result as one JSON object on stdout."),
    env: str = typer.Option("browser", "--env", help="Where to act: 'browser' (Chromium), 'desktop' (the screen, via mss + pyautogui) or 'replay' (recorded screenshots, see --replay)."),
    replay: options.Replay = None,
    display: Optional[str] = typer.Option(None, "--display", help="Desktop only: X display to drive, e.g. :99 (default $DISPLAY)."),
    monitor: int = typer.Option(1, "--monitor", help="Desktop only: monitor number to watch (1 = first; 0 = all together)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Desktop only: log each action without performing it."),
) -> None:
    """Run a task in a real browser (or on the desktop) and watch it step by step; at an interactive
    terminal, follow-up tasks continue in the same browser (a session)."""
    from surfer.agent.answers import AnswerSchema
    from surfer.agent.loop import Agent
    from surfer.agent.questions import PresetAnswers
    from surfer.agent.rundir import claim_run_dir, default_run_dir
    from surfer.apps.controls import TerminalControls
    from surfer.apps.live import LiveView

    console = options.console(stderr=as_json)
    with options.setup_errors(console, json_line=as_json):
        options.check_artifact_modes(trace, video)
        overrides = {
            "base_url": base_url, "model": model, "api_key": api_key, "profile": profile, "prompt_layout": prompt_layout,
            "server_wait": server_wait, "max_steps": max_steps, "max_seconds": max_seconds, "video": video,
            "validate_answers": False if no_validator else None,
            "record_tokens": True if record_tokens else None, "policy_version": policy_version,
            **options.safety_overrides(allow_domain, block_domain, approve_all, approve_domain),
            "browser": {
                "headless": False if headful else None, "viewport": viewport, "device_scale_factor": scale,
                "allow_file_urls": True if allow_file_urls else None,
                "ignore_https_errors": True if ignore_https_errors else None,
                "upload_files": [str(f) for f in upload_file] if upload_file else None, "trace": trace,
                **options.signin_overrides(storage_state, save_storage_state, save_storage_state_on_failure,
                                           user_data_dir, cdp_url, browser_ws),
            },
        }
        cfg = options.load_cli_config(config, overrides, console)
        if env == "browser":
            options.check_browser(cfg, console)
        elif any((storage_state, save_storage_state, user_data_dir, cdp_url, browser_ws)):
            raise ConfigError(f"--storage-state, --save-storage-state, --user-data-dir, --cdp-url and --browser-ws are for the browser, not --env {env}")
        if env not in ("browser", "desktop", "replay"):
            raise ConfigError(f"--env must be 'browser', 'desktop' or 'replay', got {env!r}")
        if env != "browser" and trace not in (None, "off"):
            raise ConfigError(f"--trace is Playwright's trace of the browser; with --env {env} there is none (--video works everywhere)")
        if url:
            from surfer.agent.environments import check_start_url

            check_start_url(url, cfg)
        environment = None
        recordings = options.replay_recordings(env, replay)
        if recordings:
            from surfer.tools.replay import ReplayEnvironment

            environment = ReplayEnvironment(recordings[0])
        if env == "desktop":
            from surfer.agent.environments import desktop_environment
            from surfer.tools.desktop_display import check_display

            if url:
                raise ConfigError("--url is for the browser; with --env desktop, start the application yourself and describe it in the task")
            environment = desktop_environment(cfg, display=display, monitor=monitor, dry_run=dry_run)
            check_display(display, monitor)  # no display, one that does not answer, no such monitor: exit 2, nothing written
        elif display or monitor != 1 or dry_run:
            raise ConfigError("--display, --monitor and --dry-run apply to --env desktop only")
        elif environment is None and early_start.current() is not None:  # Chromium started at process start
            from surfer.agent.environments import browser_environment

            environment = browser_environment(cfg, early=early_start.current().early_browser())  # type: ignore[union-attr]
        # At an interactive terminal (and without --json / --no-follow-up) tasks follow one another in one browser.
        follow_up = sys.stdin.isatty() and sys.stdout.isatty() and not as_json and not no_follow_up
        if not (task or "").strip() and not follow_up:
            raise ConfigError("give the task to run (a prompt for one is offered only at an interactive terminal)")
        # a reused --out is refused: runs never mix (a session's directory holds one run directory per task)
        run_dir = claim_run_dir(out or default_run_dir(task or "session"))
        # At a terminal the person steers the run, confirms sensitive actions and replies to the agent's questions.
        controls = TerminalControls(console, run_dir) if sys.stdin.isatty() else None
        confirm = controls.confirm if controls is not None and cfg.sensitive_actions != "approve" else None
        preset = PresetAnswers.load(answers) if answers else None
        listeners = [LiveView(console), *([controls.follow] if controls is not None else [])]  # (each task's directory)
        agent = Agent(cfg, environment=environment, listeners=listeners,
                      secrets=options.secrets_from(secret, cfg, console),
                      confirm=confirm, on_question=controls.ask_user if controls is not None else None, answers=preset)
        answer = AnswerSchema.load(answer_schema) if answer_schema else None

    async def main() -> object:
        if follow_up:
            assert controls is not None
            from surfer.apps.session_terminal import run_session

            return await run_session(agent, controls, console, task, url, run_dir, answer)
        try:
            handle = agent.start(task or "", url, out_dir=run_dir, answer_schema=answer)
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
        if follow_up and any(Path(run_dir).glob("*/result.json")):
            options.say(console, "interrupted", "yellow", f"by {stop}; the session's tasks are saved in {run_dir}")
            saved = None
        else:
            saved = options.say_stopped_run(console, stop, run_dir)
        if as_json:  # one line, as a run that ends prints it
            print(json.dumps(json.loads(saved.read_text())) if saved is not None else never_started_json(stop.signum))
        raise typer.Exit(stop.exit_code) from None
    if as_json:
        sys.stdout.write(json.dumps(result.model_dump(mode="json")) + "\n")  # type: ignore[attr-defined]
    raise typer.Exit(EXIT_OK if result is None else exit_code(result))


@app.command()
def version() -> None:
    """Print surfer's version."""
    from surfer import __version__

    print(__version__)


# Built-in command modules: each defines register(app).
COMMAND_MODULES = [
    "surfer.apps.demo.command",
    "surfer.apps.batch_command",
    "surfer.apps.view",
    "surfer.apps.export",
    "surfer.apps.serve",
    "surfer.apps.doctor",
    "surfer.apps.calibrate",
    "surfer.apps.qa_command",
    "surfer.apps.mcp_server.command",
    "surfer.apps.auth_command",
    "surfer.apps.policy_command",
]


def _register_commands() -> None:
    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)


_register_commands()


def main() -> None:
    app()
