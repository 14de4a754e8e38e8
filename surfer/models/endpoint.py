"""Where and how to reach an OpenAI-compatible model server: configuration
only, kept apart from the HTTP client (which imports the openai SDK) so that
reading a configuration stays cheap."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

DEFAULT_REQUEST_TIMEOUT = 120.0
DEFAULT_SERVER_WAIT = 300.0


class Endpoint(BaseModel):
    """Where and how to reach an OpenAI-compatible model server."""

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "Hcompany/Holotron-12B"
    api_key: str = "EMPTY"
    timeout: float | None = Field(
        default=None, gt=0,
        description=f"Seconds for one request; unset: {DEFAULT_REQUEST_TIMEOUT:g} s, or the time left in the run if less.",
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
    server_wait: float = Field(
        default=DEFAULT_SERVER_WAIT, ge=0,
        description="Seconds to hold the calls while the server is gone (refused, 502/503/504) before giving up; 0: fail at once.",
    )
