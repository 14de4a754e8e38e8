"""What a person does while they hold the controls (a take-over, agent/handover.py).

    watch = env.watch_person()
    await watch.start()          # the screen as the person found it
    ...                          # the person clicks and types
    actions = await watch.stop() # what they did, each with the screen before and after

Each `PersonAction` holds the action in surfer's own vocabulary where it can
be read (a click at a point on an element, typed text, key presses, a
navigation), the element it was done on, and the screens before and after it.
Typed text in a secret field (a password, a one-time code, a card number) is
never read: its action says `REDACTED`.

This base class is what every environment can do: the screen when the person
took over and when they handed back, as one action that is not read (`action`
None). The browser reads the page's own events (browser/person.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from surfer.core.observation import Observation

TRIES, RETRY_S = 3, 0.2  # a capture that fails (the page is between documents) is tried again this often, this late
REDACTED = "[redacted]"  # what a typed secret is recorded as
NOT_READ = "the person's actions are not read here: the screen before and after they held the controls"


@dataclass
class PersonAction:
    """One thing a person did, with the screens around it."""

    action: Any = None  # a surfer Action (core/actions.py), or None where it could not be read
    before: Observation | None = None
    after: Observation | None = None
    element: dict[str, Any] | None = None  # what the page said about the element acted on
    detail: str = ""  # what is known beyond the action (where a click led, why nothing was read)
    redacted: bool = False  # typed into a secret field: the text is not recorded
    at: float = field(default_factory=time.monotonic)


class PersonWatch:
    """Screens before and after a person's turn; what they did is not read (the desktop)."""

    def __init__(self, env: Any) -> None:  # an Environment (tools/base.py, which makes watches)
        self.env = env
        self.first: Observation | None = None

    async def start(self) -> None:
        self.first = await self._observe()

    async def stop(self) -> list[PersonAction]:
        last = await self._observe()
        return [PersonAction(None, self.first, last, detail=NOT_READ)]

    async def _observe(self) -> Observation | None:
        """The screen now; None where it cannot be captured (a page between two documents, twice over)."""
        for attempt in range(TRIES):
            try:
                return await self.env.observe()
            except Exception:  # noqa: BLE001 - a screen that cannot be captured is left out, not the turn
                if attempt + 1 < TRIES:
                    await asyncio.sleep(RETRY_S)
        return None
