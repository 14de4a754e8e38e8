"""What a chat completion says, wherever an OpenAI-compatible server put it.

Servers differ in where the answer's text goes: a string `content` (vLLM,
SGLang), a list of text parts (some proxies and hosted APIs), a tool call's
`arguments` (a model that answers as a tool call), or, with a reasoning
parser that found no end of the thinking, `reasoning_content` / `reasoning`
alone. They differ in `usage` too: absent, or with some counts missing. And a
server that speaks only streaming answers in server-sent events, which
`from_stream` turns back into one completion.

    text = reply_text(message)               # the text a role parses
    usage = usage_of(response.get("usage"))  # (prompt, completion) tokens
"""

from __future__ import annotations

import json
from typing import Any


def _parts_text(content: Any) -> str:
    """`content` as text: a string as is, a list of parts as their texts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str) and part.get("type", "text") in ("text", "output_text"):
                texts.append(part["text"])
        return "".join(texts)
    return ""


def reply_text(message: Any) -> str:
    """The text of a chat completion's `message`: its content (a string or text parts); where that
    is empty, the first tool call's arguments; where those are missing too, its reasoning text
    (a reasoning parser that put the whole reply there)."""
    if not isinstance(message, dict):
        return ""
    text = _parts_text(message.get("content"))
    if text.strip():
        return text
    for call in message.get("tool_calls") or []:
        arguments = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
        if isinstance(arguments, dict):
            return json.dumps(arguments)
        if isinstance(arguments, str) and arguments.strip():
            return arguments
    for key in ("reasoning_content", "reasoning"):
        reasoning = _parts_text(message.get(key))
        if reasoning.strip():
            return reasoning
    return text


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def usage_of(usage: Any) -> tuple[int, int]:
    """(prompt tokens, completion tokens) of a completion's `usage`; a count the server left out is
    taken from `total_tokens` where it gives that and the other count, else 0."""
    if not isinstance(usage, dict):
        return 0, 0
    prompt, completion, total = (_count(usage.get(k)) for k in ("prompt_tokens", "completion_tokens", "total_tokens"))
    if total is not None:
        if completion is None and prompt is not None:
            completion = max(0, total - prompt)
        elif prompt is None and completion is not None:
            prompt = max(0, total - completion)
    return prompt or 0, completion or 0


def from_stream(body: str) -> dict[str, Any]:
    """A chat completion from the server-sent events of a streamed one (`data: {chunk}` lines, then
    `data: [DONE]`): its deltas' content, reasoning and tool-call arguments joined, its last
    finish_reason, usage and model. ValueError when no chunk is JSON."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    answer: dict[str, Any] = {}
    finish = None
    chunks = 0
    for line in body.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if not data or data == "[DONE]":
            continue
        try:
            chunk = json.loads(data)
        except ValueError:
            continue
        if not isinstance(chunk, dict):
            continue
        chunks += 1
        if isinstance(chunk.get("error"), dict):
            answer["error"] = chunk["error"]
        for key in ("id", "model", "usage"):
            if chunk.get(key):
                answer[key] = chunk[key]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            content.append(_parts_text(delta.get("content")))
            reasoning.append(_parts_text(delta.get("reasoning_content") or delta.get("reasoning")))
            for call in delta.get("tool_calls") or []:
                held = calls.setdefault(call.get("index", 0), {"type": "function", "function": {"arguments": ""}})
                function = call.get("function") or {}
                if function.get("name"):
                    held["function"]["name"] = function["name"]
                held["function"]["arguments"] += function.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    if not chunks:
        raise ValueError("no JSON chunk in the event stream")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content)}
    if any(reasoning):
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {**answer, "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
