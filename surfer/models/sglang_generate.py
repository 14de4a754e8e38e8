"""Tokens in: SGLang's native `POST /generate` with the prompt as token ids
(token_chain.py), the screenshots alongside, and the same sampling, schema
and chat-template options the chat request would have carried.

    {"input_ids": [...], "image_data": ["data:image/jpeg;base64,..."],
     "sampling_params": {"temperature": 0, "max_new_tokens": 512, "json_schema": "{...}"},
     "rid": "policy-…", "return_logprob": true, "logprob_start_len": -1, "return_prompt_token_ids": true}

Each image is one placeholder id in `input_ids` (the chat template's, e.g.
Qwen3-VL's `<|image_pad|>`); SGLang's processor expands it to the image's
tokens and keeps every other id as sent (SGLang >= 0.5.15,
`SGLANG_MM_AVOID_RETOKENIZE`, on by default). The answer's `output_ids` are
the generated ids, `meta_info.cached_tokens` what the server found cached;
with `record` on, `prompt_token_ids` (images expanded) and the sampled
tokens' logprobs come back too (Tokens, backend.py).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from surfer.core.errors import ModelRequestError

from .adapters import PolicyRef, version_of
from .backend import Completion, ModelRequest, Tokens, Usage
from .data_parallel import RANK_FIELD
from .token_chain import TokenChain, TokensPrompt

# The chat request's extra body keys that /generate carries as sampling parameters (same names in SGLang).
SAMPLING_KEYS = frozenset({
    "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "stop",
    "stop_token_ids", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim", "n",
})
TEMPLATE_KEY = "chat_template_kwargs"


@dataclass
class GenerateCall:
    """One prepared /generate request: its body and the chain's prompt."""

    session: str
    prompt: TokensPrompt
    body: dict[str, Any]


def unsupported_options(request: ModelRequest) -> list[str]:
    """The request's extra body keys /generate cannot carry (such a request goes by chat)."""
    return sorted(k for k in request.extra_body if k not in SAMPLING_KEYS and k != TEMPLATE_KEY)


class GenerateTransport:
    """The tokens-in path to one SGLang server (`root`: its URL without /v1)."""

    def __init__(self, chain: TokenChain, root: str, *, record: bool = False, policy_version: str | None = None) -> None:
        self.chain = chain
        self.url = root.rstrip("/") + "/generate"
        self.record = record  # ask for the prompt's expanded ids and the sampled tokens' logprobs (Completion.tokens)
        self.policy_version = policy_version  # recorded with each call (None where the caller set none)

    async def prepare(self, session: str, request: ModelRequest, policy: PolicyRef | None = None,
                      base_model: str = "", rank: int | None = None) -> GenerateCall:
        """The request's ids (rendered and tokenised off the loop) and its body; `policy`: the session's, an
        adapter unless it is `base_model` (SGLang's /generate picks it by `lora_path`, as its chat completions do);
        `rank`: the data-parallel rank the session keeps at the server (data_parallel.py; None: the server's choice)."""
        options = dict(request.extra_body.get(TEMPLATE_KEY) or {})
        prompt = await asyncio.to_thread(self.chain.prompt, session, request, options)
        lora = policy.name if policy is not None and policy.name != base_model else None
        return GenerateCall(session, prompt, self.body(request, prompt, lora, rank))

    def body(self, request: ModelRequest, prompt: TokensPrompt, lora: str | None = None,
             rank: int | None = None) -> dict[str, Any]:
        sampling: dict[str, Any] = {k: v for k, v in request.extra_body.items() if k in SAMPLING_KEYS}
        if request.temperature is not None:
            sampling["temperature"] = request.temperature
        if request.max_tokens is not None:
            sampling["max_new_tokens"] = request.max_tokens
        if request.schema is not None:
            sampling["json_schema"] = json.dumps(request.schema)
        body: dict[str, Any] = {"input_ids": prompt.ids, "sampling_params": sampling,
                                "rid": f"{request.schema_name}-{uuid.uuid4().hex}"}
        if prompt.images:
            body["image_data"] = [image.data_url() for image in prompt.images]
        if lora is not None:
            body["lora_path"] = lora  # the adapter (SGLang picks it by this field)
        if rank is not None:
            body[RANK_FIELD] = rank  # the session's data-parallel rank (as the header also says)
        if self.record:
            body.update(return_logprob=True, logprob_start_len=-1, return_prompt_token_ids=True)
        return body

    def completion(self, answer: Any, call: GenerateCall, started: float, model: str,
                   policy: PolicyRef | None = None) -> Completion:
        """The Completion of `answer`; the chain keeps the generated ids for the session's next request. `policy`:
        the session's (`name@version`), which answered instead of `model`."""
        version = version_of(policy, self.policy_version)
        if isinstance(answer, list) and answer:
            answer = answer[0]
        if not isinstance(answer, dict) or not isinstance(answer.get("output_ids"), list):
            raise ModelRequestError(f"SGLang at {self.url} answered without output_ids")
        meta = answer.get("meta_info") or {}
        text = answer.get("text") or ""
        generated = [int(i) for i in answer["output_ids"]]
        finish = meta.get("finish_reason")
        stop = finish.get("matched") if isinstance(finish, dict) and isinstance(finish.get("matched"), int) else None
        self.chain.keep_reply(call.session, call.prompt, generated, text, stop)
        reason = finish.get("type") if isinstance(finish, dict) else finish
        logprobs = tuple(float(row[0]) for row in meta.get("output_token_logprobs") or [] if row and row[0] is not None)
        prompt_tokens = int(meta.get("prompt_tokens") or len(call.prompt.ids))
        tokens = Tokens(
            prompt_ids=tuple(answer.get("prompt_token_ids") or ()), completion_ids=tuple(generated),
            logprobs=logprobs if len(logprobs) == len(generated) else (), finish_reason=reason,
            cached_tokens=meta.get("cached_tokens"), policy=policy.name if policy else model,
            policy_version=version,  # the caller's, as the call's trajectory entry says (never the server's weight_version)
            sampling=dict(call.body.get("sampling_params") or {}),
        ) if self.record else None
        return Completion(
            text=text, usage=Usage(prompt_tokens, int(meta.get("completion_tokens") or len(generated))),
            seconds=time.perf_counter() - started, model=policy.name if policy else model, structured="json_schema",
            tokens=tokens, policy_version=version, finish_reason=reason if isinstance(reason, str) else None,
        )
