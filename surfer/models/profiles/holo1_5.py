"""Holo1.5 (Qwen2.5-VL base): client-side smart_resize with factor 28 and the
Qwen2.5-VL processor's pixel bounds (3,136..1,003,520, the limit vLLM is
served with via --mm-processor-kwargs), localizer JSON
`{"action": "click_absolute", "x": ..., "y": ...}` in pixels of the resized
image (frame "absolute")."""

from surfer.models.imaging import ImagePolicy

from .base import Profile, Sampling, Serving, point_schema

MIN_PIXELS, MAX_PIXELS = 3_136, 1_003_520

PROFILE = Profile(
    name="holo1.5",
    description="H Company Holo1.5 (Qwen2.5-VL): smart_resize/28, click_absolute {x, y} in pixels of the sent image",
    frame="absolute",
    image=ImagePolicy(resize="smart_resize", factor=28, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS, tokens="patches"),
    localizer_schema=point_schema(normalized=False, extra={"action": {"type": "string", "enum": ["click_absolute"]}}),
    templates={"policy": "policy", "localizer": "localizer_holo1_5", "validator": "validator",
               "localizer_continue": "localizer_continue_holo1_5"},
    sampling={
        "policy": Sampling(temperature=0.7, max_tokens=1024),
        "localizer": Sampling(temperature=0.0, max_tokens=64),
        "validator": Sampling(temperature=0.0, max_tokens=512),
    },
    max_images=3,
    serving=Serving(max_model_len=16_384, mm_processor_kwargs={"max_pixels": MAX_PIXELS}),
    frame_hint="x and y are integer pixel coordinates in the image you see (origin at the top-left corner)",
)
