"""A model family's quirks as data: image preprocessing, coordinate frame,
prompt templates, schemas, extra request parameters, sampling, image limits."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from surfer.core.coordinates import CoordinateFrame
from surfer.core.errors import ModelOutputError
from surfer.models.imaging import ImagePolicy

ROLES = ("policy", "localizer", "validator")


@dataclass(frozen=True)
class Sampling:
    temperature: float | None = None
    max_tokens: int | None = None


def point_schema(*, normalized: bool, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`{x, y}` integers; 0..1000 when normalized, non-negative pixels otherwise."""
    bound: dict[str, Any] = {"type": "integer", "minimum": 0}
    if normalized:
        bound["maximum"] = 1000
    properties: dict[str, Any] = dict(extra or {})
    properties.update(x=dict(bound), y=dict(bound))
    return {"type": "object", "properties": properties, "required": [*properties], "additionalProperties": False}


@dataclass(frozen=True)
class Serving:
    """How `surfer serve` starts vLLM for this family (flags are still checked
    against the installed vLLM before use)."""

    trust_remote_code: bool = False  # config not native in transformers/vLLM (Holotron's VL config)
    hybrid: bool = False  # Mamba-2 + attention: float32 SSM state, version-gated prefix caching
    reasoning_parser: str | None = None
    max_model_len: int | None = None
    mm_processor_kwargs: Mapping[str, Any] = field(default_factory=dict)
    min_vllm: str | None = None
    # vLLM's Mamba `align` cache block (tokens) for this model: a hybrid's prefix is reused only up to a Mamba
    # state, and `align` keeps one only where a scheduler step ends on a block boundary (vLLM 0.25.1 derives the
    # block from the Mamba page: 1,312 tokens for Holotron-12B). `surfer bench prompts` counts reuse with it.
    align_block: int | None = None
    # SGLang processors surfer ships for this family (a package SGLang loads through
    # SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE, surfer/models/sglang_processors): Holotron's places each image at its
    # own placeholder and takes token ids with images (tokens in).
    sglang_processors: str | None = None


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    frame: CoordinateFrame
    image: ImagePolicy
    localizer_schema: Mapping[str, Any]
    # Prompt template base names per role (files in surfer/prompts/, ".md" added).
    templates: Mapping[str, str] = field(default_factory=lambda: {r: r for r in ROLES})
    # Extra request body per role (e.g. chat_template_kwargs to turn thinking off).
    extra_body: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    sampling: Mapping[str, Sampling] = field(default_factory=dict)
    max_images: int = 3
    # Words for the localizer prompt: how the frame is explained to the model.
    frame_hint: str = "x and y are integers from 0 to 1000, relative to the image width and height"
    serving: Serving = field(default_factory=Serving)
    # How the policy's request is laid out (surfer/agent/layouts.py): "window" (the reference) or "blocks".
    prompt_layout: str = "window"
    # Cap on image tokens per request (None: none); each screenshot gets its share (downscaled / fewer tiles).
    image_budget: int | None = None
    # Role continuation: a localizer / validator on the policy's endpoint and model continues the policy's
    # request of the step (its messages, its reply, then the role's instruction) so that the server reuses
    # the whole prefix; templates "localizer_continue" / "validator_continue". Off: separate requests.
    role_continuation: bool = True
    # What the chat template's generation prompt adds after the assistant's header (an empty thinking block)
    # and does not render for an assistant turn of the history: put before the policy's reply wherever a later
    # request repeats it (role continuation, the conversation layout), so that the repeated turn is the tokens
    # the server computed — an engine that resumes only where a request ended (SGLang's Mamba radix cache)
    # finds that end. Unverified for the real weights' templates: `surfer bench gpu` shows the prefix hit.
    reply_prefix: str = ""

    def sampling_for(self, role: str) -> Sampling:
        return self.sampling.get(role, Sampling())

    def extra_body_for(self, role: str) -> dict[str, Any]:
        return dict(self.extra_body.get(role, {}))

    def parse_point(self, data: Mapping[str, Any]) -> tuple[float, float]:
        """Read (x, y) in this profile's frame from the localizer's JSON."""
        try:
            x, y = data["x"], data["y"]
        except KeyError as exc:
            raise ModelOutputError(f"The answer is missing the key {exc.args[0]!r}; reply with {{\"x\": ..., \"y\": ...}}.") from None
        values = []
        for name, value in (("x", x), ("y", y)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ModelOutputError(f"{name} must be a number, got {value!r}.")
            values.append(float(value))
        return values[0], values[1]
