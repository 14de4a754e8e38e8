"""Adapters (LoRA) on running model servers, and the policy a session's calls go to.

A policy is written `name@version`: `name` is what the server serves — an adapter loaded at run time,
or the base model itself — and goes out as each request's `model`; `version` is the caller's label
(a trainer's step), recorded with every call. The server side:

    await load_adapter(endpoints, "web-rl-0007", "/ckpt/step-7")    # on every server, or on none
    await served(endpoints)                                          # each server's models and adapters
    await unload_adapter(endpoints, "web-rl-0006")

vLLM (started with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora: `surfer serve --lora`)
takes `POST /v1/load_lora_adapter {lora_name, lora_path}` and `/v1/unload_lora_adapter {lora_name}`,
answers plain text on success, and lists the adapters at /v1/models (`root`: the path, `parent`: the
base model). SGLang (0.5.15: `--enable-lora`) takes the same bodies at `/load_lora_adapter` and
`/unload_lora_adapter`, outside /v1, and answers `{success, error_message}`; a chat request picks
an adapter by its `lora_path` field (its `model` alone is not checked: the base model would answer).
Which engine a server is comes from its /v1/models listing (`owned_by`).

Loading is all or nothing over several servers: where one fails, the adapter is unloaded again from
those that took it, and the error names each server's outcome."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Sequence

from surfer.core.errors import ConfigError

from .endpoint import Endpoint, shown_url

ADMIN_TIMEOUT = 300.0  # seconds for a load: the server reads the adapter's weights (from disk or a hub)
NO_RUNTIME_LOADING = ("does not load adapters at run time: start it with `surfer serve --lora` (vLLM: "
                      "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora; SGLang: --enable-lora)")


class AdapterError(ConfigError):
    """An adapter could not be loaded, unloaded or used; the message names each server's outcome.
    `unreachable`: every failure was a server that did not answer."""

    def __init__(self, message: str, outcomes: list["Outcome"] | None = None, unreachable: bool = False) -> None:
        super().__init__(message)
        self.outcomes = outcomes or []
        self.unreachable = unreachable


@dataclass(frozen=True)
class PolicyRef:
    """`name@version`: the model name requests carry (an adapter's, or the base model's) and the
    caller's version label (None: none given)."""

    name: str
    version: str | None = None

    @classmethod
    def parse(cls, value: "str | PolicyRef") -> "PolicyRef":
        if isinstance(value, PolicyRef):
            return value
        text = str(value).strip()
        name, at, version = text.rpartition("@")
        if not at:
            name, version = text, ""
        if not name.strip() or (at and not version.strip()):
            raise ConfigError(f"a policy is NAME or NAME@VERSION (the adapter or model name served), got {value!r}")
        return cls(name.strip(), version.strip() or None)

    def __str__(self) -> str:
        return self.name if self.version is None else f"{self.name}@{self.version}"


def version_of(policy: PolicyRef | None, configured: str | None) -> str | None:
    """The version recorded with a call: its policy's (`name@version`), else the configured `policy_version`."""
    return policy.version if policy is not None and policy.version is not None else configured


@dataclass
class Served:
    """What one server serves: its engine (vllm, sglang, or what /v1/models says), base models, and
    adapters by name -> path."""

    endpoint: Endpoint
    engine: str = "vllm"
    models: list[str] = field(default_factory=list)
    adapters: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # the server could not be read

    @property
    def names(self) -> set[str]:
        return {*self.models, *self.adapters}


@dataclass
class Outcome:
    """One server's part in a load or unload: ok, or why not."""

    base_url: str
    ok: bool
    detail: str = ""
    unreachable: bool = False


def _root(base_url: str) -> str:
    return base_url.rstrip("/").removesuffix("/v1")


def label(n: int, base_url: str) -> str:
    return f"server {n} ({shown_url(base_url)})"


async def _request(client: Any, endpoint: Endpoint, method: str, url: str, body: dict[str, Any] | None,
                   timeout: float) -> tuple[int, Any]:
    """(status, decoded JSON or text); status 0 with the reason when the server did not answer."""
    httpx = _httpx()
    try:
        response = await client.request(method, url, json=body, timeout=timeout,
                                        headers={"Authorization": f"Bearer {endpoint.api_key or 'EMPTY'}"})
    except httpx.TimeoutException as exc:
        return 0, f"no answer within {timeout:g} s ({type(exc).__name__})"
    except httpx.TransportError as exc:
        return 0, f"unreachable ({exc or type(exc).__name__})"
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, response.text


