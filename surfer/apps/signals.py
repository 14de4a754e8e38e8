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
    raising `Interrupted` when it has unwound; a second signal exits at once."""
    received: list[int] = []

    def on_signal(task: asyncio.Task[Any], signum: int) -> None:
        if received:
            sys.stderr.write(f"\nsecond {signal.Signals(signum).name}: exiting at once\n")
            sys.stderr.flush()
            os._exit(128 + signum)
        received.append(signum)
        task.cancel()

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
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
        result = asyncio.run(guarded())
    except (asyncio.CancelledError, KeyboardInterrupt):
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
