"""Holo2 (Qwen3-VL base): smart_resize factor 32, JSON {x, y} normalised to
0..1000, thinking turned off through the chat template."""

from surfer.models.imaging import ImagePolicy

from .base import Profile, Sampling, Serving, point_schema

_NO_THINKING = {"chat_template_kwargs": {"thinking": False}}

PROFILE = Profile(
    name="holo2",
    description="H Company Holo2 (Qwen3-VL): smart_resize/32, {x, y} in 0..1000, thinking off",
    frame="normalized_1000",
    image=ImagePolicy(resize="smart_resize", factor=32, min_pixels=65_536, max_pixels=16_777_216, tokens="patches"),
    localizer_schema=point_schema(normalized=True),
    extra_body={"policy": _NO_THINKING, "localizer": _NO_THINKING, "validator": _NO_THINKING},
    sampling={
        "policy": Sampling(temperature=0.7, max_tokens=1024),
        "localizer": Sampling(temperature=0.0, max_tokens=64),
        "validator": Sampling(temperature=0.0, max_tokens=512),
    },
    max_images=3,
    reply_prefix="<think>\n\n</think>\n\n",  # the Qwen3 template's generation prompt with thinking off
    serving=Serving(reasoning_parser="holo2", max_model_len=65_536, min_vllm="0.13"),
)
