"""Qwen3-VL Instruct (Holo2's base, served as it is published): Holo2's image
sizes (smart_resize factor 32) and frame ({x, y} normalised to 0..1000), without
Holo2's thinking: the Instruct template's generation prompt adds no empty
thinking block, so no reply prefix, no chat_template_kwargs and no reasoning
parser (which would move a reply without thinking out of `content`)."""

from dataclasses import replace

from .base import Serving
from .holo2 import PROFILE as HOLO2

PROFILE = replace(
    HOLO2,
    name="qwen3-vl",
    description="Qwen3-VL Instruct: smart_resize/32, {x, y} in 0..1000, no thinking block",
    extra_body={},
    reply_prefix="",
    serving=Serving(max_model_len=65_536, min_vllm="0.11"),
)
