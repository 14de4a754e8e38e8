"""Command-line options shared by the commands that talk to a model server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

if TYPE_CHECKING:
    from surfer.agent.config import AgentConfig

BaseUrl = Annotated[Optional[list[str]], typer.Option(
    "--base-url", metavar="URL", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 \\[env: SURFER_BASE_URL, OPENAI_BASE_URL]; given more "
    "than once, several servers: each session is placed on one (the one with the most room) and keeps it.")]
Model = Annotated[Optional[str], typer.Option("--model", help="Model name served at the endpoint \\[env: SURFER_MODEL].")]
ApiKey = Annotated[Optional[str], typer.Option("--api-key", help="API key, if the server wants one \\[env: SURFER_API_KEY, OPENAI_API_KEY].")]
Profile = Annotated[Optional[str], typer.Option(
    "--profile", help="Model family profile: holotron, holo2, holo1.5, qwen3-vl, openai or auto \\[env: SURFER_PROFILE] "
    "(default: the family the model's name shows, else holotron).")]
ServerWait = Annotated[Optional[float], typer.Option(
    "--server-wait", min=0, help="Seconds to hold the sessions while the model server is gone mid-run (refused, "
    "502/503/504), then go on; past it: exit 3 with nothing recorded as finished (default 300; 0: fail at once). "
    "With several --base-url, a held session moves to another server instead; exit 3 only when none is left.")]
PromptLayout = Annotated[Optional[str], typer.Option(
    "--prompt-layout", help="Policy prompt layout: window (the default, the reference), blocks (prefix-stable: "
    "the server's prefix cache reuses most of each request) or conversation (each request extends the last one, "
    "its reply included: what SGLang's radix cache resumes to the token, for a hybrid too).")]
RecordTokens = Annotated[bool, typer.Option(
    "--record-tokens", help="Record every model call token for token (prompt and generated ids, logprobs, the "
    "policy that served it) in each run's tokens.jsonl, for training; needs a server that returns them "
    "(vLLM >= 0.10.2), checked at the start.")]
PolicyVersion = Annotated[Optional[str], typer.Option(
    "--policy-version", help="A version string recorded with every model call (trajectory.jsonl; tokens.jsonl with "
    "--record-tokens) and export row, e.g. the training step.")]
UploadFiles = Annotated[Optional[list[Path]], typer.Option(
    "--upload-file", help="A file the agent may upload (repeat for several); no other file is ever read.")]
AllowFileUrls = Annotated[bool, typer.Option(
    "--allow-file-urls", help="Let the agent open file: URLs (refused by default, like chrome:, devtools:, view-source:, javascript:).")]
IgnoreHttpsErrors = Annotated[bool, typer.Option(
    "--ignore-https-errors", help="Open HTTPS sites whose certificate the browser does not trust (a test server's "
    "self-signed one); only for servers you control.")]
AllowDomain = Annotated[Optional[list[str]], typer.Option(
    "--allow-domain", metavar="HOST", help="Host the browser may reach (repeatable; *.example.com wildcards; HOST:PORT for one port). "
    "Given at least once, every other host is blocked, on every request.")]
BlockDomain = Annotated[Optional[list[str]], typer.Option(
    "--block-domain", metavar="HOST", help="Host the browser may never reach (repeatable; same patterns).")]
Secret = Annotated[Optional[list[str]], typer.Option(
    "--secret", metavar="NAME=ENV_VAR[@SITES]", help="A secret the model knows only as {{NAME}}; its value is read from the "
    "environment variable and typed by the executor, never sent or written (repeatable). @example.com,*.example.org "
    "binds it to those sites (the --allow-domain patterns): it is typed only into their fields and sent only to them.")]
Answers = Annotated[Optional[Path], typer.Option(
    "--answers", metavar="FILE", help="Replies to the agent's questions, given beforehand: a JSON file mapping a question "
    "pattern (a regular expression) to its reply, or a list of {\"pattern\", \"answer\", \"secret\"}. A question no "
    "pattern matches is asked at an interactive terminal; elsewhere the run ends needs_input (exit code 4).")]
ApproveAll = Annotated[bool, typer.Option(
    "--approve-all", help="Perform sensitive actions (pressing Buy, Place order, Pay, Delete, Send ...) without asking; "
    "without it they are asked at an interactive terminal and refused elsewhere (the run ends needs_approval).")]
ApproveDomain = Annotated[Optional[list[str]], typer.Option(
    "--approve-domain", metavar="HOST", help="Host where sensitive actions are performed without asking "
    "(repeatable; same patterns as --allow-domain): your own app or a test shop.")]
Trace = Annotated[Optional[str], typer.Option(
    "--trace", metavar="on|retain-on-failure|off", help="Playwright trace of each run (screenshots, DOM snapshots, "
    "network) as trace.zip in its run directory; open it with `python -m playwright show-trace trace.zip`.")]
Video = Annotated[Optional[str], typer.Option(
    "--video", metavar="on|retain-on-failure|off", help="A video of each run made from its step screenshots "
    "(click points marked, a caption per step): video.mp4 with imageio-ffmpeg, else video.webp.")]
StorageState = Annotated[Optional[Path], typer.Option(
    "--storage-state", metavar="FILE", help="Start signed in: a Playwright storage-state JSON (cookies, localStorage "
    "per origin; `surfer auth save`) loaded into each run's browser context.")]
SaveStorageState = Annotated[Optional[Path], typer.Option(
    "--save-storage-state", metavar="FILE", help="Write the browser's storage state to FILE when the run ends "
    "(atomically, mode 0600); after a successful run unless --save-storage-state-on-failure.")]
SaveStorageStateOnFailure = Annotated[bool, typer.Option(
    "--save-storage-state-on-failure", help="With --save-storage-state: write it after a run that did not succeed too.")]
UserDataDir = Annotated[Optional[Path], typer.Option(
    "--user-data-dir", metavar="DIR", help="Run in a persistent Chromium profile (logins, extensions' data, "
    "preferences survive); one Chromium at a time may use it.")]
CdpUrl = Annotated[Optional[str], typer.Option(
    "--cdp-url", metavar="URL", help="Attach to a running Chromium/Chrome over CDP (started with "
    "--remote-debugging-port=9222: http://127.0.0.1:9222); the run is a new tab, the browser is left running.")]
BrowserWs = Annotated[Optional[str], typer.Option(
    "--browser-ws", metavar="URL", help="Connect to a Playwright browser server (`npx playwright run-server`, "
    "chromium.launchServer()): ws://HOST:PORT/...; each run is a new context there.")]
ConfigFile = Annotated[Optional[Path], typer.Option(
    "--config", help="TOML configuration file (per-role endpoints, limits, browser).")]


def url_host(host: str) -> str:
    """`host` as a URL names it: an IPv6 address in brackets (http://[::1]:8000/), anything else as it is."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def server_overrides(base_url: list[str] | None) -> dict[str, Any]:
    """Config overrides of `--base-url` (run, batch, qa, mcp): one endpoint, or several servers
    (`servers`; a list in the config file is then replaced)."""
    if not base_url:
        return {}
    if len(base_url) == 1:
        return {"base_url": base_url[0], "servers": []}
    return {"servers": list(base_url)}


def check_base_urls(urls: list[str] | str | None) -> None:
    """`--base-url` for the commands that take it outside a configuration (doctor, calibrate): ConfigError
    (exit 2) naming a value that is not an http(s) URL, as a configuration says it (check_server_url)."""
    from surfer.core.errors import ConfigError
    from surfer.models.endpoint import check_server_url

    for url in [urls] if isinstance(urls, str) else urls or []:
        try:
            check_server_url(url)
        except ValueError as exc:
            raise ConfigError(f"--base-url {exc}") from None


def safety_overrides(
    allow_domain: list[str] | None, block_domain: list[str] | None, approve_all: bool = False,
    approve_domain: list[str] | None = None,
) -> dict[str, Any]:
    """Config overrides of the safety flags shared by run, batch and qa."""
    return {
        "allowed_domains": allow_domain or None, "blocked_domains": block_domain or None,
        "sensitive_actions": "approve" if approve_all else None, "approve_domains": approve_domain or None,
    }


def signin_overrides(
    storage_state: Path | None = None, save_storage_state: Path | None = None, save_on_failure: bool = False,
    user_data_dir: Path | None = None, cdp_url: str | None = None, browser_ws: str | None = None,
) -> dict[str, Any]:
    """The `browser` config overrides of the sign-in flags shared by run, batch, qa and mcp."""
    return {
        "storage_state": str(storage_state) if storage_state else None,
        "save_storage_state": str(save_storage_state) if save_storage_state else None,
        "save_storage_state_on_failure": True if save_on_failure else None,
        "user_data_dir": str(user_data_dir) if user_data_dir else None, "cdp_url": cdp_url, "browser_ws": browser_ws,
    }


def check_browser(config: "AgentConfig", console: Any) -> None:
    """Before anything runs: a browser window without a display, a state file that cannot be read, a
    profile in use and the like are usage errors (ConfigError, exit 2); a state file others can read is
    a warning."""
    from surfer.agent.environments import check_browser_start

    for warning in check_browser_start(config):
        say(console, "warning:", "yellow", warning)


def check_artifact_modes(trace: str | None, video: str | None) -> None:
    """--trace and --video (run, batch, qa): a clear usage error for a mode that does not exist."""
    from surfer.core.errors import ConfigError
    from surfer.core.retention import MODES

    for flag, value in (("--trace", trace), ("--video", video)):
        if value is not None and value not in MODES:
            raise ConfigError(f"{flag} must be one of {', '.join(MODES)}, got {value!r}")


def secrets_from(specs: list[str] | None, config: "AgentConfig | None" = None, console: Any = None) -> Any:
    """The `--secret NAME=ENV_VAR[@SITES]` flags as a `Secrets` (ConfigError, exit 2, for a bad spec or unset
    variable); with `config` and `console`, a warning line when an unbound secret may be typed on any site."""
    import os

    from surfer.agent.secrets import Secrets

    secrets = Secrets.from_env_specs(specs or [], os.environ)
    if config is not None and console is not None:
        secrets.warn_unbound(config.allowed_domains, lambda text: say(console, "warning:", "yellow", text))
    return secrets


def load_cli_config(config_file: Path | None, overrides: dict[str, Any], console: Any) -> "AgentConfig":
    """The configuration of a command: file < environment < flags, with
    `--profile auto` resolved from the endpoint's /v1/models and said aloud.
    Raises ConfigError (exit 2) or ModelServerUnreachable (exit 3)."""
    from surfer.agent.config import load_config

    if isinstance(overrides.get("base_url"), list):  # the commands' repeatable --base-url
        overrides = {**overrides, "base_url": None, **server_overrides(overrides["base_url"])}
    cfg = load_config(config_file, overrides, overrides_source="flags")
    if cfg.origin("profile").startswith("the model's name"):  # no profile given: the model's family's, said aloud
        say(console, "profile:", "", cfg.origin("profile").removeprefix("the model's name (").removesuffix(")") +
            " (pass --profile to choose)")
    if cfg.profile == "auto" or any(s.profile == "auto" for s in cfg.servers):
        from surfer.models.profiles.auto import suggest_profile_for_endpoint

        first = cfg.server_specs()[0].endpoint
        if cfg.profile == "auto":
            name, reason = asyncio.run(suggest_profile_for_endpoint(first.base_url, first.model, first.api_key))
            say(console, "profile auto:", "", reason)
            cfg = cfg.model_copy(update={"profile": name})
        servers = []
        for server, spec in zip(cfg.servers, cfg.server_specs()):
            if server.profile == "auto":  # a server's own `profile = "auto"`: from what it serves
                name, reason = asyncio.run(suggest_profile_for_endpoint(spec.endpoint.base_url, spec.endpoint.model, spec.endpoint.api_key))
                say(console, f"profile auto ({spec.endpoint.base_url}):", "", reason)
                server = server.model_copy(update={"profile": name})
            servers.append(server)
        cfg = cfg.model_copy(update={"servers": servers})
    return cfg


def say(console: Any, label: str, style: str, message: object) -> None:
    """Print `label` in `style`, then `message` as plain text: messages (errors,
    install hints like `pip install 'surfer-agent[miniwob]'`, model text) are
    never read as rich markup. Not wrapped: a message stays one line for whoever reads or greps it
    (a terminal wraps it for the eye)."""
    from rich.text import Text

    console.print(Text.assemble((label, style), " ", str(message)), soft_wrap=True)


def say_stopped_run(console: Any, stop: object, run_dir: Path) -> Path | None:
    """What a run stopped by a signal (or by its output closing) kept, said in one line:
    its result.json, or None when it was stopped before it had its directory."""
    saved = Path(run_dir) / "result.json"
    if saved.exists():
        say(console, "interrupted", "yellow", f"by {stop}; what was done is saved in {run_dir}")
        return saved
    say(console, "interrupted", "yellow", f"by {stop} before the run started: nothing was recorded")
    return None


def console(stderr: bool = False, soft_wrap: bool = False) -> Any:
    """The CLI's console: no automatic highlighting (numbers, paths and URLs keep one colour);
    a reader that goes away stops the command (surfer/apps/console.py)."""
    from surfer.apps.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=soft_wrap)


