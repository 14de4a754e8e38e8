"""The time budget of the run in progress, visible to the layers below the loop.

The loop bounds a run with `asyncio.timeout_at`, which cancels whatever is in
flight at the limit. Backends additionally read the deadline to size their
own request timeouts (a default 120 s timeout becomes the time left), so a
call that would outlive the run is reported as a timeout, not just dropped.

Time spent waiting for a model server that went away (models/outage.py) is
not the task's: `pause_deadline(seconds)` moves the run's limits, and the
timeouts opened with `RunClock.limit()`, that much later.

    with run_deadline(loop.time() + 30) as clock:
        ...                      # time_left() -> seconds until then
        async with clock.limit():  # cut at clock.steps_until (moved by pauses)
            ...
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar


def _now() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()  # the default event loop's clock


class RunClock:
    """A run's limits on the event loop's clock: `end` (the deadline) and `steps_until`
    (`reserve` seconds earlier, kept for a final answer); both move when the run is paused."""

    def __init__(self, end: float, reserve: float = 0.0, parent: RunClock | None = None) -> None:
        self.end = end
        self.parent = parent  # an enclosing clock (a batch's hard limit around a run): pauses move it too
        self.reserve = reserve
        self.paused = 0.0  # seconds added by pauses
        self._live: list[tuple[asyncio.Timeout, bool]] = []

    @property
    def steps_until(self) -> float:
        return self.end - self.reserve

    @asynccontextmanager
    async def limit(self, *, final: bool = False) -> AsyncIterator[asyncio.Timeout]:
        """`asyncio.timeout_at(steps_until)` (or `end` when `final`) that pauses move."""
        async with asyncio.timeout_at(self.end if final else self.steps_until) as timeout:
            entry = (timeout, final)
            self._live.append(entry)
            try:
                yield timeout
            finally:
                self._live.remove(entry)

    def pause(self, seconds: float) -> None:
        self.end += seconds
        self.paused += seconds
        for timeout, final in self._live:
            if not timeout.expired():
                timeout.reschedule(self.end if final else self.steps_until)
        if self.parent is not None:
            self.parent.pause(seconds)


_CLOCK: ContextVar[RunClock | None] = ContextVar("surfer_run_clock", default=None)


@contextmanager
def run_deadline(at: float, reserve: float = 0.0) -> Iterator[RunClock]:
    """Within this block (and the tasks it starts), `time_left()` counts down to `at`
    (event-loop time). A nested deadline can only shorten the outer one."""
    outer = _CLOCK.get()
    clock = RunClock(at if outer is None else min(outer.end, at), reserve, outer)
    token = _CLOCK.set(clock)
    try:
        yield clock
    finally:
        _CLOCK.reset(token)


def time_left() -> float | None:
    """Seconds until the current run's deadline (never below 0), or None without one."""
    clock = _CLOCK.get()
    return None if clock is None else max(0.0, clock.end - _now())


def pause_deadline(seconds: float) -> None:
    """Move the current run's limits `seconds` later (time that was not the run's to spend;
    negative: give back what an earlier pause reserved and did not use)."""
    clock = _CLOCK.get()
    if clock is not None and seconds:
        clock.pause(seconds)
