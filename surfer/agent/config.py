"""Configuration: defaults < OPENAI_BASE_URL / OPENAI_API_KEY (what every OpenAI client reads) <
config file (TOML) < SURFER_* variables < explicit arguments. Everything parsed from outside goes
through pydantic; problems become `ConfigError` with the offending field named."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from surfer.core.errors import ConfigError
from surfer.models.endpoint import DEFAULT_SERVER_WAIT, Endpoint, check_server_url
from surfer.models.servers import ServerSpec
from surfer.models.profiles import DEFAULT_PROFILE, PROFILES

from .browser_settings import BrowserSettings, parse_viewport  # noqa: F401  (imported from here too)
from .config_errors import format_validation_error

ENV_VARS = {
    "SURFER_BASE_URL": "base_url",
    "SURFER_MODEL": "model",
    "SURFER_API_KEY": "api_key",
    "SURFER_PROFILE": "profile",
}
# read as every OpenAI client reads them, below a surfer config file and the SURFER_* variables
OPENAI_ENV_VARS = {
    "OPENAI_BASE_URL": "base_url",
    "OPENAI_API_KEY": "api_key",
}
ROLE_NAMES = ("policy", "localizer", "validator")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def check_profile(value: str | None) -> str | None:
    """A profile name of the registry, or `auto`: anything else is refused with the names (a misspelt one in a
    file passed `surfer doctor` and failed only when a run started)."""
    if value is not None and value != "auto" and value not in PROFILES:
        raise ValueError(f"unknown profile {value!r}; choose one of: {', '.join(PROFILES)} (or auto)")
    return value


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

    _profile = field_validator("profile")(check_profile)


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
    failsafe: bool = Field(
        default=True, description="pyautogui's fail-safe: the mouse pointer moved into a corner of the screen stops "
        "the run (a person's emergency brake). Turn it off only on a display nobody uses, e.g. Xvfb.",
    )


class AgentConfig(_Strict):
    """The agent's configuration: every key of the [configuration reference](config.md), validated.
    `load_config(path, overrides=...)` builds one from a TOML file, the environment and overrides;
    `Agent(config, **settings)` lays keyword settings over it."""

    _origins: dict[str, str] = PrivateAttr(default_factory=dict)  # where load_config found each setting

    base_url: str = Field(
        default="http://127.0.0.1:8000/v1",
        description="The OpenAI-compatible endpoint every role uses unless its own section says otherwise.",
    )
    model: str = Field(default="Hcompany/Holotron-12B", description="The model name served at the endpoint.")
    api_key: str = Field(default="EMPTY", description="API key sent to the endpoint.")
    request_timeout: float | None = Field(
        default=None, gt=0, description="Seconds for one model request; unset: 120 s, or the time left in the run if less.",
    )
    read_timeout: float | None = Field(
        default=None, gt=0,
        description="Seconds the model server may send nothing while answering one request (before its first byte, "
        "or stalled mid-answer) before the request counts as stalled (retried, then the run ends with the server "
        "named); unset: request_timeout. The server sends nothing until the whole reply is generated, so keep it "
        "above the slowest complete answer.",
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
        default=DEFAULT_PROFILE, description="Model family profile: holotron, holo2, holo1.5, qwen3-vl, openai or auto "
        "(asks the server what it serves). Unset: the family the model's name shows (Hcompany/Holo2-8B: holo2; "
        "Qwen/Qwen2.5-VL-7B-Instruct: holo1.5; Qwen/Qwen3-VL-8B-Instruct: qwen3-vl), else holotron.",
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
        default=None, description='A reward function, "module:function" or "file.py:function" (relative to the working '
        "directory; in a configuration file, to its folder), called with the run's result and its run directory when a run ends (default: "
        "1 for success, else 0).",
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
        default=None, description="A version string recorded with every model call (trajectory.jsonl; tokens.jsonl "
        "with record_tokens) and export row, e.g. the training step of the weights or adapter served.",
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
                                     "and desktop QA suites (section [desktop]); in the SDK, DesktopEnvironment(settle=..., failsafe=...).")
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

    @property
    def has_domain_rules(self) -> bool:
        """Whether the browser is held to domain rules (its Chromium is then launched for them: chromium.GUARDED_ARGS)."""
        return bool(self.allowed_domains or self.blocked_domains)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_server_url(value)

    _profile = field_validator("profile")(check_profile)

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

    def origin(self, field: str) -> str:
        """Where the top-level setting `field` came from, as load_config found it: the arguments' or flags'
        name, an environment variable (SURFER_BASE_URL, OPENAI_BASE_URL...), the config file's path, or
        "default"."""
        return self._origins.get(field, "default")

    def server_specs(self) -> list[ServerSpec]:
        """The configured servers, each complete (the shared settings fill what it leaves unset); at
        least one: `base_url` when no `servers` are given."""
        entries = self.servers or [ServerSettings(base_url=self.base_url)]
        return [ServerSpec(
            Endpoint(base_url=e.base_url, model=e.model or self.model, api_key=e.api_key or self.api_key,
                     timeout=self.request_timeout, read_timeout=self.read_timeout, server_wait=self.server_wait,
                     image_refs=self.image_refs,
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
            read_timeout=self.read_timeout,
            server_wait=self.server_wait,
            image_refs=self.image_refs,
            record_tokens=self.record_tokens,
            policy_version=self.policy_version,
            tokens_in=self.tokens_in,
            tokenizer=self.tokenizer,
            session_rank=self.server_placement == "session",
        )


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


# A configuration file's settings that name files, read against the file's folder (as a batch's task lines and
# a QA suite's paths are read against theirs): `surfer run --config conf/surfer.toml` from anywhere finds them.
FILE_PATH_SETTINGS = ("storage_state", "save_storage_state", "user_data_dir")  # of [browser], with upload_files


def paths_against(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    """`data` read from a file in `folder`, its relative file paths made relative to that folder: the [browser]
    section's FILE_PATH_SETTINGS and upload_files, and a `reward = "file.py:function"`'s file."""

    def against(value: Any) -> Any:
        if not isinstance(value, str) or not value.strip() or Path(value).expanduser().is_absolute():
            return value
        return str(folder / value)

    browser = data.get("browser")
    if isinstance(browser, dict):
        browser = {**browser, **{key: against(browser[key]) for key in FILE_PATH_SETTINGS if key in browser}}
        if isinstance(browser.get("upload_files"), list):
            browser["upload_files"] = [against(item) for item in browser["upload_files"]]
        data = {**data, "browser": browser}
    reward = data.get("reward")
    if isinstance(reward, str) and ".py:" in reward:
        file, _, function = reward.rpartition(":")
        data = {**data, "reward": f"{against(file)}:{function}"}
    return data


def load_config(
    path: str | Path | None = None, overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None, overrides_source: str = "arguments",
) -> AgentConfig:
    """Build the configuration from OPENAI_BASE_URL / OPENAI_API_KEY, a TOML file, SURFER_* variables
    and overrides, each over the one before (None values in overrides are ignored). A bad value raises
    ConfigError naming the field and where it came from (the file, the variable, `overrides_source`);
    `AgentConfig.origin(field)` says where a top-level setting came from."""
    file_data: dict[str, Any] = paths_against(read_config_file(path), Path(path).parent) if path else {}
    env = os.environ if environ is None else environ
    from_env = {var: {field: env[var]} for var, field in ENV_VARS.items() if env.get(var, "").strip()}
    from_openai = {var: {field: env[var]} for var, field in OPENAI_ENV_VARS.items() if env.get(var, "").strip()}
    if "SURFER_BASE_URL" in from_env and file_data.get("servers"):  # over a file's servers, as one --base-url is
        from_env["SURFER_BASE_URL"]["servers"] = []
    flags = _drop_none(overrides or {})
    # where a value came from: the first of these layers that holds it
    layers = [(overrides_source, flags), *from_env.items(), (str(path), file_data), *from_openai.items()]
    data: dict[str, Any] = {}
    for part in from_openai.values():
        data = merge_settings(data, part)
    data = merge_settings(data, file_data)
    for part in from_env.values():
        data = merge_settings(data, part)
    data = merge_settings(data, flags)
    guessed = _profile_of_model(data)

    def origin(loc: tuple[Any, ...]) -> str:
        return next((label for label, layer in layers if _holds(layer, loc)), str(path) if path else overrides_source)

    try:
        config = AgentConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, "", origin, AgentConfig)) from None
    config._origins = {field: next((label for label, layer in layers if field in layer), "default") for field in data}
    if guessed:
        config._origins["profile"] = guessed
    return config


def _profile_of_model(data: dict[str, Any]) -> str | None:
    """No profile given, but a model whose name is of a known family (Qwen/Qwen2.5-VL-7B-Instruct, Hcompany/Holo2-8B):
    its profile goes into `data` (the default one's coordinate frame would misplace every click), and the
    origin to say ("the model's name: ..."); None where nothing was guessed."""
    model = data.get("model")
    if "profile" in data or not isinstance(model, str) or not model.strip():
        return None
    from surfer.models.profiles.auto import FALLBACK, suggest_profile

    name, reason = suggest_profile([], model)
    if name == FALLBACK or name == DEFAULT_PROFILE:
        return None
    data["profile"] = name
    return f"the model's name ({reason})"


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
        raise ConfigError(format_validation_error(exc, source, root=AgentConfig)) from None


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
