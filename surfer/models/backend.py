"""The model backend contract: messages (text + images) and an optional JSON
schema in, text + token usage out."""

from __future__ import annotations

import abc
import asyncio
import base64
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, TypeVar, Union

from surfer.core.unicode import mend

T = TypeVar("T")

RoleName = Literal["policy", "localizer", "validator"]


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    data: bytes
    mime: str = "image/jpeg"
    step: int | None = None  # the agent step whose screenshot this is (for trajectories)
    digest: str | None = None  # SHA-256 of `data` where the caller already has it (models/image_refs.py)

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"


Part = Union[TextPart, ImagePart]


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: tuple[Part, ...]

    @classmethod
    def text(cls, role: Literal["system", "user", "assistant"], text: str) -> "Message":
        return cls(role, (TextPart(text),))

    @property
    def image_count(self) -> int:
        return sum(isinstance(p, ImagePart) for p in self.content)

    @property
    def text_chars(self) -> int:
        return sum(len(p.text) for p in self.content if isinstance(p, TextPart))


@dataclass(frozen=True)
class ModelRequest:
    """One chat completion. `schema_name` names the role (policy/localizer/validator)."""

    messages: tuple[Message, ...]
    schema_name: str
    schema: dict[str, Any] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """What the trajectory records of a request: counts, sampling and the
        prompt itself, with images referenced by the step whose screenshot they are."""
        return {
            "schema": self.schema_name,
            "messages": len(self.messages),
            "images": sum(m.image_count for m in self.messages),
            "text_chars": sum(m.text_chars for m in self.messages),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "prompt": [
                {"role": m.role, "content": [
                    {"type": "image", "step": p.step} if isinstance(p, ImagePart) else {"type": "text", "text": p.text}
                    for p in m.content
                ]}
                for m in self.messages
            ],
        }


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: "Usage") -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens


@dataclass(frozen=True)
class Tokens:
    """One call token for token, as the server computed and sampled it: what a trainer learns from
    and what a continuation sends back (never the chat text re-tokenised).

    `prompt_ids` are the ids the server saw (images expanded to their placeholder ids);
    `logprobs[i]` is the sampling log-probability of `completion_ids[i]`."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...] = ()
    finish_reason: str | None = None
    cached_tokens: int | None = None  # prompt tokens the server found in its cache, where it says
    policy: str = ""  # the model or adapter name the server answered with
    policy_version: str | None = None  # the version string the caller set for this policy
    sampling: Mapping[str, Any] = field(default_factory=dict)  # the sampling parameters the request asked for

    def __post_init__(self) -> None:
        if self.logprobs and len(self.logprobs) != len(self.completion_ids):
            raise ValueError(f"{len(self.logprobs)} logprobs for {len(self.completion_ids)} completion ids")

    def without_ids(self) -> "Tokens":
        """The same record without its ids and logprobs (kept elsewhere, e.g. a run's tokens.jsonl)."""
        return Tokens((), (), (), self.finish_reason, self.cached_tokens, self.policy, self.policy_version, self.sampling)


@dataclass
class Completion:
    text: str
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    model: str = ""
    structured: str = "none"  # how the schema was enforced: response_format | structured_outputs | none
    tokens: Tokens | None = None  # the call's token ids and logprobs, where they were asked for and given
    policy_version: str | None = None  # the version of the session's policy (an adapter), else the configured one
    finish_reason: str | None = None  # why generation stopped, where the server said: stop, length (cut at max_tokens)

    def __post_init__(self) -> None:
        self.text = mend(self.text)  # a lone surrogate in a reply would stop the run's record from being written


class ModelBackend(abc.ABC):
    """Exactly one required method. `check` and `aclose` are optional."""

    @abc.abstractmethod
    async def complete(self, request: ModelRequest) -> Completion:
        """Run one chat completion."""

    async def check(self) -> None:
        """Fail fast with a clear error if the backend cannot serve (preflight)."""

    async def check_tokens(self) -> None:
        """Preflight of token capture (`record_tokens`): fail fast with a clear error (ConfigError) when
        this backend's completions cannot carry `Completion.tokens`. A backend that fills them overrides it."""
        from surfer.core.errors import ConfigError

        raise ConfigError(f"{self.label} does not return token ids and logprobs, which record_tokens needs")

    async def aclose(self) -> None:
        """Release connections."""

    @property
    def label(self) -> str:
        return type(self).__name__


async def run_exclusive(lock: asyncio.Lock, work: Callable[..., T], *args: Any, on_cancel: Callable[[], None] | None = None) -> T:
    """Run blocking `work(*args)` in a thread, one at a time under `lock`.

    Cancelling the caller (a run's time limit, Ctrl-C) returns at once; a thread
    cannot be killed, so `on_cancel` asks it to stop early, and the lock stays
    held until it has finished, so two generations never overlap on one model."""
    await lock.acquire()
    try:
        future = asyncio.ensure_future(asyncio.to_thread(work, *args))
    except BaseException:
        lock.release()
        raise

    def finished(done: asyncio.Future[T]) -> None:
        lock.release()
        if not done.cancelled():
            done.exception()  # retrieved: a cancelled caller no longer waits for it

    future.add_done_callback(finished)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if on_cancel is not None:
            on_cancel()
        raise
