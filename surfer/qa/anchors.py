"""Anchors: what was at an action's point when it was recorded, so a replay
can tell whether the page still looks the same there.

An anchor holds the URL pattern of the page, in the browser a fingerprint of
the element at the point (role, accessible name, tag, a stable selector),
and for browser and desktop an image crop around the point."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import urlsplit

from surfer.core.actions import CssPoint
from surfer.core.observation import Screenshot
from surfer.tools.element_facts import element_at

CROP_CSS_PX = 48  # side of the square crop around the point, in CSS pixels
THUMB = 16  # crops are compared as THUMB x THUMB greyscale thumbnails
CROP_TOLERANCE = 28.0  # mean absolute difference (0..255) under which two crops match

@dataclass(frozen=True)
class Fingerprint:
    role: str
    name: str
    tag: str
    selector: str

    @classmethod
    def from_dict(cls, data: Optional[dict[str, Any]]) -> Optional["Fingerprint"]:
        return cls(**{k: str(data.get(k, "")) for k in ("role", "name", "tag", "selector")}) if data else None

    def same_element(self, other: Optional["Fingerprint"]) -> bool:
        return other is not None and self == other

    def same_kind(self, other: Optional["Fingerprint"]) -> bool:
        """The same sort of control (renamed or moved): role and tag agree."""
        return other is not None and (self.role, self.tag) == (other.role, other.tag)


async def fingerprint_at(page: Any, point: CssPoint) -> Optional[Fingerprint]:
    """The element under `point` in a Playwright page, or None (no page, no element,
    a page mid-navigation). Read by `tools.element_facts`, the one owner of what
    the page says is at a point (the sensitive-action rules read the same facts)."""
    facts = await element_at(page, point.x, point.y)
    return Fingerprint(facts.role, facts.name, facts.tag, facts.selector) if facts is not None else None


def url_pattern(url: str, base_url: Optional[str]) -> str:
    """The page an action happened on, without query and fragment, relative to
    the suite's base URL when under it (ports differ between machines)."""
    parts = urlsplit(url)
    bare = f"{parts.scheme}://{parts.netloc}{parts.path}" if parts.scheme else url
    if base_url:
        base = urlsplit(base_url)
        root = f"{base.scheme}://{base.netloc}{base.path.rsplit('/', 1)[0]}/"
        if bare.startswith(root):
            return bare[len(root):]
    return bare


def crop_around(screenshot: Screenshot, point: CssPoint) -> bytes:
    """A PNG crop of CROP_CSS_PX CSS pixels around `point` (device pixels kept)."""
    from PIL import Image

    scale = screenshot.scale or 1.0
    ox, oy = screenshot.origin
    cx, cy = (point.x - ox) * scale, (point.y - oy) * scale
    half = CROP_CSS_PX * scale / 2
    with Image.open(io.BytesIO(screenshot.data)) as image:
        box = (round(cx - half), round(cy - half), round(cx + half), round(cy + half))
        crop = image.convert("RGB").crop(box)  # outside the image is black: a point at the edge still compares
        out = io.BytesIO()
        crop.save(out, format="PNG", optimize=True)
    return out.getvalue()


def crop_distance(a: bytes, b: bytes) -> float:
    """Mean absolute greyscale difference (0..255) of two crops as small thumbnails."""
    from PIL import Image, ImageChops, ImageStat

    with Image.open(io.BytesIO(a)) as first, Image.open(io.BytesIO(b)) as second:
        ta = first.convert("L").resize((THUMB, THUMB), Image.Resampling.BILINEAR)
        tb = second.convert("L").resize((THUMB, THUMB), Image.Resampling.BILINEAR)
        return float(ImageStat.Stat(ImageChops.difference(ta, tb)).mean[0])
