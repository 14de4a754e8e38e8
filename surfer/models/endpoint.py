"""Where and how to reach an OpenAI-compatible model server: configuration
only, kept apart from the HTTP client (which imports the openai SDK) so that
reading a configuration stays cheap."""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator

DEFAULT_REQUEST_TIMEOUT = 120.0
DEFAULT_SERVER_WAIT = 300.0
EXAMPLE_URL = "http://127.0.0.1:8000/v1"
# host or host:port (a name, an IPv4 address or a bracketed IPv6 one), then an optional path
_SCHEMELESS = re.compile(r"^(?:[\w.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?(?:/\S*)?$")


def shown_url(url: str) -> str:
    """`url` as it is shown and recorded: a password in it (http://user:pw@host/v1, which the request sends as
    basic auth) as ***, and a user name alone too (http://TOKEN@host/v1, a token as the user); any other URL as it is."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    userinfo, _, host = parts.netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    return parts._replace(netloc=f"{user}:***@{host}" if colon else f"***@{host}").geturl()


def check_server_url(url: str) -> str:
    """`url` stripped when it is an http(s) URL with a host (and a port that is a number), else
    ValueError naming it, with the likely URL when only the scheme is missing
    ("localhost:8000/v1": did you mean http://localhost:8000/v1?). Every way a model server's
    address comes in (flags, SURFER_BASE_URL, config files, the SDK, MCP) is checked here."""
    text = url.strip()
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise ValueError(f"{url!r} is not a URL (e.g. {EXAMPLE_URL})") from None
    if parts.scheme in ("http", "https") and parts.hostname:
        path = parts.path.rstrip("/")
        for endpoint in ("/chat/completions", "/v1/completions", "/v1/models"):
            if path.endswith(endpoint):  # the client adds these: a base URL that holds one asks for .../v1/chat/completions/chat/completions
                base = text[: text.index(path) + len(path) - len(endpoint)] + ("/v1" if endpoint.startswith("/v1") else "")
                raise ValueError(f"{url!r} is a route of the server, not its base URL: did you mean {base}?")
        return text
    if "://" not in text and _SCHEMELESS.match(text):
        guess = "http://" + text.rstrip("/") + ("" if "/" in text.rstrip("/") else "/v1")
        raise ValueError(f"{url!r} is not an http(s) URL: did you mean {guess}?")
    raise ValueError(f"{url!r} is not an http(s) URL with a host (e.g. {EXAMPLE_URL})")


class Endpoint(BaseModel):
    """Where and how to reach an OpenAI-compatible model server."""

    base_url: str = EXAMPLE_URL
    model: str = "Hcompany/Holotron-12B"
    api_key: str = "EMPTY"
    timeout: float | None = Field(
        default=None, gt=0,
        description=f"Seconds for one request; unset: {DEFAULT_REQUEST_TIMEOUT:g} s, or the time left in the run if less.",
    )
    read_timeout: float | None = Field(
        default=None, gt=0,
        description="Seconds the server may send nothing while answering (before its first byte, or stalled in the "
        "middle of its answer) before the request counts as stalled and is retried; unset: the request's whole "
        "timeout. Keep it above the longest time to a complete answer of one call: a server answers only once "
        "the whole reply is generated.",
    )
    max_retries: int = Field(default=4, ge=0, description="Retries for transient errors (429, 5xx, timeouts).")
    connect_retries: int = Field(default=2, ge=0, description="Quick retries when the connection is refused.")
    image_refs: bool = Field(
        default=False,
        description="vLLM >= 0.13: send each image's bytes once, then only its content hash (`uuid`); "
        "vLLM takes it from its processor cache (see surfer/models/image_refs.py).",
    )
    tokens_in: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="Send each request as token ids to SGLang's native /generate, continuing the session's last "
        "request with the ids the server generated (auto: where the server is SGLang and the model's tokenizer "
        "loads here; on: required; off: chat completions always).",
    )
    tokenizer: str | None = Field(
        default=None,
        description="The model's tokenizer and chat template for tokens in: a directory or a Hugging Face id "
        "(unset: the tokenizer path the SGLang server names, read from this machine).",
    )
    session_rank: bool = Field(
        default=True,
        description="At a server with several data-parallel ranks (vLLM --data-parallel-size, SGLang --dp-size), keep "
        "each session's requests on one rank (surfer/models/data_parallel.py); False: the engine spreads them.",
    )
    server_wait: float = Field(
        default=DEFAULT_SERVER_WAIT, ge=0,
        description="Seconds to hold the calls while the server is gone (refused, 502/503/504) before giving up; 0: fail at once.",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_server_url(value)
    record_tokens: bool = Field(
        default=False, description="Ask for each call's token ids and logprobs (`return_token_ids`, `logprobs`) "
        "and keep them in `Completion.tokens` (surfer/models/capture.py).",
    )
    policy_version: str | None = Field(default=None, description="The version recorded with each captured call's policy.")
