"""What an environment shows the agent at one moment."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .coordinates import Size


# The largest screenshot side, in device pixels (viewport x device scale factor): Chromium fails to capture
# much larger ones ("Unable to capture screenshot", a timeout, a dead browser) after tens of seconds.
MAX_SCREENSHOT_SIDE = 10_000


def screenshot_too_large(viewport: tuple[int, int], scale: float) -> str | None:
    """Why screenshots of this viewport at this device scale factor cannot be taken, or None."""
    width, height = round(viewport[0] * scale), round(viewport[1] * scale)
    if max(width, height) <= MAX_SCREENSHOT_SIDE:
        return None
    return (f"viewport {viewport[0]}x{viewport[1]} at device scale factor {scale:g} makes screenshots of {width}x{height} "
            f"device pixels; Chromium captures at most {MAX_SCREENSHOT_SIDE} per side")


@dataclass(frozen=True)
class Screenshot:
    """Encoded image bytes and the geometry needed to map points back.

    size:   pixel size of the image (device pixels)
    scale:  device pixels per CSS pixel
    origin: CSS position of the image's top-left corner
    """

    data: bytes
    mime: str
    size: Size
    scale: float = 1.0
    origin: tuple[float, float] = (0.0, 0.0)

    @property
    def extension(self) -> str:
        return {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}.get(self.mime, "bin")


@dataclass(frozen=True)
class Observation:
    screenshot: Screenshot
    url: str = ""
    title: str = ""
    tabs: tuple[str, ...] = ()
    active_tab: int = 0
    timestamp: float = field(default_factory=time.time)
    # What else the agent must know about the screen now (an open dialog, files it may upload), one line each.
    notices: tuple[str, ...] = ()
