"""Configuration: defaults < config file (TOML) < environment < explicit
arguments. Everything parsed from outside goes through pydantic; problems
become `ConfigError` with the offending field named."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from surfer.core.errors import ConfigError
from surfer.models.endpoint import DEFAULT_SERVER_WAIT, Endpoint, check_server_url
from surfer.models.servers import ServerSpec
from surfer.models.profiles import DEFAULT_PROFILE

ENV_VARS = {
    "SURFER_BASE_URL": "base_url",
    "SURFER_MODEL": "model",
    "SURFER_API_KEY": "api_key",
    "SURFER_PROFILE": "profile",
}
ROLE_NAMES = ("policy", "localizer", "validator")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RoleSettings(_Strict):
    """Per-role overrides; anything left unset falls back to the shared endpoint."""

    base_url: str | None = Field(default=None, description="This role's endpoint (unset: the shared `base_url`).")
    model: str | None = Field(default=None, description="This role's model (unset: the shared `model`).")
    api_key: str | None = Field(default=None, description="This role's API key (unset: the shared `api_key`).")
    temperature: float | None = Field(
        default=None, ge=0, le=2, description="Sampling temperature (unset: the profile's).",
    )
    max_tokens: int | None = Field(default=None, ge=1, description="Completion token cap (unset: the profile's).")

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_server_url(value)


class ServerSettings(_Strict):
    """One model server of several (`servers = [...]`); what it leaves unset comes from the shared settings."""

    base_url: str = Field(description="The server's OpenAI-compatible endpoint, e.g. http://10.0.0.2:8000/v1.")
    model: str | None = Field(default=None, description="The model name served there (unset: the shared `model`).")
    api_key: str | None = Field(default=None, description="Its API key (unset: the shared `api_key`).")
    profile: str | None = Field(
        default=None, description="The family of the model it serves (unset: the shared `profile`); a session moves "
        "only between servers of one profile.",
    )
    weight: float = Field(
        default=1.0, gt=0, description="Its share of the sessions: a server of weight 2 takes twice the sessions of one of 1.",
    )
    node: str | None = Field(
        default=None, description="With --ray: only the sessions of this Ray node use it (the node's IP address or "
        "hostname), e.g. a server on that node's own GPU at http://127.0.0.1:8000/v1.",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_server_url(value)


def parse_viewport(value: Any) -> tuple[int, int]:
    if isinstance(value, str):
        parts = value.lower().replace("×", "x").split("x")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"viewport must look like 1280x800, got {value!r}")
        value = (int(parts[0]), int(parts[1]))
    width, height = value
    if not (100 <= width <= 10_000 and 100 <= height <= 10_000):
        raise ValueError(f"viewport {width}x{height} is out of range (100..10000 per side)")
    return int(width), int(height)


class DesktopSettings(_Strict):
    settle_timeout: float = Field(
        default=3.0, ge=0, le=60, description="Upper bound on one settle wait after a desktop action, seconds.")
    settle_quiet: float = Field(
        default=0.12, ge=0, le=5, description="How long the screen must stay unchanged to count as settled, seconds.")
    settle_ticking: float = Field(
        default=0.6, gt=0, le=60, description="A part of the screen that keeps changing this long during a settle "
        "wait (a spinner, a progress animation, a video) stops holding it, seconds; parts that changed on their own "
        "between actions (a clock, a blinking cursor) do not hold it at all.",
    )


class BrowserSettings(_Strict):
    headless: bool = Field(default=True, description="Run Chromium without a window (`--headful` turns it off).")
    viewport: tuple[int, int] = Field(default=(1280, 800), description='Viewport in CSS pixels, "WxH" or [W, H].')
    device_scale_factor: float = Field(default=1.0, gt=0, le=4, description="Device pixels per CSS pixel.")
    settle_timeout: float = Field(
        default=3.0, ge=0, le=60, description="Upper bound on one settle wait after an action, seconds.",
    )
    settle_quiet: float = Field(
        default=0.08, ge=0, le=5, description="How long the DOM must stay quiet to count as settled, seconds.",
    )
    settle_ticking: float = Field(
        default=0.6, gt=0, le=60, description="A part of the page that keeps changing this long during a settle wait, "
        "at a steady pace and without growing (a clock, a progress bar, a carousel), stops holding it, seconds.",
    )
    screenshot_format: Literal["jpeg", "png"] = Field(
        default="jpeg", description="Format of the screenshots taken and sent.",
    )
    upload_files: list[str] = Field(default=[], description="Files the agent may upload (the upload action).")
    max_download_mb: float = Field(default=100.0, gt=0, description="Larger downloads are deleted and refused.")
    max_downloads: int = Field(default=20, ge=0, description="Downloads kept per run; later ones are cancelled.")
    allow_file_urls: bool = Field(default=False, description="Let the agent open file: URLs (refused by default).")
    ignore_https_errors: bool = Field(
        default=False, description="Open HTTPS sites whose certificate the browser does not trust (a test server's "
        "self-signed one); only for servers you control.",
    )
    trace: Literal["off", "on", "retain-on-failure"] = Field(
        default="off", description="Playwright trace of each run (screenshots, DOM snapshots, network) as trace.zip.",
    )
    storage_state: str | dict[str, Any] | None = Field(
        default=None, description="Start signed in: a Playwright storage-state JSON file (cookies, localStorage per "
        "origin; `surfer auth save`, --save-storage-state) loaded into each run's browser context. The SDK also takes "
        "the state itself (a dict, e.g. a previous RunResult.storage_state).",
    )
    save_storage_state: str | None = Field(
        default=None, description="Write the context's storage state to this file when a run ends (atomically, mode "
        "0600); by default only after a successful run.",
    )
    save_storage_state_on_failure: bool = Field(
        default=False, description="Write save_storage_state after a run that did not succeed too (failed, limit, error, interrupted).",
    )
    keep_storage_state: bool = Field(
        default=False, description="Return the context's storage state at each run's end as RunResult.storage_state "
        "(in memory only; also on whenever storage_state or save_storage_state is set).",
    )
    user_data_dir: str | None = Field(
        default=None, description="Run in this persistent Chromium profile (logins, extensions' data and preferences "
        "survive); one session at a time: a profile in use by another Chromium is an error.",
    )
    cdp_url: str | None = Field(
        default=None, description="Attach to a running Chromium/Chrome over the DevTools protocol (started with "
        "--remote-debugging-port), e.g. http://127.0.0.1:9222: the run is a new tab in its own context (the user's "
        "logins), or a new context with storage_state; the browser and its tabs are left running.",
    )
    browser_ws: str | None = Field(
        default=None, description="Connect to a Playwright browser server (chromium.launchServer(), `npx playwright "
        "run-server`), e.g. ws://127.0.0.1:3000/: each run is a new context there.",
    )

    @field_validator("viewport", mode="before")
    @classmethod
    def _viewport(cls, value: Any) -> tuple[int, int]:
        return parse_viewport(value)

    @field_validator("upload_files")
    @classmethod
    def _upload_files(cls, value: list[str]) -> list[str]:
        from surfer.tools.transfers import check_upload_files

        try:
            return [str(p) for p in check_upload_files(value)]
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("storage_state")
    @classmethod
    def _storage_state(cls, value: Any) -> Any:
        if isinstance(value, dict):
            from surfer.tools.browser.state import state_problem

            problem = state_problem(value)
            if problem:
                raise ValueError(f"not a Playwright storage state: {problem}")
        return value

    @field_validator("cdp_url", "browser_ws")
    @classmethod
    def _remote_url(cls, value: str | None, info: Any) -> str | None:
        if value is not None:
            from surfer.tools.browser.remote import check_remote_url

            try:
                check_remote_url("--cdp-url" if info.field_name == "cdp_url" else "--browser-ws", value)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _one_browser(self) -> "BrowserSettings":
        chosen = [name for name in ("user_data_dir", "cdp_url", "browser_ws") if getattr(self, name)]
        if len(chosen) > 1:
            raise ValueError(f"choose one browser: {' and '.join(chosen)} contradict each other")
        if self.user_data_dir and self.storage_state is not None:
            raise ValueError("a persistent profile (user_data_dir) keeps its own state; storage_state does not go with it")
        return self

    @property
    def attached(self) -> bool:
        """The browser is one surfer did not launch (cdp_url, browser_ws)."""
        return bool(self.cdp_url or self.browser_ws)


class AgentConfig(_Strict):
    base_url: str = Field(
        default="http://127.0.0.1:8000/v1",
        description="The OpenAI-compatible endpoint every role uses unless its own section says otherwise.",
    )
    model: str = Field(default="Hcompany/Holotron-12B", description="The model name served at the endpoint.")
    api_key: str = Field(default="EMPTY", description="API key sent to the endpoint.")
    request_timeout: float | None = Field(
        default=None, gt=0, description="Seconds for one model request; unset: 120 s, or the time left in the run if less.",
    )
    server_wait: float = Field(
        default=DEFAULT_SERVER_WAIT, ge=0,
        description="Seconds to hold the sessions while the model server is gone mid-run, then give up (0: at once); "
        "with several servers, a session then moves to another one.",
    )
    servers: list[ServerSettings] = Field(
        default=[], description="Several model servers (`--base-url` given more than once): each session is placed "
        "on the one with the most room (its sessions and waiting requests, by weight) and keeps it for its whole "
        "run, its three roles included, so its prefix stays cached there. A string stands for {base_url = ...}. "
        "Empty: `base_url` alone.",
    )
    server_placement: Literal["session", "round-robin-per-request"] = Field(
        default="session", description="How several servers share the load: `session` (each session keeps one server, "
        "and one data-parallel rank of a server that has several), or `round-robin-per-request`, each request to the "
        "next server as a load balancer without affinity would, and no rank asked of a data-parallel server (the "
        "engine spreads the requests) (for benchmarks only: it loses every session's prefix cache).",
    )
    profile: str = Field(
        default=DEFAULT_PROFILE, description="Model family profile: holotron, holo2, holo1.5, openai or auto.",
    )
    policy: RoleSettings = Field(default=RoleSettings(), description="The policy's own endpoint and sampling.")
    localizer: RoleSettings = Field(default=RoleSettings(), description="The localizer's own endpoint and sampling.")
    validator: RoleSettings = Field(default=RoleSettings(), description="The validator's own endpoint and sampling.")
    validate_answers: bool = Field(default=True, description="Ask the validator before accepting an answer.")
    max_steps: int = Field(
        default=30, ge=1, description="Step limit; at the limit the policy is asked once for a final answer.",
    )
    max_seconds: float = Field(
        default=600.0, gt=0, description="Wall-time limit of the run in seconds, model calls included.",
    )
    max_rejections: int = Field(default=2, ge=0, description="Validator rejections before the run fails.")
    output_retries: int = Field(
        default=2, ge=0, le=10, description="Retries of malformed model output, with the error as feedback.",
    )
    max_failed_steps: int = Field(default=3, ge=1, description="Consecutive failed steps before the run ends in error.")
    reward: str | None = Field(
        default=None, description='A reward function, "module:function" or "file.py:function", called with the '
        "run's result and its run directory when a run ends (default: 1 for success, else 0).",
    )
    reward_timeout: float = Field(
        default=60.0, gt=0, description="Seconds a reward function (or a task's expectations) may take; past them "
        "the run has no reward and reward_error says so.",
    )
    max_repeats: int = Field(
        default=3, ge=1, description="Repetitions (the same action on an unchanged screen, a short cycle) before the run ends as stuck.",
    )
    memory_images: int | None = Field(
        default=None, ge=1, le=32,
        description="Screenshots per policy request in the window layout, and the blocks layout's default block "
        "(2N-1); unset: the profile's (3). The server must accept that many images per request "
        "(`surfer serve --max-images`).",
    )
    block_images: int | None = Field(
        default=None, ge=1, le=64,
        description="Blocks layout: the policy's requests grow append-only until they hold this many screenshots, "
        "then start a new block (unset: 2 x memory_images - 1).",
    )
    history_window: int = Field(default=8, ge=1, description="Past steps listed in the policy's compact history.")
    video: Literal["off", "on", "retain-on-failure"] = Field(
        default="off", description="A video of each run from its step screenshots (video.mp4, or video.webp without imageio-ffmpeg).",
    )
    prompt_layout: Literal["window", "blocks", "conversation"] | None = Field(
        default=None, description="Policy prompt layout (unset: the profile's, 'window' for every shipped profile).",
    )
    role_continuation: bool | None = Field(
        default=None, description="Localizer and validator requests continue the policy's request of the step when "
        "they use its endpoint and model (unset: the profile's; on for the Holo families).",
    )
    image_budget: int | None = Field(
        default=None, ge=64, description="Image tokens per request at most (unset: the profile's; none by default).",
    )
    image_refs: bool = Field(
        default=False, description="vLLM >= 0.13: send each screenshot's bytes once per server, then name it by its "
        "content hash (`uuid`); repeated screenshots come from vLLM's processor cache (resent in full on a miss).",
    )
    record_tokens: bool = Field(
        default=False, description="Record every model call token for token (prompt ids as the server computed them, "
        "generated ids, their logprobs, the policy that served it) in each run's tokens.jsonl; needs a server that "
        "returns them (vLLM >= 0.10.2), checked before the run starts.",
    )
    policy_version: str | None = Field(
        default=None, description="A version string recorded with every captured call's policy (e.g. the training "
        "step of the weights or adapter served).",
    )
    tokens_in: Literal["auto", "on", "off"] = Field(
        default="auto", description="Send requests as token ids to SGLang's native /generate, each continuing the "
        "session's last request with the ids the server generated (auto: where the server is SGLang and the "
        "model's tokenizer loads here; on: required; off: chat completions always).",
    )
    tokenizer: str | None = Field(
        default=None, description="The model's tokenizer and chat template for tokens in: a directory or a Hugging "
        "Face id (unset: the tokenizer path the SGLang server names, read from this machine).",
    )
    browser: BrowserSettings = Field(default=BrowserSettings(), description="The browser (section [browser]).")
    desktop: DesktopSettings = Field(default=DesktopSettings(), description="The desktop of `surfer run --env desktop` "
                                     "and desktop QA suites (section [desktop]); in the SDK, DesktopEnvironment(settle=...).")
    sensitive_actions: Literal["deny", "approve"] = Field(
        default="deny", description="What happens to a sensitive action when no person or callback confirms it.",
    )
    sensitive_words: list[str] = Field(
        default_factory=list, description="Extra commitment verbs: a button or menu item named with one is sensitive "
        "(the built-in rules already know buy, pay, order, delete, remove, transfer, send ...).",
    )
    sensitive_exempt: list[str] = Field(
        default_factory=list, description="Phrases never sensitive (a button name or target that contains one).",
    )
    confirm_domains: list[str] = Field(default_factory=list, description="Hosts where every action needs confirmation.")
    approve_domains: list[str] = Field(
        default_factory=list, description="Hosts where sensitive actions are approved without asking (your own app).",
    )
    confirm_downloads: bool = Field(default=True, description="Keep a downloaded file only after a confirmation.")
    allowed_domains: list[str] = Field(default_factory=list, description="Hosts the browser may reach (empty: any not blocked).")
    blocked_domains: list[str] = Field(default_factory=list, description="Hosts the browser may never reach.")

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_server_url(value)

    @field_validator("servers", mode="before")
    @classmethod
    def _server_strings(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [{"base_url": item} if isinstance(item, str) else item for item in value]
        return value

    @model_validator(mode="after")
    def _distinct_servers(self) -> "AgentConfig":
        seen: set[tuple[str, str | None]] = set()
        for n, server in enumerate(self.servers, 1):
            key = (server.base_url.rstrip("/"), server.model)
            if key in seen:
                raise ValueError(f"servers: {server.base_url} is listed twice (entry {n})")
            seen.add(key)
        return self

    def server_specs(self) -> list[ServerSpec]:
        """The configured servers, each complete (the shared settings fill what it leaves unset); at
        least one: `base_url` when no `servers` are given."""
        entries = self.servers or [ServerSettings(base_url=self.base_url)]
        return [ServerSpec(
            Endpoint(base_url=e.base_url, model=e.model or self.model, api_key=e.api_key or self.api_key,
                     timeout=self.request_timeout, server_wait=self.server_wait, image_refs=self.image_refs,
                     record_tokens=self.record_tokens, policy_version=self.policy_version,
                     tokens_in=self.tokens_in, tokenizer=self.tokenizer,
                     session_rank=self.server_placement == "session"),
            e.profile or self.profile, e.weight, e.node,
        ) for e in entries]

    def placed(self, role: str) -> bool:
        """Whether `role` uses the configured servers, placed per session (several servers, and no endpoint
        of its own)."""
        return len(self.servers) > 1 and not getattr(self, role).base_url

    @field_validator("allowed_domains", "blocked_domains", "confirm_domains", "approve_domains")
    @classmethod
    def _domain_patterns(cls, value: list[str]) -> list[str]:
        from surfer.tools.url_policy import parse_patterns

        try:
            parse_patterns(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return value

    def endpoint(self, role: str) -> Endpoint:
        """`role`'s endpoint: its own, else the shared one (with several servers: the first)."""
        settings: RoleSettings = getattr(self, role)
        first = self.server_specs()[0].endpoint
        return Endpoint(
            base_url=settings.base_url or first.base_url,
            model=settings.model or first.model,
            api_key=settings.api_key or first.api_key,
            timeout=self.request_timeout,
            server_wait=self.server_wait,
            image_refs=self.image_refs,
            record_tokens=self.record_tokens,
            policy_version=self.policy_version,
            tokens_in=self.tokens_in,
            tokenizer=self.tokenizer,
            session_rank=self.server_placement == "session",
        )


