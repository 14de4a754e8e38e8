"""The CLI's console (options.console makes them): rich's, but a reader that goes
away stops the command (surfer/apps/output.py, surfer/apps/signals.py) where rich's
own raises SystemExit(1) wherever the write was — in a run's task, that ends its
event loop, not the command."""

from __future__ import annotations

from rich.console import Console as RichConsole

from surfer.apps import signals


class Console(RichConsole):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        signals.reader_gone(self.file)
