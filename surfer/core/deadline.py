"""The time budget of the run in progress, visible to the layers below the loop.

The loop bounds a run with `asyncio.timeout_at`, which cancels whatever is in
flight at the limit. Backends additionally read the deadline to size their
own request timeouts (a default 120 s timeout becomes the time left), so a
call that would outlive the run is reported as a timeout, not just dropped.

    with run_deadline(loop.time() + 30):
        ...                      # time_left() -> seconds until then
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_DEADLINE: ContextVar[float | None] = ContextVar("surfer_run_deadline", default=None)


def _now() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()  # the default event loop's clock


@contextmanager
def run_deadline(at: float) -> Iterator[None]:
    """Within this block (and the tasks it starts), `time_left()` counts down to `at`
    (event-loop time). A nested deadline can only shorten the outer one."""
    outer = _DEADLINE.get()
    token = _DEADLINE.set(at if outer is None else min(outer, at))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def time_left() -> float | None:
    """Seconds until the current run's deadline (never below 0), or None without one."""
    at = _DEADLINE.get()
    return None if at is None else max(0.0, at - _now())
