"""What the stand-in server adds to a chat completion when the request asks for
`return_token_ids` and `logprobs`, in vLLM's (>= 0.10.2) fields: `prompt_token_ids`
at the top level, `choices[0].token_ids` (the generated ids, the end-of-turn id
included) and `choices[0].logprobs.content[].logprob`."""

from __future__ import annotations

import time
from typing import Any

from .standin_tokenizer import ChatTokenizer


def sampled_logprob(position: int, token: int) -> float:
    """The stand-in's log-probability of a sampled token: deterministic, in (-2, 0]."""
    return -((token * 7919 + position * 104_729) % 2000) / 1000.0


def resolved_messages(body: dict[str, Any], image_urls: list[str]) -> list[dict[str, Any]]:
    """The request's messages with every image part's URL in place (a part sent as a uuid alone gets
    the data the server holds for it), in the order the server read them (`image_urls`)."""
    urls = iter(image_urls)
    out = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            content = [{"type": "image_url", "image_url": {"url": next(urls, "")}} if part.get("type") == "image_url" else part
                       for part in content]
        out.append({**message, "content": content})
    return out


def add_token_fields(
    answer: dict[str, Any], request: dict[str, Any], image_urls: list[str], content: str, tokenizer: ChatTokenizer,
) -> tuple[int, int] | None:
    """Put the fields `request` asks for into `answer` (a chat completion with one choice); the prompt
    and completion token counts, or None when it asks for neither."""
    if not (request.get("return_token_ids") or request.get("logprobs")):
        return None
    choice = answer["choices"][0]
    prompt_ids = tokenizer.chat_ids(resolved_messages(request, image_urls))
    written = getattr(tokenizer, "reply_ids", None)  # (as a model trained on the template ends its reply)
    completion_ids = written(content) if written else tokenizer.encode(content) + tokenizer.end_ids
    limit = request.get("max_tokens") or request.get("max_completion_tokens")
    if limit and len(completion_ids) > limit:
        completion_ids, choice["finish_reason"] = completion_ids[:limit], "length"
    if request.get("return_token_ids"):
        answer["prompt_token_ids"] = prompt_ids
        choice["token_ids"] = completion_ids
    if request.get("logprobs"):
        choice["logprobs"] = {"content": [
            {"token": tokenizer.decode([token]), "logprob": sampled_logprob(n, token), "bytes": None, "top_logprobs": []}
            for n, token in enumerate(completion_ids)]}
    return len(prompt_ids), len(completion_ids)


def chat_completion(
    request: dict[str, Any], image_urls: list[str], content: str, answer_id: str, model: str, prompt_tokens: int,
    cached: int | None, tokenizer: ChatTokenizer | None,
) -> dict[str, Any]:
    """A chat completion answering `content`; with a `tokenizer`, the token fields `request` asks for
    (the usage then counts those ids); `cached`: the prompt tokens to report as cached (None: no details)."""
    answer: dict[str, Any] = {
        "id": answer_id, "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
    }
    generated = max(1, len(content) // 4)
    counted = add_token_fields(answer, request, image_urls, content, tokenizer) if tokenizer is not None else None
    if counted is not None:
        prompt_tokens, generated = counted
    answer["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": generated, "total_tokens": prompt_tokens + generated}
    if cached is not None:
        answer["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
    return answer

