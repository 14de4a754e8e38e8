"""Controlling `surfer run` from its terminal: one line per command on stdin.

    p          pause / resume (between steps)
    h TEXT     a hint for the policy's next prompt
    f          finish now: ask for the final answer
    q          stop (like Ctrl-C)

When a sensitive action needs a person's yes, the question is printed with
the action, why it is sensitive and the path of the screenshot, and the next
line answers it (y / n). Active when stdin is a terminal.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, TextIO

from surfer.agent.confirm import ConfirmationRequest
from surfer.agent.control import RunHandle
from surfer.apps import options

HELP = "keys: [bold]p[/bold] pause/resume · [bold]h TEXT[/bold] hint · [bold]f[/bold] finish now · [bold]q[/bold] stop"


class TerminalControls:
    def __init__(self, console: Any, run_dir: str | Path, stream: TextIO | None = None) -> None:
        self.console = console
        self.run_dir = Path(run_dir)
        self.stream = stream or sys.stdin
        self.handle: RunHandle | None = None
        self._question: asyncio.Future[bool] | None = None
        self._attached = False

    def attach(self, handle: RunHandle) -> None:
        self.handle = handle
        asyncio.get_running_loop().add_reader(self.stream.fileno(), self._on_input)
        self._attached = True
        self.console.print(f"[dim]{HELP}[/dim]")

    def detach(self) -> None:
        if self._attached:
            asyncio.get_running_loop().remove_reader(self.stream.fileno())
            self._attached = False

    async def confirm(self, request: ConfirmationRequest) -> bool:
        """Ask the person at the terminal (the run's confirmer)."""
        shot = self.run_dir / f"confirm-step-{request.step:03d}.{request.screenshot_ext}"
        if request.screenshot:
            shot.parent.mkdir(parents=True, exist_ok=True)
            await asyncio.to_thread(shot.write_bytes, request.screenshot)
        self.console.print(
            f"[bold yellow]confirm[/bold yellow] {request.action.describe()} on {request.url or 'the screen'}\n"
            f"   why: {request.reason}\n   screenshot: {shot}\n   perform it? [bold]y[/bold]/[bold]n[/bold]",
            markup=True, highlight=False,
        )
        self._question = asyncio.get_running_loop().create_future()
        try:
            approved = await self._question
        finally:
            self._question = None
        self.console.print(f"   {'[green]approved[/green]' if approved else '[red]denied[/red]'}")
        return approved

    confirm.__name__ = "person"

    def _on_input(self) -> None:
        line = self.stream.readline()
        if not line:  # end of input: nothing more will come
            self.detach()
            if self._question is not None and not self._question.done():
                self._question.set_result(False)
            return
        text = line.strip()
        if self._question is not None and not self._question.done():
            if text.lower() in ("y", "yes", "n", "no"):
                self._question.set_result(text.lower().startswith("y"))
            else:
                self.console.print("   answer y or n")
            return
        self.command(text)

    def command(self, text: str) -> None:
        handle = self.handle
        if handle is None or not text:
            return
        key, _, rest = text.partition(" ")
        key = key.lower()
        if key == "p":
            if handle.paused:
                handle.resume()
                self.console.print("[cyan]resumed[/cyan]")
            else:
                handle.pause()
                self.console.print("[cyan]paused after the current step[/cyan] (p to resume)")
        elif key == "h" and rest.strip():
            handle.hint(rest)
            options.say(self.console, "hint for the next step:", "cyan", rest.strip())
        elif key == "f":
            handle.finish_now()
            self.console.print("[cyan]asking for the final answer[/cyan]")
        elif key == "q":
            handle.cancel()
        else:
            self.console.print(f"[dim]{HELP}[/dim]")
