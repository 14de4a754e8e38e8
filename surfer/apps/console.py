"""The CLI's console (options.console makes them): rich's, but a reader that goes
away stops the command (surfer/apps/output.py, surfer/apps/signals.py) where rich's
own raises SystemExit(1) wherever the write was — in a run's task, that ends its
event loop, not the command."""

from __future__ import annotations

from typing import Any

from rich.console import Console as RichConsole

from surfer.apps import output, signals


class Console(RichConsole):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        output.consoles.add(self)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        signals.reader_gone(self.file)
