"""The SDK's blocking calls (`Agent.run_sync`, `Agent.session_sync`) from code that already runs an
event loop — a Jupyter notebook, an async web app — where `asyncio.run` cannot start another: the call
then runs its own event loop in a worker thread, and the calling thread waits for it."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

T = TypeVar("T")


def in_running_loop() -> bool:
    """Whether this thread runs an event loop now (a notebook cell, a coroutine)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def worker_if_in_loop() -> ThreadPoolExecutor | None:
    """A thread of its own for a blocking session's event loop, where this thread runs one already."""
    return ThreadPoolExecutor(1, thread_name_prefix="surfer-sync") if in_running_loop() else None


def call_blocking(call: Callable[[], T], worker: ThreadPoolExecutor | None = None) -> T:
    """`call()` (which runs an event loop to its end), here, or in `worker` / a worker thread of its own
    when this thread runs an event loop already."""
    if worker is not None:
        return worker.submit(call).result()
    if not in_running_loop():
        return call()
    with ThreadPoolExecutor(1, thread_name_prefix="surfer-sync") as pool:
        return pool.submit(call).result()