def format_validation_error(
    exc: ValidationError, source: str, origin: Callable[[tuple[Any, ...]], str] | None = None,
) -> str:
    """The problems pydantic found, each with its field and where its value came from (`origin` of
    its location, else `source`): one line for one problem."""
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        message = err["msg"].removeprefix("Value error, ")
        problems.append((origin(err["loc"]) if origin else source, f"{where}: {message}"))
    if len(problems) == 1:
        return f"invalid configuration ({problems[0][0]}): {problems[0][1]}"
    sources = ", ".join(dict.fromkeys(label for label, _ in problems))
    return "\n".join([f"invalid configuration ({sources}):", *(f"  {text}" for _, text in problems)])


def merge_settings(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `extra` laid over it, nested sections merged key by key."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_settings(dict(out[key]), value)
        else:
            out[key] = value
    return out


def read_config_file(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))  # (a byte order mark, as Windows editors write it)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None


def load_config(
    path: str | Path | None = None, overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None, overrides_source: str = "arguments",
) -> AgentConfig:
    """Build the configuration from a TOML file, SURFER_* variables and overrides
    (None values in overrides are ignored). A bad value raises ConfigError naming the
    field and where it came from (the file, the SURFER_* variable, `overrides_source`)."""
    file_data: dict[str, Any] = read_config_file(path) if path else {}
    env = os.environ if environ is None else environ
    from_env = {var: {field: env[var]} for var, field in ENV_VARS.items() if env.get(var)}
    flags = _drop_none(overrides or {})
    # where a value came from: the first of these layers that holds it
    layers = [(overrides_source, flags), *from_env.items(), (str(path), file_data)]
    data = file_data
    for part in from_env.values():
        data = merge_settings(data, part)
    data = merge_settings(data, flags)

    def origin(loc: tuple[Any, ...]) -> str:
        return next((label for label, layer in layers if _holds(layer, loc)), str(path) if path else overrides_source)

    try:
        return AgentConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, "", origin)) from None


def _holds(layer: Mapping[str, Any], loc: tuple[Any, ...]) -> bool:
    """Whether `layer` sets the value at `loc` (or a list or value above it)."""
    value: Any = layer
    for key in loc:
        if not isinstance(value, Mapping):
            return True
        if key not in value:
            return False
        value = value[key]
    return bool(loc)


def validate_config(data: Mapping[str, Any], source: str) -> AgentConfig:
    try:
        return AgentConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            nested = _drop_none(value)
            if nested:
                out[key] = nested
        elif value is not None:
            out[key] = value
    return out
