"""Holotron-12B (Nemotron-Nano-12B-v2-VL base): the server tiles images
itself, so screenshots are sent as is. The localizer frame is unverified
(MODELS.md): Holo2's 0..1000 convention, which `surfer calibrate` can check."""

from surfer.models.imaging import ImagePolicy

from .base import Profile, Sampling, Serving, point_schema

PROFILE = Profile(
    name="holotron",
    description="H Company Holotron-12B (hybrid Mamba-2): images as is (server tiling), {x, y} in 0..1000",
    frame="normalized_1000",
    image=ImagePolicy(resize="none", tokens="tiles", tile=512, max_tiles=12, tile_tokens=256),
    localizer_schema=point_schema(normalized=True),
    sampling={
        "policy": Sampling(temperature=0.7, max_tokens=1024),
        "localizer": Sampling(temperature=0.0, max_tokens=64),
        "validator": Sampling(temperature=0.0, max_tokens=512),
    },
    max_images=3,
    reply_prefix="<think></think>",  # the template's generation prompt with reasoning off
    serving=Serving(trust_remote_code=True, hybrid=True, max_model_len=65_536, min_vllm="0.14.1", align_block=1312,
                    sglang_processors="surfer.models.sglang_processors"),
)