def _httpx() -> Any:
    from .json_http import http_library

    return http_library()


def _message(payload: Any) -> str:
    """The error text of a server's answer (vLLM's `error.message`, SGLang's `error_message`, FastAPI's
    `detail`), on one line."""
    if isinstance(payload, dict):
        error = payload.get("error")
        text = (error.get("message") if isinstance(error, dict) else None) or payload.get("error_message") \
            or payload.get("detail") or payload.get("message") or payload
    else:
        text = payload
    return " ".join(str(text).split())[:400]


def _no_route(status: int, payload: Any) -> bool:
    """A 404 or 405 of the web framework itself: the route is not there (runtime loading off)."""
    return status in (404, 405) and isinstance(payload, dict) and payload.get("detail") in ("Not Found", "Method Not Allowed")


def _client() -> Any:
    """One HTTP client for one operation over the servers (making one costs a TLS context: ~0.1-0.5 s)."""
    return _httpx().AsyncClient()


async def read_served(client: Any, endpoint: Endpoint, timeout: float = 10.0) -> Served:
    """What the server at `endpoint` serves (its /v1/models); `error` set when it cannot be read."""
    status, payload = await _request(client, endpoint, "GET", endpoint.base_url.rstrip("/") + "/models", None, timeout)
    served = Served(endpoint)
    if status != 200 or not isinstance(payload, dict):
        served.error = payload if status == 0 else f"/models answered HTTP {status}: {_message(payload)}"
        return served
    for card in payload.get("data") or []:
        if not isinstance(card, dict) or not card.get("id"):
            continue
        served.engine = str(card.get("owned_by") or served.engine)
        if card.get("parent"):  # an adapter: vLLM and SGLang name its base model as its parent
            served.adapters[str(card["id"])] = str(card.get("root") or "")
        else:
            served.models.append(str(card["id"]))
    return served


async def served(endpoints: Sequence[Endpoint], timeout: float = 10.0, client: Any = None) -> list[Served]:
    """Every server's models and adapters, read at once."""
    if client is None:
        async with _client() as own:
            return await served(endpoints, timeout, own)
    return list(await asyncio.gather(*(read_served(client, e, timeout) for e in endpoints)))


def _admin_url(server: Served, verb: str) -> str:
    if server.engine == "sglang":
        return f"{_root(server.endpoint.base_url)}/{verb}_lora_adapter"
    return f"{server.endpoint.base_url.rstrip('/')}/{verb}_lora_adapter"


def _failure(status: int, payload: Any, name: str, path: str | None) -> tuple[str, bool]:
    """What a failed load or unload means, in words; and whether the server was unreachable."""
    if status == 0:
        return str(payload), True
    text = _message(payload)
    if _no_route(status, payload):
        return f"HTTP {status}: this server {NO_RUNTIME_LOADING}", False
    lowered = text.lower()
    if "lora is not enabled" in lowered or "--enable-lora" in lowered:
        return f"HTTP {status}: started without --enable-lora ({text})", False
    if path is not None and ("no adapter found" in lowered or "not found" in lowered or "does not exist" in lowered):
        return f"HTTP {status}: no adapter at {path} on that server ({text})", False
    return f"HTTP {status}: {text}", False


async def _load_one(client: Any, server: Served, name: str, path: str, timeout: float) -> Outcome:
    url = server.endpoint.base_url
    if server.error is not None:
        return Outcome(url, False, server.error, unreachable=True)
    if name in server.adapters:
        if server.adapters[name] in ("", path):
            return Outcome(url, True, "loaded already")
        return Outcome(url, False, f"an adapter named {name!r} is loaded from {server.adapters[name]} already: "
                                   "unload it first, or load this one under a new name")
    if name in server.models:
        return Outcome(url, False, f"{name!r} is the name of a model it serves: give the adapter another name")
    status, payload = await _request(client, server.endpoint, "POST", _admin_url(server, "load"),
                                     {"lora_name": name, "lora_path": path}, timeout)
    if status == 200 and not (isinstance(payload, dict) and payload.get("success") is False):
        return Outcome(url, True, "loaded")
    detail, unreachable = _failure(status, payload, name, path)
    return Outcome(url, False, detail, unreachable)


