"""Controlling `surfer run` from its terminal: one line per command on stdin.

    p          pause / resume (between steps)
    h TEXT     a hint for the policy's next prompt
    f          finish now: ask for the final answer
    t          take over: use the browser yourself (a headful or --cdp-url browser, the desktop);
               Enter (or Ctrl-D) hands back (q stops instead), and what you did is recorded as human steps
    q          stop (like Ctrl-C)

When a sensitive action needs a person's yes, the question is printed with
the action, why it is sensitive and the path of the screenshot, and the next
line answers it (y / n). When the agent asks the user a question (ask_user),
it is printed and the next line is the reply (read without echo when the
agent says the reply is secret); when it asks a person to take over (a
CAPTCHA, a sign-in), Enter hands back and `n` declines. In a session, a line that is no command,
typed while a task runs, is queued as the next task; between tasks the
person is asked for the next one. Active when stdin is a terminal.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, TextIO

from surfer.agent.confirm import ConfirmationRequest
from surfer.agent.control import RunHandle
from surfer.agent.events import RunStarted
from surfer.agent.questions import Question, Reply
from surfer.apps import options

HELP = ("keys: [bold]p[/bold] pause/resume · [bold]h TEXT[/bold] hint · [bold]f[/bold] finish now · "
        "[bold]t[/bold] take over · [bold]q[/bold] stop")
COMMANDS = ("p", "h", "f", "t", "q")
TTY_LINE_MAX = 4096  # a terminal (Linux's line discipline) passes at most this many bytes of a line, its newline included


class TerminalControls:
    def __init__(self, console: Any, run_dir: str | Path, stream: TextIO | None = None) -> None:
        self.console = console
        self.run_dir = Path(run_dir)
        self.stream = stream or sys.stdin
        self.handle: RunHandle | None = None
        self._question: asyncio.Future[bool] | None = None
        self._line: asyncio.Future[str | None] | None = None  # a reply or the next task, being read
        self._attached = False
        self._ended = False  # the terminal's input ended (Ctrl-D)
        self.follow_ups: list[str] | None = None  # in a session: lines typed during a task, queued as next tasks
        self._holding = False  # the person took over (`t`): the next line hands back

    def follow(self, event: Any) -> None:
        """A listener of the runs: the one that starts is where its confirmation screenshots go (in a
        session, each task's own run directory, not the session's)."""
        if isinstance(event, RunStarted) and event.run_dir:
            self.run_dir = Path(event.run_dir)

    def attach(self, handle: RunHandle) -> None:
        self.handle = handle
        self._holding = False
        self._listen()
        self.console.print(f"[dim]{HELP}[/dim]")

    def _listen(self) -> None:
        if not self._attached and not self._ended:
            asyncio.get_running_loop().add_reader(self.stream.fileno(), self._on_input)
            self._attached = True

    def detach(self) -> None:
        self.handle = None
        if self._attached:
            asyncio.get_running_loop().remove_reader(self.stream.fileno())
            self._attached = False

    async def read_line(self, prompt: str, *, hidden: bool = False) -> str | None:
        """The next line typed (stripped); None when the input ended. `hidden`: not echoed."""
        if self._ended:
            return None
        echo = _echo_off(self.stream) if hidden else None  # before the prompt: a reply typed at once is not shown
        listening = self._attached
        try:
            self._listen()
            self._line = asyncio.get_running_loop().create_future()
            self.console.print(prompt, markup=True, highlight=False)
            return await self._line
        finally:
            self._line = None
            if echo is not None:
                echo()
            if not listening:
                self.detach()

    async def next_task(self) -> str | None:
        """In a session: a follow-up typed during the last task, else the one asked for now;
        None (an empty line, Ctrl-D) ends the session."""
        if self.follow_ups:
            task = self.follow_ups.pop(0)
            options.say(self.console, "next task:", "cyan", task)
            return task
        line = await self.read_line("[bold cyan]next task[/bold cyan] (an empty line or Ctrl-D ends the session):")
        return line or None

    async def ask_user(self, question: Question) -> Reply | None:
        """The agent's question, answered by the person at the terminal (the run's `on_question`);
        an empty reply (or Ctrl-D) leaves it unanswered: the run ends needs_input. When the agent
        asks a person to take over, Enter hands back and `n` (or Ctrl-D) declines."""
        if question.take_over:
            line = await self.read_line(
                f"[bold magenta]the agent asks you to take over[/bold magenta] {_plain(question.text)}\n"
                "   use the browser, then press [bold]Enter[/bold] to hand back (n: decline):")
            if line is None or line.lower() in ("n", "no"):
                return None
            self.console.print("[cyan]handed back[/cyan]: the agent looks again")
            return Reply(line or "handed back")
        hint = " (hidden as you type; kept out of every record)" if question.secret else ""
        line = await self.read_line(
            f"[bold magenta]the agent asks[/bold magenta] {_plain(question.text)}\n   your reply{hint}:", hidden=question.secret)
        if question.secret:  # (the reply was not shown: say whether one came)
            self.console.print("   (reply received)" if line else "   (no reply)")
        return Reply(line, question.secret) if line else None

    ask_user.__name__ = "person"

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
        line = self._typed_line()
        if not line:  # end of input: nothing more will come
            handle = self.handle
            self.detach()
            self._ended = True
            if self._holding and handle is not None:  # (no Enter can come: the person's turn would never end)
                self._holding = False
                handle.hand_back()
                self.console.print("[cyan]handed back[/cyan] (the input ended): the agent looks again")
            if self._question is not None and not self._question.done():
                self._question.set_result(False)
            if self._line is not None and not self._line.done():
                self._line.set_result(None)
            return
        text = line.strip()
        if self._holding and self.handle is not None:
            self._holding = False
            if text.lower() == "q":  # stop, not hand back: the agent does not go on
                self.handle.cancel("q at the terminal")
                return
            self.handle.hand_back()
            self.console.print("[cyan]handed back[/cyan]: the agent looks again")
            return
        if self._line is not None and not self._line.done():
            self._line.set_result(text)
            return
        if self._question is not None and not self._question.done():
            if text.lower() in ("y", "yes", "n", "no"):
                self._question.set_result(text.lower().startswith("y"))
            else:
                self.console.print("   answer y or n")
            return
        self.command(text)

    def _typed_line(self) -> str:
        """The line typed, as text: bytes that are not text in the terminal's encoding (a character the
        terminal's line limit cut in two, a terminal set to another encoding) are read as U+FFFD, never
        as lone surrogates that no record can be written with, nor as an error that loses the line."""
        raw = getattr(self.stream, "buffer", None)
        if raw is None:  # (a text stream of the caller's)
            return self.stream.readline()
        data = raw.readline()
        if len(data) >= TTY_LINE_MAX and self.stream.isatty():
            self.console.print(f"[yellow]the terminal keeps at most {TTY_LINE_MAX - 1} bytes of a line: "
                               "the rest of this one was cut[/yellow]")
        return data.decode(getattr(self.stream, "encoding", None) or "utf-8", "replace")

    def command(self, text: str) -> None:
        handle = self.handle
        if handle is None or not text:
            return
        key, _, rest = text.partition(" ")
        key = key.lower()
        if self.follow_ups is not None and key not in COMMANDS:
            self.follow_ups.append(text)
            options.say(self.console, "queued as the next task:", "cyan", text)
        elif key == "p":
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
        elif key == "t":
            self._take_over(handle)
        elif key == "q":
            handle.cancel("q at the terminal")
        else:
            self.console.print(f"[dim]{HELP}[/dim]")


    def _take_over(self, handle: RunHandle) -> None:
        """`t`: the person's turn begins at the next step boundary; the next line hands back."""
        if self._holding:
            return
        begun = handle.take_over()
        if begun.done() and begun.exception() is not None:
            self.console.print(f"[red]cannot take over:[/red] {_plain(str(begun.exception()))}")
            return
        self._holding = True
        self.console.print("[cyan]taking over after the current step…[/cyan]")

        def told(future: "asyncio.Future[None]") -> None:
            if future.cancelled():
                return
            if future.exception() is not None:
                self._holding = False
                self.console.print(f"[red]cannot take over:[/red] {_plain(str(future.exception()))}")
            elif self._holding:
                self.console.print("[bold cyan]you have the controls[/bold cyan]: use the browser, "
                                   "then press [bold]Enter[/bold] here to hand back")

        begun.add_done_callback(told)


def _plain(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _echo_off(stream: TextIO) -> Any:
    """Stop the terminal echoing what is typed; returns what restores it (None off a terminal)."""
    import termios

    try:
        fd = stream.fileno()
        before = termios.tcgetattr(fd)
        quiet = list(before)
        quiet[3] &= ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSADRAIN, quiet)
    except (termios.error, OSError, ValueError, AttributeError):
        return None
    return lambda: termios.tcsetattr(fd, termios.TCSADRAIN, before)
