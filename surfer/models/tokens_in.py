"""Which path an endpoint's requests take, and why: tokens in (SGLang's
native /generate, sglang_generate.py) or chat completions (any
OpenAI-compatible server, http.py).

`tokens_in` (endpoint.py): `auto` takes tokens in where the server is SGLang
(it answers `GET /get_model_info` with its model path) and the model's
tokenizer with its chat template loads here (the `tokenizer` setting, else the
tokenizer path the server names); `on` requires it (a clear error otherwise);
`off` keeps the chat path. vLLM has no tokens-in route that takes images
with token ids (see docs/engines.md), so it keeps the chat path.

    path = await choose_path(endpoint, client_call)
    path.tokens_in          # True / False
    path.reason             # "SGLang /generate: ids from the tokenizer at /models/holo2"
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

from surfer.core.errors import ConfigError

from .chat_tokens import TemplateTokenizer
from .endpoint import Endpoint, shown_url
from .json_http import ConnectFailed, HttpStatusError, TimedOut

log = logging.getLogger(__name__)
Call = Callable[[str], Awaitable[Any]]  # GET an absolute URL: the decoded JSON answer
PROBE_TIMEOUT = 5.0  # seconds for /get_model_info (at most the request timeout)


@dataclass(frozen=True)
class RequestPath:
    tokens_in: bool
    reason: str
    tokenizer: TemplateTokenizer | None = None
    root: str = ""
    decided: bool = True  # False: the server did not answer the probe; ask again on the next call


def server_root(base_url: str) -> str:
    """The server's own root, where SGLang's native routes live (the base URL without /v1)."""
    return base_url.rstrip("/").removesuffix("/v1")


class NoAnswer(Exception):
    """The server did not answer the probe (refused, timed out, 5xx): no verdict yet."""


async def sglang_model_info(get: Call, root: str) -> dict[str, Any] | None:
    """SGLang's /get_model_info (model_path, tokenizer_path, ...); None for any other server."""
    try:
        info = await get(root + "/get_model_info")
    except HttpStatusError as exc:
        if exc.status_code >= 500:
            raise NoAnswer(str(exc)) from None
        return None
    except ConnectFailed as exc:  # not up yet: asked again on the next call
        raise NoAnswer(str(exc)) from None
    except TimedOut:  # SGLang answers this at once, busy or not: a server that does not is another one
        return None
    return info if isinstance(info, dict) and "model_path" in info else None


def _tokenizer_source(endpoint: Endpoint, info: dict[str, Any]) -> str:
    if endpoint.tokenizer:
        return endpoint.tokenizer
    named = info.get("tokenizer_path") or info.get("model_path") or endpoint.model
    return str(named)


_LOADED: dict[str, TemplateTokenizer] = {}


async def load_tokenizer(source: str, local_only: bool = False) -> TemplateTokenizer:
    """The tokenizer at `source`, loaded once per process (off the loop: it imports transformers)."""
    if source not in _LOADED:
        _LOADED[source] = await asyncio.to_thread(TemplateTokenizer.load, source, local_only)
    return _LOADED[source]


def refused_path(endpoint: Endpoint, message: str, images: bool) -> RequestPath:
    """The chat path after the server refused a tokens-in request (logged once per endpoint)."""
    what = "token ids with images" if images else "token ids"
    reason = f"chat completions: the server refused {what} at /generate ({message.splitlines()[0][:200] if message else 'no message'})"
    log.warning("%s: %s", endpoint.base_url, reason)
    return RequestPath(False, reason)


async def choose_path(endpoint: Endpoint, get: Call) -> RequestPath:
    """The path `endpoint`'s requests take (see the module docstring); ConfigError where `on` cannot be met."""
    if endpoint.tokens_in == "off":
        return RequestPath(False, "chat completions (tokens_in = off)")
    root = server_root(endpoint.base_url)
    try:
        info = await sglang_model_info(get, root)
    except NoAnswer as exc:
        return RequestPath(False, f"chat completions for now: the server did not answer /get_model_info ({exc})", decided=False)
    if info is None:
        why = "the server is not SGLang (no /get_model_info): chat completions"
        if endpoint.tokens_in == "on":
            raise ConfigError(f"tokens_in = on, but {shown_url(endpoint.base_url)}: {why}; set tokens_in = auto or off")
        return RequestPath(False, why)
    source = _tokenizer_source(endpoint, info)
    local = Path(source).expanduser()
    if local.is_dir():
        source = str(local)
    try:
        # what the server names is read from this machine only (a Hugging Face id: from its cache)
        chat = await load_tokenizer(source, local_only=not endpoint.tokenizer)
    except ConfigError as exc:
        if endpoint.tokens_in == "on":
            raise
        return RequestPath(False, f"SGLang, but {exc}: chat completions (set `tokenizer` for tokens in)")
    return RequestPath(True, f"tokens in: SGLang /generate, ids from the tokenizer at {chat.source}", chat, root)
