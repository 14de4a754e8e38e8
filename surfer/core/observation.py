"""What an environment shows the agent at one moment."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .coordinates import Size


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
