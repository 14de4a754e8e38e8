"""Client-side variants for `surfer bench gpu run --variants`: settings that
change what surfer sends, never how the server runs, so that all of them are
compared within one server start.

    --variants 'layout=window,continuation=off; layout=blocks,continuation=on'
    --variants 'layout=window|blocks|conversation,continuation=off|on,concurrency=64|128|256'   # a matrix
    --variants variants.toml        # [[variants]] tables and/or a [matrix] table
    --variants variants.json        # a list of objects, or {"variants": [...], "matrix": {...}}

Keys: `layout` (window / blocks / conversation), `continuation` (on / off; unset: the
profile's), `image_budget` (image tokens per request: Holotron's tile grids,
Qwen-VL's pixel caps; none = full resolution), `memory_images` (screenshots
per request; history depth), `block_images` (the blocks layout's append-only
length), `concurrency` (alias `sessions`: concurrent sessions; unset: each of
`--levels`), `warm_steps` (alias `warm`: each session's first N steps are
answered by the bench itself, without the server, so the measured steps run
with N screenshots of history already in the session: the long-history
regime without the hours of steps that build it; pair it with a
`block_images` above N + the steps measured, and `--session-steps` above
that), `image_refs` (on / off: each screenshot's bytes sent once, then its
uuid; vLLM >= 0.13, surfer/models/image_refs.py), `tokens_in` (on / off /
auto: requests as token ids to SGLang's /generate, or chat completions;
surfer/models/tokens_in.py), `record_tokens` (alias `record`; on / off: every
call's token ids and sampled logprobs asked for and kept, what capture costs
the server), `name` (a label). `a|b|c`
(or a list in a file) expands to one variant per value; several such keys give their product. The first variant is
the reference the others are compared with: put today's default first.
"""

from __future__ import annotations

import itertools
import json
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from surfer.core.errors import ConfigError

KEYS = ("name", "layout", "continuation", "image_budget", "memory_images", "block_images", "concurrency", "warm_steps",
        "image_refs", "tokens_in", "record_tokens")
ALIASES = {"sessions": "concurrency", "budget": "image_budget", "images": "memory_images", "block": "block_images",
           "warm": "warm_steps", "record": "record_tokens"}