@contextmanager
def setup_errors(console: Any, json_line: bool = False) -> Iterator[None]:
    """Around a command's setup: a bad configuration exits 2, a model server
    that cannot be reached exits 3, each with its message; with `json_line` (`surfer run --json`) the message is
    also the result line on stdout (`status` error, its `error_kind`, no run directory), as a run that ends prints
    its own: a script reading it never gets empty input."""
    from surfer.apps.exit_codes import EXIT_UNREACHABLE, EXIT_USAGE
    from surfer.core.errors import ConfigError, ModelServerUnreachable

    try:
        yield
    except (ConfigError, ModelServerUnreachable) as exc:
        say(console, "error:", "red", exc)
        usage = isinstance(exc, ConfigError)
        if json_line:
            import json

            print(json.dumps({"status": "error", "error_kind": "config" if usage else "unreachable", "reason": str(exc),
                              "run_dir": None}))
        raise typer.Exit(EXIT_USAGE if usage else EXIT_UNREACHABLE) from None


Replay = Annotated[Optional[str], typer.Option(
    "--replay", help="With --env replay: recorded run directories (or folders of images) to play back; "
    "'demo' = the set shipped with surfer.")]
DEMO_RECORDINGS = Path(__file__).parent / "demo" / "demo_runs"


def replay_recordings(env: str, replay: str | None) -> list[Any]:
    """The recordings `--env replay --replay DIR` names (ConfigError when the two do not go together)."""
    from surfer.core.errors import ConfigError

    if env != "replay":
        if replay:
            raise ConfigError("--replay applies to --env replay only")
        return []
    if not replay:
        raise ConfigError("--env replay needs --replay DIR (recorded run directories or images; 'demo' for the shipped set)")
    from surfer.tools.replay import load_recordings

    return load_recordings(DEMO_RECORDINGS if replay == "demo" else Path(replay))
