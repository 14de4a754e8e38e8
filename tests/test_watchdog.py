"""The loop watchdog prints where a held event loop is stuck, once per stall, and nothing while it runs."""

from __future__ import annotations

import asyncio
import io
import time

import pytest

from surfer.core.watchdog import LoopWatchdog

pytestmark = pytest.mark.serial  # a loop held longer than 0.4 s is a stall: another test's load must not make one


def _hold_the_loop(seconds: float) -> None:
    time.sleep(seconds)  # what a pathological parse does to every session


def test_a_held_loop_is_reported_with_the_stack_that_holds_it():
    out = io.StringIO()

    async def main() -> LoopWatchdog:
        async with LoopWatchdog(after=0.4, file=out, tick=0.05) as dog:
            await asyncio.sleep(0.6)  # a loop that runs: no report
            assert dog.stalls == 0 and out.getvalue() == ""
            _hold_the_loop(1.2)
            await asyncio.sleep(0.3)  # running again: the stall ends, no second report
            _hold_the_loop(1.0)  # a second stall, a second report
        return dog

    dog = asyncio.run(main())
    text = out.getvalue()
    assert dog.stalls == 2
    assert text.count("the event loop has been held for") == 2
    assert "_hold_the_loop" in text
