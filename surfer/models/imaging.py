"""Image preprocessing before sending: the profile's resize rule applied to a
screenshot. Pass-through (no decode) when the size already fits; otherwise
PIL resizes in a worker thread, off the event loop."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import io
from dataclasses import dataclass
import math
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
    # How the server turns an image into tokens (see `image_tokens`):
    # "patches": one token per `factor`×`factor` pixels of the sent image (+2 for the vision start/end tokens);
    # "tiles":   InternVL-style tiling into 1..`max_tiles` tiles of `tile`×`tile` (+ a thumbnail when more
    #            than one), `tile_tokens` each (+2 for <img></img>);
    # "estimate": OpenAI's published rule for hosted models (85 + 170 per 512-pixel tile after fitting
    #            within 2048 and a shortest side of 768): an estimate for unknown servers.
    tokens: Literal["patches", "tiles", "estimate"] = "estimate"
    tile: int = 512
    max_tiles: int = 12
    tile_tokens: int = 256

    def target_size(self, size: Size, max_tokens: int | None = None) -> Size:
        """The size sent for a screenshot of `size`; with `max_tokens`, shrunk until its
        image tokens fit (fewer tiles for tiling servers)."""
        if self.resize == "smart_resize":
            sent = smart_resize(size.height, size.width, self.factor, self.min_pixels, self.max_pixels)
        elif self.resize == "max_side":
            sent = fit_max_side(size, self.max_side)
        else:
            sent = size
        if max_tokens is None or self.image_tokens(sent) <= max_tokens:
            return sent
        return self._within(size, sent, max_tokens)

    def _within(self, size: Size, sent: Size, max_tokens: int) -> Size:
        if self.tokens == "tiles":  # the best grid of at most the tiles allowed, sent at exactly its size
            total = (max_tokens - 2) // self.tile_tokens  # tiles with the thumbnail
            grid = total - 1 if total >= 3 else 1
            cols, rows = closest_grid(sent.width, sent.height, max(1, min(self.max_tiles, grid)), self.tile)
            return Size(cols * self.tile, rows * self.tile)
        if self.tokens == "patches":
            pixels = max(self.min_pixels, (max_tokens - 2) * self.factor * self.factor)
            return smart_resize(size.height, size.width, self.factor, self.min_pixels, min(self.max_pixels, pixels))
        side = max(sent.width, sent.height)
        while side > 64 and self.image_tokens(fit_max_side(sent, side)) > max_tokens:
            side = int(side * 0.9)
        return fit_max_side(sent, side)

    def image_tokens(self, sent: Size) -> int:
        """Prompt tokens the server spends on one image sent at `sent`."""
        if self.tokens == "patches":
            return math.ceil(sent.width / self.factor) * math.ceil(sent.height / self.factor) + 2
        if self.tokens == "tiles":
            cols, rows = closest_grid(sent.width, sent.height, self.max_tiles, self.tile)
            count = cols * rows
            return (count + (1 if count > 1 else 0)) * self.tile_tokens + 2
        fitted = fit_max_side(sent, 2048)
        shortest = min(fitted.width, fitted.height)
        if shortest > 768:
            fitted = Size(round(fitted.width * 768 / shortest), round(fitted.height * 768 / shortest))
        return 85 + 170 * math.ceil(fitted.width / 512) * math.ceil(fitted.height / 512)


def closest_grid(width: int, height: int, max_tiles: int, tile: int = 512) -> tuple[int, int]:
    """InternVL's `find_closest_aspect_ratio` over grids of 1..`max_tiles` tiles: the grid
    (columns, rows) nearest the image's aspect ratio; a tie goes to the larger grid only
    when the image covers more than half of it."""
    grids = sorted({(i, j) for n in range(1, max_tiles + 1) for i in range(1, n + 1) for j in range(1, n + 1)
                    if i * j <= max_tiles}, key=lambda g: g[0] * g[1])
    aspect = width / height
    best, best_diff = (1, 1), float("inf")
    for cols, rows in grids:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and width * height > 0.5 * tile * tile * cols * rows:
            best = (cols, rows)
    return best


@dataclass(frozen=True)
class PreparedImage:
    """The image as sent to the model, with the geometry to map points back."""

    data: bytes
    mime: str
    geometry: ImageGeometry
    step: int | None = None  # the agent step it was taken at

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the bytes sent, computed once: the image's uuid for vLLM (models/image_refs.py)."""
        return hashlib.sha256(self.data).hexdigest()


def _resize(data: bytes, size: Size, quality: int) -> bytes:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        resized = image.convert("RGB").resize((size.width, size.height), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    resized.save(out, format="JPEG", quality=quality)
    return out.getvalue()


async def prepare_image(screenshot: Screenshot, policy: ImagePolicy, max_tokens: int | None = None) -> PreparedImage:
    """The screenshot as the profile sends it; `max_tokens`: its share of the image budget."""
    sent = policy.target_size(screenshot.size, max_tokens)
    geometry = ImageGeometry(
        sent=sent, screenshot=screenshot.size, scale=screenshot.scale,
        origin_x=screenshot.origin[0], origin_y=screenshot.origin[1],
    )
    if sent == screenshot.size:
        return PreparedImage(screenshot.data, screenshot.mime, geometry)
    data = await asyncio.to_thread(_resize, screenshot.data, sent, policy.jpeg_quality)
    return PreparedImage(data, "image/jpeg", geometry)
