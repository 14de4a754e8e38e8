"""Loop detection: an agent repeating itself is told so, and stopped.

Two patterns, judged on what the model saw and did: the same action on an
unchanged screen (the last time it changed nothing), and a short cycle of
actions that keeps bringing back the same screens (A, B, A, B ...). Screens
are compared as 64×40 grey thumbnails decoded at reduced size from the
screenshot (about a millisecond): two screens are the same when at most a
handful of cells changed, so a blinking caret or a small spinner does not
hide a repetition, while a calendar turning to the next month (many small
changes) is a new screen.
"""

from __future__ import annotations

import io
from collections import deque
from dataclasses import dataclass

from surfer.core.actions import CssPoint

THUMB = (64, 40)
CELL_CHANGED = 12  # grey levels (0..255) by which a thumbnail cell must differ to count as changed
SAME_SCREEN_CELLS = 4  # at most this many changed cells: still the same screen (a caret, a spinner)
POINT_TOLERANCE = 8.0  # CSS px: clicks this close count as one place
CYCLES = (2, 3)


def screen_fingerprint(image: bytes) -> bytes:
    """A tiny grey thumbnail of a screenshot (JPEG decodes at 1/8 scale first)."""
    from PIL import Image

    with Image.open(io.BytesIO(image)) as picture:
        picture.draft("L", (THUMB[0] * 4, THUMB[1] * 4))
        return picture.convert("L").resize(THUMB).tobytes()


def same_screen(a: bytes, b: bytes) -> bool:
    return len(a) == len(b) and sum(abs(x - y) > CELL_CHANGED for x, y in zip(a, b)) <= SAME_SCREEN_CELLS


@dataclass(frozen=True)
class StepSeen:
    """What the model saw (a screen fingerprint) and what it did (the action line and its points)."""

    screen: bytes
    action: str
    points: tuple[tuple[float, float], ...] = ()

    def same_action(self, other: "StepSeen") -> bool:
        return self.action == other.action and len(self.points) == len(other.points) and all(
            abs(x1 - x2) <= POINT_TOLERANCE and abs(y1 - y2) <= POINT_TOLERANCE
            for (x1, y1), (x2, y2) in zip(self.points, other.points)
        )

    def same_step(self, other: "StepSeen") -> bool:
        return self.same_action(other) and same_screen(self.screen, other.screen)


def step_seen(screen: bytes, action: str, points: list[CssPoint] | None = None) -> StepSeen:
    return StepSeen(screen, action, tuple((p.x, p.y) for p in points or []))


class RepetitionDetector:
    """Feed each performed step (`seen`); a non-None return says how the agent is repeating itself."""

    def __init__(self, window: int = 8) -> None:
        self._steps: deque[StepSeen] = deque(maxlen=window)

    def seen(self, step: StepSeen) -> str | None:
        self._steps.append(step)
        steps = list(self._steps)
        if len(steps) >= 2 and steps[-1].same_step(steps[-2]):
            return "you repeated the same action on an unchanged screen; the last time it changed nothing"
        for period in CYCLES:
            recent, before = steps[-period:], steps[-2 * period:-period]
            if len(steps) >= 2 * period and all(a.same_step(b) for a, b in zip(recent, before)) and not all(
                a.same_action(recent[0]) for a in recent
            ):
                return f"you are going round in a cycle of {period} actions that keeps bringing back the same screens"
        return None
