"""Generic OpenAI-compatible chat models (hosted APIs, any VLM without a
profile of its own): screenshots downscaled to a longest side of 1280 px,
points in absolute pixels of the image sent, no extra request body. No role
continuation by default: hosted APIs bill every prompt token of the longer
continued requests (their prefix-cache discounts vary)."""

from surfer.models.imaging import ImagePolicy

from .base import Profile, Sampling, point_schema

PROFILE = Profile(
    name="openai",
    description="generic OpenAI-compatible model: longest side <= 1280 px, {x, y} in pixels of the sent image",
    frame="absolute",
    image=ImagePolicy(resize="max_side", max_side=1280),
    localizer_schema=point_schema(normalized=False),
    sampling={"localizer": Sampling(temperature=0.0, max_tokens=64)},
    max_images=3,
    role_continuation=False,
    frame_hint="x and y are integer pixel coordinates in the image you see (origin at the top-left corner)",
)