_SWITCH = {"on": True, "off": False, "true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


@dataclass(frozen=True)
class Variant:
    layout: str = "window"
    continuation: bool | None = None
    image_budget: int | None = None
    memory_images: int | None = None
    block_images: int | None = None
    concurrency: int | str | None = None  # None: every level of --levels
    name: str | None = None
    warm_steps: int | None = None  # steps each session does before the run, without the server
    image_refs: bool = False  # send each screenshot once, then its uuid (vLLM's processor cache)
    tokens_in: str | None = None  # on / off / auto (None: the configuration's, auto)
    record_tokens: bool = False  # token capture on every call (ids and sampled logprobs)

    def config_update(self) -> dict[str, Any]:
        """AgentConfig fields this variant sets."""
        return {"prompt_layout": self.layout, "role_continuation": self.continuation, "image_budget": self.image_budget,
                "memory_images": self.memory_images, "block_images": self.block_images, "image_refs": self.image_refs,
                "record_tokens": self.record_tokens, **({"tokens_in": self.tokens_in} if self.tokens_in else {})}

    def at(self, concurrency: int | str) -> Variant:
        return Variant(**{**asdict(self), "concurrency": concurrency})

    def label(self) -> str:
        if self.name:
            return self.name
        parts = [self.layout]
        if self.continuation is not None:
            parts.append("cont" if self.continuation else "nocont")
        if self.memory_images:
            parts.append(f"mem{self.memory_images}")
        if self.block_images:
            parts.append(f"block{self.block_images}")
        if self.image_budget:
            parts.append(f"budget{self.image_budget}")
        if self.warm_steps:
            parts.append(f"warm{self.warm_steps}")
        if self.image_refs:
            parts.append("refs")
        if self.tokens_in in ("on", "off"):
            parts.append("ids" if self.tokens_in == "on" else "chat")
        if self.record_tokens:
            parts.append("record")
        return "+".join(parts)

    def max_images(self, profile: Any) -> int:
        """The most screenshots one request of this variant holds (the server's per-request image limit)."""
        from surfer.agent.layouts import Layout

        return Layout(self.layout, self.memory_images or profile.max_images, self.block_images).max_images

    def resolved(self, profile: Any) -> dict[str, Any]:
        """The settings as they run with `profile` (unset ones filled in), for the JSON row."""
        return {
            "name": self.label(), "layout": self.layout,
            "continuation": profile.role_continuation if self.continuation is None else self.continuation,
            "image_budget": self.image_budget or profile.image_budget,
            "memory_images": self.memory_images or profile.max_images,
            "block_images": self.block_images, "max_images": self.max_images(profile),
            # each screenshot's share of the budget, as the agent computes it (None: full resolution)
            "image_tokens_per_image": (budget // self.max_images(profile)) if (budget := self.image_budget or profile.image_budget) else None,
            "concurrency": self.concurrency, "warm_steps": self.warm_steps or 0, "image_refs": self.image_refs,
            "tokens_in": self.tokens_in or "auto", "record_tokens": self.record_tokens,
        }


def _value(key: str, raw: Any) -> Any:
    if isinstance(raw, str):
        raw = raw.strip()
    if key in ("name", "layout"):
        return str(raw)
    if key == "tokens_in":
        word = ("on" if raw else "off") if isinstance(raw, bool) else str(raw).lower()
        if word not in ("on", "off", "auto"):
            raise ConfigError(f"--variants: tokens_in takes on/off/auto, got {raw!r}")
        return word
    if key in ("continuation", "image_refs", "record_tokens"):
        if isinstance(raw, bool) or raw is None:
            return raw if key == "continuation" else bool(raw)
        word = str(raw).lower()
        if word in ("", "default", "profile"):
            return None if key == "continuation" else False
        if word not in _SWITCH:
            raise ConfigError(f"--variants: {key} takes on/off, got {raw!r}")
        return _SWITCH[word]
    if key == "concurrency" and str(raw).lower() == "auto":
        return "auto"
    if raw is None or str(raw).lower() in ("none", "", "-", "full"):
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"--variants: {key} takes a whole number, got {raw!r}") from None


def expand(spec: dict[str, Any]) -> list[Variant]:
    """One variant per combination of the values of `spec` (a value may be a list)."""
    fields: dict[str, list[Any]] = {}
    for raw_key, raw in spec.items():
        key = ALIASES.get(str(raw_key).strip(), str(raw_key).strip())
        if key not in KEYS:
            raise ConfigError(f"--variants: unknown key {raw_key!r}; known: {', '.join(KEYS)} (and {', '.join(ALIASES)})")
        values = raw if isinstance(raw, list) else [raw]
        fields[key] = [_value(key, v) for v in values]
    names = list(fields)
    return [check(Variant(**dict(zip(names, combo)))) for combo in itertools.product(*(fields[n] for n in names))]


def check(variant: Variant) -> Variant:
    """Validate the variant's settings as the agent's configuration would."""
    from surfer.agent.config import validate_config

    validate_config({k: v for k, v in variant.config_update().items() if v is not None}, f"--variants {variant.label()}")
    if isinstance(variant.concurrency, int) and variant.concurrency < 1:
        raise ConfigError(f"--variants {variant.label()}: concurrency must be at least 1")
    if variant.warm_steps is not None and variant.warm_steps < 0:
        raise ConfigError(f"--variants {variant.label()}: warm_steps must be 0 or more")
    return variant


def parse_inline(text: str) -> list[Variant]:
    variants: list[Variant] = []
    for chunk in text.split(";"):
        items = [item for part in chunk.split(",") for item in part.split()]
        if not items:
            continue
        spec: dict[str, Any] = {}
        for item in items:
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"--variants: {item!r} is not key=value")
            spec[key] = value.split("|") if "|" in value else value
        variants += expand(spec)
    return variants


def parse_data(data: Any) -> list[Variant]:
    """A list of variant objects, or {"variants": [...], "matrix": {...}} (both optional, variants first)."""
    if isinstance(data, list):
        items, matrix = data, None
    elif isinstance(data, dict):
        items, matrix = data.get("variants") or data.get("variant") or [], data.get("matrix")
        unknown = set(data) - {"variants", "variant", "matrix"}
        if unknown:
            raise ConfigError(f"--variants: unknown section(s) {', '.join(sorted(unknown))}; use variants and/or matrix")
    else:
        raise ConfigError("--variants: a file holds a list of variants or a table with variants / matrix")
    variants = [v for item in items for v in expand(item)]
    if matrix:
        variants += expand(matrix)
    return variants


def parse_variants(text: str) -> list[Variant]:
    """Variants from a .json / .toml file or an inline specification."""
    path = Path(text)
    if path.suffix in (".json", ".toml") and path.is_file():
        try:
            data = json.loads(path.read_text()) if path.suffix == ".json" else tomllib.loads(path.read_text())
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"--variants: {path} is not valid {path.suffix[1:].upper()}: {exc}") from None
        variants = parse_data(data)
    else:
        variants = parse_inline(text)
    if not variants:
        raise ConfigError("--variants names no variant")
    labels = [v.label() for v in variants]
    if len(set(zip(labels, (v.concurrency for v in variants)))) < len(variants):
        raise ConfigError("--variants: two variants are the same; give them different settings or names")
    return variants


def runs(variants: list[Variant], levels: list[int], auto: bool, auto_only: bool) -> list[Variant]:
    """Each variant at its own concurrency, else at every level (and `auto`): the runs in order."""
    out: list[Variant] = []
    for variant in variants:
        if variant.concurrency is not None:
            out.append(variant)
            continue
        chosen: list[int | str] = [*([] if auto_only else levels), *(["auto"] if auto or auto_only else [])]
        out += [variant.at(level) for level in chosen]
    return out
