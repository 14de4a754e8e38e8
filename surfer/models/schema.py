"""JSON-schema helpers: make pydantic schemas portable to structured-output
engines (xgrammar, guidance, outlines) — refs inlined, `oneOf` as `anyOf`,
no discriminator keywords, union tags (`type` constants) required."""

from __future__ import annotations

import json
from typing import Any

from surfer.core.errors import ModelOutputError
from surfer.core.unicode import mend_json


def portable_schema(schema: dict[str, Any]) -> dict[str, Any]:
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                name = node["$ref"].rsplit("/", 1)[-1]
                merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
                return walk(merged)
            out = {}
            for key, value in node.items():
                if key in ("$defs", "discriminator"):
                    continue
                out["anyOf" if key == "oneOf" else key] = walk(value)
            tag = (out.get("properties") or {}).get("type")
            if isinstance(tag, dict) and "const" in tag and "type" not in out.get("required", []):
                # a tag with a default is optional in pydantic's schema, yet the union needs it to pick
                # the variant: without this, engines accept {"action": {}}
                out["required"] = ["type", *out.get("required", [])]
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)




def _unfenced(text: str) -> str:
    """The inside of a ```json ... ``` fence around the whole text, else the text.
    (String slicing, not a regex: a lazy pattern between two runs of whitespace
    backtracks in cubic time on a long reply, and one such reply held the
    event loop, every session with it, for minutes.)"""
    if len(text) < 6 or not (text.startswith("```") and text.endswith("```")):
        return text
    inner = text[3:-3]
    if inner.startswith("json"):
        inner = inner[4:]
    return inner.strip()


MAX_STARTS = 8  # opening braces tried as the start of the answer's object (each try reads at most the rest once)


def _after_reasoning(text: str) -> str:
    """The text after a reasoning block (`<think>...</think>`, or its end alone where the chat template
    opened it), which may hold braces of its own; the text itself when it has none."""
    end = text.rfind("</think>")
    return text[end + len("</think>"):].strip() if end >= 0 else text


def _fenced_inside(text: str) -> str | None:
    """The inside of the first ``` fence in the text (prose before or after it), else None."""
    start = text.find("```")
    end = text.find("```", start + 3) if start >= 0 else -1
    if end < 0:
        return None
    inner = text[start + 3 : end]
    return inner[4:] if inner.startswith("json") else inner


def _first_object(text: str) -> dict[str, Any] | None:
    """The first JSON object that starts at one of the first MAX_STARTS opening braces, whatever follows it."""
    decoder = json.JSONDecoder(strict=False)
    start = text.find("{")
    for _ in range(MAX_STARTS):
        if start < 0:
            return None
        try:
            value, _end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def parse_json_object(text: str) -> dict[str, Any]:
    """Parse a JSON object from model text, tolerating a reasoning block before it, code fences,
    and prose around one object. Raises ModelOutputError with a message for the model."""
    stripped = _unfenced(_after_reasoning(text.strip()))
    try:
        value = json.loads(stripped, strict=False)  # raw newlines/tabs inside strings are common: accept them
    except json.JSONDecodeError:
        fenced = _fenced_inside(stripped)
        value = _first_object(fenced) if fenced is not None else None
        value = value if value is not None else _first_object(stripped)
        if value is None:
            start, end = stripped.find("{"), stripped.rfind("}")
            if start < 0 or end <= start:
                raise ModelOutputError("The answer is not JSON. Reply with a single JSON object only.") from None
            try:
                value = json.loads(stripped[start : end + 1], strict=False)
            except json.JSONDecodeError as exc:
                raise ModelOutputError(f"The answer is not valid JSON ({exc.msg}). Reply with a single JSON object only.") from None
    if not isinstance(value, dict):
        raise ModelOutputError("The answer must be a JSON object, not " + type(value).__name__ + ".")
    return mend_json(value)  # a "\udeaa" escape parses to a lone surrogate
