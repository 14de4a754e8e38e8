"""The one owner of coordinate mapping.

A point travels: model output (in its profile's frame) → pixels of the image
sent to the model → pixels of the screenshot → CSS pixels of the viewport
(divide by the device scale factor, add the capture origin) → the
environment. Every conversion in surfer goes through this module.

Frames:
- ``normalized_1000``: integers 0..1000 across the sent image (Holo2 style);
- ``absolute``: pixels of the sent (possibly resized) image (Holo1.5 style).

Out-of-range output raises `CoordinateError` (a `ModelOutputError`, so the
role retries with feedback); it is never clamped to a made-up point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from .actions import CssPoint
from .errors import CoordinateError

CoordinateFrame = Literal["normalized_1000", "absolute"]
FRAMES: tuple[CoordinateFrame, ...] = ("normalized_1000", "absolute")


@dataclass(frozen=True)
class Size:
    width: int
    height: int

    def __str__(self) -> str:
        return f"{self.width}x{self.height}"


@dataclass(frozen=True)
class ImageGeometry:
    """How the image a model saw relates to the screen.

    sent:       pixel size of the image sent to the model (after any resize)
    screenshot: pixel size of the captured screenshot (device pixels)
    scale:      device pixels per CSS pixel (device scale factor)
    origin_x/y: CSS position of the screenshot's top-left corner (crops,
                desktop monitors that do not start at 0,0)
    """

    sent: Size
    screenshot: Size
    scale: float = 1.0
    origin_x: float = 0.0
    origin_y: float = 0.0

    @property
    def css_size(self) -> tuple[float, float]:
        return self.screenshot.width / self.scale, self.screenshot.height / self.scale


def _frame_extent(frame: CoordinateFrame, geometry: ImageGeometry) -> tuple[float, float]:
    if frame == "normalized_1000":
        return 1000.0, 1000.0
    if frame == "absolute":
        return float(geometry.sent.width), float(geometry.sent.height)
    raise ValueError(f"unknown coordinate frame {frame!r}; expected one of {FRAMES}")


def model_to_css(x: float, y: float, frame: CoordinateFrame, geometry: ImageGeometry) -> CssPoint:
    """Map a model's answer in `frame` to a CSS point, or raise CoordinateError."""
    max_x, max_y = _frame_extent(frame, geometry)
    for name, value, limit in (("x", x, max_x), ("y", y, max_y)):
        if not math.isfinite(value) or value < 0 or value > limit:
            unit = "in 0..1000" if frame == "normalized_1000" else f"in pixels 0..{limit:.0f} of the image"
            raise CoordinateError(f"{name}={value} is outside the image; coordinates must be {unit}.")
    sent_x = x / max_x * geometry.sent.width
    sent_y = y / max_y * geometry.sent.height
    shot_x = sent_x * geometry.screenshot.width / geometry.sent.width
    shot_y = sent_y * geometry.screenshot.height / geometry.sent.height
    return CssPoint(x=geometry.origin_x + shot_x / geometry.scale, y=geometry.origin_y + shot_y / geometry.scale)


def css_to_model(point: CssPoint, frame: CoordinateFrame, geometry: ImageGeometry) -> tuple[int, int]:
    """The inverse: what a perfect model would answer for `point` (oracles, calibration)."""
    max_x, max_y = _frame_extent(frame, geometry)
    shot_x = (point.x - geometry.origin_x) * geometry.scale
    shot_y = (point.y - geometry.origin_y) * geometry.scale
    fx = shot_x / geometry.screenshot.width * max_x
    fy = shot_y / geometry.screenshot.height * max_y
    return round(min(max(fx, 0), max_x)), round(min(max(fy, 0), max_y))


def smart_resize(
    height: int, width: int, factor: int, min_pixels: int, max_pixels: int
) -> Size:
    """Qwen-VL style resize: both sides multiples of `factor`, area within bounds,
    aspect ratio kept as closely as possible. Returns the new Size (width, height)."""
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return Size(width=w_bar, height=h_bar)


def fit_max_side(size: Size, max_side: int | None) -> Size:
    """Downscale so the longer side is at most `max_side` (None: unchanged)."""
    longest = max(size.width, size.height)
    if not max_side or longest <= max_side:
        return size
    ratio = max_side / longest
    return Size(width=max(1, round(size.width * ratio)), height=max(1, round(size.height * ratio)))
