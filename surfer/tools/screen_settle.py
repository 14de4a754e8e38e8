"""Settle waiting on the desktop, where nothing but the screen can be watched.

`settle_screen` probes frames until the screen stays unchanged for a quiet
window, bounded by a timeout. Frames are compared tile by tile, so that what
changes on its own (a spinner, a clock, a blinking cursor: `ScreenHabits`
learns them from one action to the next, and a tile that keeps changing
through a wait stops counting) does not hold every action for the timeout.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from typing import Any, Awaitable, Callable, Hashable

from pydantic import BaseModel, Field


class ScreenSettleConfig(BaseModel):
    """Settle waiting for the desktop, where only the screen itself can be watched."""

    timeout: float = Field(default=3.0, ge=0, description="Upper bound on one settle wait, seconds.")
    quiet: float = Field(default=0.12, ge=0, description="The screen must stay unchanged this long, seconds.")
    interval: float = Field(default=0.04, gt=0, description="Pause between probe frames, seconds.")
    grace: float = Field(
        default=0.3, ge=0, description="When the screen has not changed since the action, wait this long for a (late) change.",
    )
    ticking: float = Field(default=0.6, gt=0, description=(
        "A part of the screen that keeps changing this long during the wait (a spinner, a progress animation, a "
        "video) is not waited for any more, seconds."))


TILE = 64  # the screen is compared in tiles of this many pixels a side
ALL = -1  # a tile number that stands for the whole screen (frames of different sizes)


def tile_digests(raw: bytes, width: int, height: int, tile: int = TILE) -> tuple[int, ...]:
    """A frame as the checksums of its tiles (`raw`: 4 bytes a pixel, rows of `width`), row by row of tiles."""
    from PIL import Image

    image = Image.frombuffer("RGBA", (width, height), raw, "raw", "RGBA", 0, 1)
    return tuple(
        zlib.crc32(image.crop((left, top, min(left + tile, width), min(top + tile, height))).tobytes())
        for top in range(0, height, tile) for left in range(0, width, tile)
    )


def tiles_changed(a: Hashable, b: Hashable) -> set[int]:
    """The tiles that differ between two frames (a frame that is not a tuple of tiles is one tile, 0)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return {i for i, (x, y) in enumerate(zip(a, b)) if x != y} if len(a) == len(b) else {ALL}
    return set() if a == b else {0}


class ScreenHabits:
    """What the screen does on its own, learned from one wait to the next: the tiles that kept changing through
    a wait (a spinner) and those that changed while nothing was done between a wait's end and the next action
    (a clock, a blinking cursor), when they are few: a window that finished opening late is no habit. A tile
    is remembered for the next MEMORY actions (one look between two actions can catch a spinner at the same
    angle, its tile unchanged)."""

    MAX_SHARE = 0.125  # of the screen's tiles
    MEMORY = 4

    def __init__(self) -> None:
        self.settled: Hashable | None = None  # the last frame of the last wait
        self._left: dict[int, int] = {}  # tile -> for how many more actions it is left out

    def of(self, before: Hashable | None) -> frozenset[int]:
        """The tiles to leave out of the wait after an action taken at frame `before`."""
        if before is None or not isinstance(before, tuple):
            return frozenset()
        moved = tiles_changed(self.settled, before) if isinstance(self.settled, tuple) else set()
        if ALL not in moved and len(moved) <= len(before) * self.MAX_SHARE:
            self._left.update(dict.fromkeys(moved, self.MEMORY))
        self._left = {tile: left - 1 for tile, left in self._left.items() if left > 0}
        return frozenset(self._left)

    def learn(self, seen: dict[str, Any]) -> None:
        self.settled = seen.get("last")
        self._left.update(dict.fromkeys(seen.get("ticking", ()), self.MEMORY))


async def settle_screen(
    probe: Callable[[], Awaitable[Hashable]], before: Hashable | None, config: ScreenSettleConfig,
    ambient: frozenset[int] = frozenset(), seen: dict[str, Any] | None = None,
) -> str:
    """Probe frames (`probe()` returns a digest of the screen, or a tuple of
    its tiles' digests) until two consecutive ones stay equal for `quiet`
    seconds, bounded by `timeout`. `before` is the digest taken before the
    action: while the screen still equals it, the wait gives the application
    `grace` seconds to react. Tiles in `ambient` (changing on their own before
    the action) and tiles that keep changing through `ticking` seconds of the
    wait (4 times or more) do not hold it. `seen` gets the `last` frame and
    the `ticking` tiles. Returns "stable", "unchanged" or "timeout"."""
    start = time.monotonic()
    deadline = start + config.timeout
    seen = {} if seen is None else seen
    ignored, changes = set(ambient), {}  # changes: tile -> when it changed during this wait
    last = await probe()
    since = time.monotonic()
    changed = before is None or bool(tiles_changed(before, last) - ignored)
    while True:
        now = time.monotonic()
        seen["last"], seen["ticking"] = last, ignored - ambient
        if now - since >= (config.quiet if changed else max(config.quiet, config.grace)):
            return "stable" if changed else "unchanged"
        if now >= deadline:
            return "timeout"
        await asyncio.sleep(min(config.interval, deadline - now))
        frame = await probe()
        now = time.monotonic()
        moved = tiles_changed(last, frame)
        for tile in moved - {ALL}:
            changes.setdefault(tile, []).append(now)
        if now - start >= config.ticking:
            for tile, times in changes.items():
                recent = [t for t in times if t >= now - 2 * config.ticking]
                if len(recent) >= 4 and recent[-1] - recent[0] >= 0.75 * config.ticking and tile not in ignored:
                    ignored.add(tile)
                    changed = before is None or bool(tiles_changed(before, frame) - ignored)
        if moved - ignored:
            changed = changed or before is None or bool(tiles_changed(before, frame) - ignored)
            since = now
        last = frame
