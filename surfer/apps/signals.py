"""Stop signals for the commands: SIGTERM is handled like Ctrl-C.

CI runners, `timeout`, systemd and Kubernetes stop processes with SIGTERM. The
first SIGINT or SIGTERM cancels the command's main coroutine, so the step in
progress is dropped and everything finished is written (`result.json` says
`interrupted`); the command then exits 130 (SIGINT) or 143 (SIGTERM). A second
signal exits at once.

    try:
        result = run_interruptible(main())
    except Interrupted as stop:
        ...                              # say what was kept
        raise typer.Exit(stop.exit_code)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The command was stopped by a signal after cleaning up."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM


def run_interruptible(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, with SIGINT and SIGTERM cancelling `main` once and
    raising `Interrupted` when it has unwound; a second signal exits at once.
    In a `surfer run` that started its browser early, `main` runs on that
    browser's loop instead (surfer/apps/early_start.py)."""
    received: list[int] = []

    def on_signal(task: asyncio.Task[Any], signum: int) -> None:
        if received:
            sys.stderr.write(f"\nsecond {signal.Signals(signum).name}: exiting at once\n")
            sys.stderr.flush()
            os._exit(128 + signum)
        received.append(signum)
        task.cancel()

    tasks: list[asyncio.Task[Any]] = []
    early_signals: list[int] = []

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        tasks.append(task)
        if early_signals:  # a signal came (to the main thread) before this task started
            on_signal(task, early_signals[0])
        installed = []
        for signum in STOP_SIGNALS:
            try:
                loop.add_signal_handler(signum, on_signal, task, signum)
                installed.append(signum)
            except (ValueError, RuntimeError, NotImplementedError):  # not the main thread, or no Unix signals
                break
        try:
            return await main
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)

    try:
        early = _early_loop()
        result = asyncio.run(guarded()) if early is None else _run_on(early, guarded(), tasks, early_signals, on_signal)
    except (asyncio.CancelledError, concurrent.futures.CancelledError, KeyboardInterrupt):
        if received:
            raise Interrupted(received[0]) from None
        raise
    if received:  # main caught the cancellation and returned: still a stop
        raise Interrupted(received[0])
    return result


def run_command(main: Coroutine[Any, Any, T], what: str = "stopped") -> T:
    """`run_interruptible` for commands with nothing more to save at a stop:
    says so on stderr and exits 130 / 143."""
    import typer

    try:
        return run_interruptible(main)
    except Interrupted as stop:
        sys.stderr.write(f"{what} by {stop}\n")
        raise typer.Exit(stop.exit_code) from None


def _early_loop() -> Any:
    from surfer.apps import early_start

    return early_start.current()


def _run_on(
    early: Any, main: Coroutine[Any, Any, T], tasks: list[asyncio.Task[Any]], pending: list[int], on_signal: Any,
) -> T:
    """Run `main` on the early start's loop (surfer/apps/early_start.py), which
    runs in another thread: the signals arrive here, in the main thread, and
    are passed on to `on_signal` on that loop (kept in `pending` until `main`'s
    task exists)."""
    loop = early.loop

    def deliver(signum: int) -> None:
        if tasks:
            on_signal(tasks[0], signum)
        else:
            pending.append(signum)

    def forward(signum: int, _frame: Any) -> None:
        loop.call_soon_threadsafe(deliver, signum)

    previous = {signum: signal.signal(signum, forward) for signum in STOP_SIGNALS}
    try:
        return early.submit(main).result()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
