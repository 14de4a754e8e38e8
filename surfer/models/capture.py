"""Token capture over chat completions: what a request asks for and what the answer
must carry so that a call is recorded token for token (`Tokens`).

vLLM (>= 0.10.2) answers a chat completion with `return_token_ids: true` and
`logprobs: true` with the prompt's ids as the server computed them
(`prompt_token_ids`, images expanded to their placeholder ids), the generated ids
(`choices[0].token_ids`) and each one's sampling log-probability
(`choices[0].logprobs.content[].logprob`); `usage.prompt_tokens_details.cached_tokens`
where the server counts them (`--enable-prompt-tokens-details`). A server without
these fields (SGLang's chat path up to 0.5.x, hosted APIs) cannot be captured:
`probe` finds that out before a run starts, and `read_tokens` refuses an answer
that lacks them — never a record with silent nulls.
"""

from __future__ import annotations

from typing import Any, Mapping

from surfer.core.errors import ModelRequestError

from .backend import Tokens

TOKEN_PARAMS: dict[str, Any] = {"return_token_ids": True, "logprobs": True}
NEEDS = ("record_tokens needs a server that returns token ids and logprobs on chat completions "
         "(vLLM >= 0.10.2: `return_token_ids`, `logprobs`)")
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "max_tokens", "seed", "repetition_penalty",
                 "presence_penalty", "frequency_penalty", "n")


class TokensMissing(ModelRequestError):
    """The server answered without the token fields the call asked for."""


def sampling_of(body: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling parameters a request body sets (its `extra_body` included)."""
    merged = {**body, **(body.get("extra_body") or {})}
    return {key: merged[key] for key in SAMPLING_KEYS if merged.get(key) is not None}


def missing_fields(response: Any) -> list[str]:
    """The token fields `response` (a chat completion's JSON) lacks."""
    if not isinstance(response, dict):
        return ["the whole answer"]
    choice = (response.get("choices") or [{}])[0] or {}
    missing = []
    if not isinstance(response.get("prompt_token_ids"), list):
        missing.append("prompt_token_ids")
    if not isinstance(choice.get("token_ids"), list):
        missing.append("choices[0].token_ids")
    content = (choice.get("logprobs") or {}).get("content")
    if not isinstance(content, list):
        missing.append("choices[0].logprobs")
    return missing


def read_tokens(response: dict[str, Any], where: str, sampling: Mapping[str, Any], policy_version: str | None) -> Tokens:
    """The call's `Tokens` from a chat completion's JSON; TokensMissing when it lacks a field."""
    missing = missing_fields(response)
    if missing:
        raise TokensMissing(f"model server at {where} answered without {', '.join(missing)}; {NEEDS}")
    choice = response["choices"][0]
    completion_ids = tuple(int(i) for i in choice["token_ids"])
    logprobs = tuple(float(entry.get("logprob", 0.0)) for entry in choice["logprobs"]["content"])
    if len(logprobs) != len(completion_ids):
        raise TokensMissing(
            f"model server at {where} answered {len(logprobs)} logprobs for {len(completion_ids)} generated ids")
    details = (response.get("usage") or {}).get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens")
    return Tokens(
        prompt_ids=tuple(int(i) for i in response["prompt_token_ids"]), completion_ids=completion_ids, logprobs=logprobs,
        finish_reason=choice.get("finish_reason"), cached_tokens=int(cached) if isinstance(cached, int) else None,
        policy=str(response.get("model") or ""), policy_version=policy_version, sampling=dict(sampling),
    )


def probe_body(model: str) -> dict[str, Any]:
    """A one-token request that asks for the token fields (the preflight of record_tokens)."""
    return {"model": model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1, "temperature": 0.0,
            **TOKEN_PARAMS}
