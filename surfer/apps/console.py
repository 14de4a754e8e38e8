"""The CLI's console (options.console makes them): rich's, but a reader that goes
away stops the command (surfer/apps/output.py, surfer/apps/signals.py) where rich's
own raises SystemExit(1) wherever the write was — in a run's task, that ends its
event loop, not the command. Control characters in the text it prints (a model's
answer, a page's URL, a server's error) are shown as symbols (ESC as ␛), never sent
to the terminal: text a page put in a model's answer cannot retitle the window,
set the clipboard (OSC 52) or clear the screen; rich's own cursor moves still work."""

from __future__ import annotations

import re
from typing import Any, Iterable

from rich.console import Console as RichConsole
from rich.segment import Segment

from surfer.apps import output, signals


class Console(RichConsole):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        output.consoles.add(self)

    def render(self, renderable: Any, options: Any = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and _CONTROL.search(segment.text):  # text, not one of rich's own control codes
                segment = Segment(visible_controls(segment.text), segment.style)
            yield segment

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


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 but tab and newline, DEL, C1 (0x9b is CSI)


def visible_controls(text: str) -> str:
    """`text` with each control character a terminal would act on as its symbol (U+2400..U+2421; C1 as U+FFFD)."""
    def symbol(match: re.Match[str]) -> str:
        code = ord(match.group())
        return chr(0x2400 + code) if code < 0x20 else "\u2421" if code == 0x7F else "\ufffd"

    return _CONTROL.sub(symbol, text)