async def _unload_one(client: Any, server: Served, name: str, timeout: float) -> Outcome:
    url = server.endpoint.base_url
    if server.error is not None:
        return Outcome(url, False, server.error, unreachable=True)
    if name not in server.adapters:
        return Outcome(url, True, "not loaded there")
    status, payload = await _request(client, server.endpoint, "POST", _admin_url(server, "unload"), {"lora_name": name}, timeout)
    if status == 200 and not (isinstance(payload, dict) and payload.get("success") is False):
        return Outcome(url, True, "unloaded")
    detail, unreachable = _failure(status, payload, name, None)
    return Outcome(url, False, detail, unreachable)


def _report(outcomes: list[Outcome]) -> str:
    """Each server's outcome; once for all when they all say the same."""
    if len(outcomes) > 1 and len({o.detail for o in outcomes}) == 1:
        return f"every server ({len(outcomes)}): {outcomes[0].detail}"
    return "; ".join(f"{label(n, o.base_url)}: {o.detail or 'ok'}" for n, o in enumerate(outcomes, 1))


async def load_adapter(endpoints: Sequence[Endpoint], name: str, path: str, *, timeout: float = ADMIN_TIMEOUT) -> list[Outcome]:
    """Load adapter `name` from `path` (a path on the servers, or a hub id) on every server, or on
    none: where one fails, those that took it unload it again. AdapterError names each outcome."""
    name, path = name.strip(), str(path).strip()
    if not name or not path:
        raise ConfigError("an adapter needs a name and a path")
    if "@" in name:
        raise ConfigError(f"an adapter name holds no '@' (policies are written NAME@VERSION), got {name!r}")
    async with _client() as client:
        listed = await served(endpoints, client=client)
        outcomes = list(await asyncio.gather(*(_load_one(client, s, name, path, timeout) for s in listed)))
        if all(o.ok for o in outcomes):
            return outcomes
        undo = [s for s, o in zip(listed, outcomes) if o.ok and o.detail == "loaded"]
        undone = await asyncio.gather(*(_unload_one(client, _with(s, name, path), name, timeout) for s in undo))
    rolled = [f"{label(listed.index(s) + 1, s.endpoint.base_url)} " + ("unloaded it again" if u.ok else f"could not unload it: {u.detail}")
              for s, u in zip(undo, undone)]
    failed = [o for o in outcomes if not o.ok]
    message = f"adapter {name!r} was loaded on no server: {_report(outcomes)}"
    if rolled:
        message += " (" + "; ".join(rolled) + ")"
    raise AdapterError(message, outcomes, unreachable=all(o.unreachable for o in failed))


def _with(server: Served, name: str, path: str) -> Served:
    """`server` as it is after loading `name` (for its unload)."""
    return Served(server.endpoint, server.engine, server.models, {**server.adapters, name: path})


async def unload_adapter(endpoints: Sequence[Endpoint], name: str, *, timeout: float = 60.0) -> list[Outcome]:
    """Unload adapter `name` from every server that has it. AdapterError when no server has it, or
    when a server failed to unload it (each server's outcome named)."""
    async with _client() as client:
        listed = await served(endpoints, client=client)
        outcomes = list(await asyncio.gather(*(_unload_one(client, s, name, timeout) for s in listed)))
    if not any(name in s.adapters for s in listed) and all(o.ok for o in outcomes):
        held = sorted({a for s in listed for a in s.adapters})
        raise AdapterError(f"no server has an adapter named {name!r} (loaded: {', '.join(held) or 'none'})", outcomes)
    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise AdapterError(f"adapter {name!r} was not unloaded everywhere: {_report(outcomes)}", outcomes,
                           unreachable=all(o.unreachable for o in failed))
    return outcomes


async def check_policy(endpoints: Sequence[Endpoint], policy: PolicyRef) -> list[Served]:
    """Every server serves `policy.name` (a loaded adapter or a base model); AdapterError naming
    the servers that do not, and what they serve."""
    listed = await served(endpoints)
    missing = [(n, s) for n, s in enumerate(listed, 1) if policy.name not in s.names]
    if missing:
        parts = [f"{label(n, s.endpoint.base_url)}: " + (s.error or f"serves {', '.join(sorted(s.names)) or 'nothing'}")
                 for n, s in missing]
        raise AdapterError(f"policy {policy}: {policy.name!r} is not served by every server of the batch ({'; '.join(parts)}); "
                           f"load it first (`surfer policy load {policy.name} PATH`)",
                           unreachable=all(s.error is not None for _, s in missing))
    return listed
