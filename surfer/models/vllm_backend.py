"""In-process vLLM behind the `ModelBackend` interface (extra: `vllm`).

    backend = VLLMBackend("Hcompany/Holo2-8B", max_model_len=65536, limit_mm_per_prompt={"image": 3, "video": 0})
    agent = Agent(backend=backend, profile="holo2")

Requests become `vllm.LLM.chat(messages, SamplingParams(...))` calls: images
as data URLs in OpenAI-style message parts, the role's JSON schema as
`StructuredOutputsParams(json=...)`, `chat_template_kwargs` from the profile's
extra body (e.g. Holo2's thinking off). Generation runs in a worker thread,
one call at a time; for many concurrent agents serve the model over HTTP
(`surfer serve`), where vLLM batches requests itself. With token capture on
(`check_tokens`, which `record_tokens` calls), each completion carries its
prompt and generated ids and the sampled tokens' logprobs (`logprobs=0`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from surfer.core.errors import ConfigError

from .backend import Completion, ModelBackend, ModelRequest, Tokens, Usage, run_exclusive
from .http import to_openai_messages

INSTALL = "the in-process vLLM backend needs vLLM: pip install 'surfer-agent[vllm]' (Linux, NVIDIA GPU)"


def request_parts(request: ModelRequest) -> dict[str, Any]:
    """Everything `LLM.chat` gets for `request`, as plain data (no vLLM needed)."""
    sampling: dict[str, Any] = {"max_tokens": request.max_tokens or 1024}
    if request.temperature is not None:
        sampling["temperature"] = request.temperature
    if request.schema is not None:
        sampling["structured_outputs"] = {"json": request.schema}
    extra = dict(request.extra_body)
    return {
        "messages": to_openai_messages(request.messages),
        "sampling": sampling,
        "chat_template_kwargs": extra.pop("chat_template_kwargs", None),
        "ignored": sorted(extra),  # server-only parameters with no LLM.chat equivalent
    }


class VLLMBackend(ModelBackend):
    def __init__(self, model: str, **llm_kwargs: Any) -> None:
        try:
            import vllm  # noqa: F401
        except ImportError:
            raise ConfigError(INSTALL) from None
        self.model = model
        self.llm_kwargs = llm_kwargs
        self._llm: Any = None
        self._lock = asyncio.Lock()
        self.record_tokens = False

    @property
    def label(self) -> str:
        return f"{self.model} (in-process vLLM)"

    def _load(self) -> Any:
        if self._llm is None:
            from vllm import LLM

            self._llm = LLM(model=self.model, **self.llm_kwargs)
        return self._llm

    async def check(self) -> None:
        async with self._lock:
            await asyncio.to_thread(self._load)

    async def check_tokens(self) -> None:
        self.record_tokens = True

    def _generate(self, parts: dict[str, Any]) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        options = dict(parts["sampling"])
        if self.record_tokens:
            options["logprobs"] = 0  # the sampled token's own logprob
        if "structured_outputs" in options:
            options["structured_outputs"] = StructuredOutputsParams(**options["structured_outputs"])
        outputs = self._load().chat(
            parts["messages"], SamplingParams(**options), use_tqdm=False,
            chat_template_kwargs=parts["chat_template_kwargs"],
        )
        return outputs[0]

    async def complete(self, request: ModelRequest) -> Completion:
        parts = request_parts(request)
        started = time.perf_counter()
        output = await run_exclusive(self._lock, self._generate, parts)
        generated = output.outputs[0]
        usage = Usage(len(output.prompt_token_ids or ()), len(generated.token_ids or ()))
        return Completion(
            text=generated.text, usage=usage, seconds=time.perf_counter() - started, model=self.model,
            structured="structured_outputs" if request.schema is not None else "none",
            tokens=tokens_of(output, parts["sampling"], self.model) if self.record_tokens else None,
            finish_reason=generated.finish_reason,
        )


def tokens_of(output: Any, sampling: dict[str, Any], model: str) -> Tokens:
    """A `vllm.RequestOutput`'s `Tokens`: prompt ids, the first completion's ids, and each id's logprob
    (its entry in the per-position logprob dicts that `logprobs=0` asks for)."""
    generated = output.outputs[0]
    ids = tuple(int(i) for i in generated.token_ids or ())
    logprobs = tuple(float(position[token].logprob) for position, token in zip(generated.logprobs or (), ids))
    return Tokens(
        prompt_ids=tuple(int(i) for i in output.prompt_token_ids or ()), completion_ids=ids,
        logprobs=logprobs if len(logprobs) == len(ids) else (), finish_reason=generated.finish_reason,
        cached_tokens=getattr(output, "num_cached_tokens", None), policy=model,
        sampling={k: v for k, v in sampling.items() if k != "structured_outputs"},
    )
