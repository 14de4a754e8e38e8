"""Image preprocessing before sending: the profile's resize rule applied to a
screenshot. Pass-through (no decode) when the size already fits; otherwise
PIL resizes in a worker thread, off the event loop."""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from typing import Literal

from surfer.core.coordinates import ImageGeometry, Size, fit_max_side, smart_resize
from surfer.core.observation import Screenshot


@dataclass(frozen=True)
class ImagePolicy:
    """How a family wants its images.

    resize: "none" (send as is: server-side tiling), "smart_resize" (Qwen-VL
            rule with `factor`, `min_pixels`, `max_pixels`), or "max_side".
    """

    resize: Literal["none", "smart_resize", "max_side"] = "none"
    factor: int = 28
    min_pixels: int = 0
    max_pixels: int = 1 << 62
    max_side: int | None = None
    jpeg_quality: int = 85

    def target_size(self, size: Size) -> Size:
        if self.resize == "smart_resize":
            return smart_resize(size.height, size.width, self.factor, self.min_pixels, self.max_pixels)
        if self.resize == "max_side":
            return fit_max_side(size, self.max_side)
        return size


@dataclass(frozen=True)
class PreparedImage:
    """The image as sent to the model, with the geometry to map points back."""

    data: bytes
    mime: str
    geometry: ImageGeometry
    step: int | None = None  # the agent step it was taken at


def _resize(data: bytes, size: Size, quality: int) -> bytes:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        resized = image.convert("RGB").resize((size.width, size.height), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    resized.save(out, format="JPEG", quality=quality)
    return out.getvalue()


async def prepare_image(screenshot: Screenshot, policy: ImagePolicy) -> PreparedImage:
    sent = policy.target_size(screenshot.size)
    geometry = ImageGeometry(
        sent=sent, screenshot=screenshot.size, scale=screenshot.scale,
        origin_x=screenshot.origin[0], origin_y=screenshot.origin[1],
    )
    if sent == screenshot.size:
        return PreparedImage(screenshot.data, screenshot.mime, geometry)
    data = await asyncio.to_thread(_resize, screenshot.data, sent, policy.jpeg_quality)
    return PreparedImage(data, "image/jpeg", geometry)
