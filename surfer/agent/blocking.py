"""The SDK's blocking calls (`Agent.run_sync`, `Agent.session_sync`) from code that already runs an
event loop — a Jupyter notebook, an async web app — where `asyncio.run` cannot start another: the call
then runs its own event loop in a worker thread, and the calling thread waits for it.

A stop of the calling thread while it waits — a notebook's interrupt (KeyboardInterrupt), a Ctrl-C that
`asyncio.run` turns into cancelling its main task — stops the run in the worker too, as Ctrl-C stops a
`run_sync` of a plain script: the run is recorded `interrupted`, then the stop goes on. (The wait went on
until the run ended by itself, which could be its whole time limit.)"""

from __future__ import annotations

import asyncio
import concurrent.futures
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Coroutine, TypeVar

T = TypeVar("T")

POLL_S = 0.1  # how often a wait looks whether its caller's task was cancelled (no signal reaches a blocked task)


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


def run_blocking(coroutine: Coroutine[Any, Any, T], runner: asyncio.Runner | None = None,
                 worker: ThreadPoolExecutor | None = None) -> T:
    """`coroutine` run to its end on `runner` (else an event loop of its own), here or, where this thread runs an
    event loop already, in `worker` / a worker thread of its own; a stop of this thread meanwhile cancels it."""
    started: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []

    async def tracked() -> T:
        started.append((asyncio.get_running_loop(), asyncio.current_task()))  # type: ignore[arg-type]
        return await coroutine

    def call() -> T:
        if runner is not None:
            return runner.run(tracked())
        return asyncio.run(tracked())

    if worker is None and not in_running_loop():
        return call()  # (asyncio's own Ctrl-C handling: the run is cancelled, then KeyboardInterrupt)
    pool = worker or ThreadPoolExecutor(1, thread_name_prefix="surfer-sync")
    try:
        return _wait(pool.submit(call), started)
    finally:
        if worker is None:
            pool.shutdown(wait=False)


def _wait(future: "concurrent.futures.Future[T]", started: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]]) -> T:
    """The worker's result; on a stop of this thread (KeyboardInterrupt, or the task it runs being cancelled),
    the worker's coroutine cancelled and waited for (its record written), then the stop raised."""
    caller = asyncio.current_task() if in_running_loop() else None
    try:
        while True:
            try:
                return future.result(timeout=POLL_S)
            except concurrent.futures.TimeoutError:
                if caller is not None and caller.cancelling():
                    raise asyncio.CancelledError() from None
    except BaseException:
        if started and not future.done():
            loop, task = started[0]
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # (its loop just closed: the run had ended)
                pass
        concurrent.futures.wait([future])  # a second interrupt leaves it to end in its thread
        raise
