"""Says where a blocked event loop is stuck.

Every session of a run shares one event loop; code that holds it (a
pathological regex on a model's reply, an image decoded in a loop) stops
them all and silences every timeout, which cannot fire while the loop is
held. `LoopWatchdog` is a thread outside the loop: the loop touches a
heartbeat every `tick` seconds, and when the heartbeat is older than `after`
seconds the thread writes each thread's stack (faulthandler, so it works
whatever the loop is doing) to `file`, once per stall.

    async with LoopWatchdog(after=30.0, file=sys.stderr):
        await long_benchmark()
"""

from __future__ import annotations

import asyncio
import faulthandler
import threading
import time
from typing import Any, TextIO


class LoopWatchdog:
    def __init__(self, after: float = 30.0, file: TextIO | None = None, tick: float = 1.0) -> None:
        import sys

        self.after = after
        self.tick = min(tick, after / 4)
        self.file = file or sys.stderr
        self.stalls = 0
        self._beat = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> "LoopWatchdog":
        self._beat = time.monotonic()
        self._task = asyncio.create_task(self._heartbeat())
        self._thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._thread.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._thread is not None:
            self._thread.join(timeout=5)

    async def _heartbeat(self) -> None:
        while True:
            self._beat = time.monotonic()
            await asyncio.sleep(self.tick)

    def _watch(self) -> None:
        reported = False
        while not self._stop.wait(self.tick):
            held = time.monotonic() - self._beat
            if held < self.after:
                reported = False
                continue
            if not reported:
                reported = True
                self.stalls += 1
                print(f"\nsurfer: the event loop has been held for {held:.0f} s; where each thread is:", file=self.file, flush=True)
                try:
                    faulthandler.dump_traceback(file=self.file, all_threads=True)
                except (ValueError, OSError):  # a file without a descriptor (tests' StringIO): Python's own stacks
                    self._python_stacks()
                self.file.flush()

    def _python_stacks(self) -> None:
        import sys
        import traceback

        for ident, frame in sys._current_frames().items():
            print(f"Thread {ident}:", file=self.file)
            traceback.print_stack(frame, file=self.file)
