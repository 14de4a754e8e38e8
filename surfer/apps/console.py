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


def redraws(console: RichConsole) -> bool:
    """Whether a live display (a table, a spinner) may redraw in place: the output is an interactive terminal, not
    only one told to use colour (FORCE_COLOR in a CI job, whose log would get every redraw appended as new lines)."""
    if not console.is_terminal or console.is_dumb_terminal:
        return False
    isatty = getattr(console.file, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed file
        return False
