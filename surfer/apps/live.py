"""The CLI's live view: a consumer of the agent's event stream that prints
each step's thought, action, target, resolved point and timings, with a
status line (spinner, role asked, seconds waited) while a model call is in
flight. Model and page text is printed as text, never read as markup; off a
terminal (CI logs) only plain lines are written, each whole (not cut at the
80 columns a pipe is assumed to have: a URL or a reason stays on its line)."""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.text import Text

from surfer.agent.events import (
    NO_ANSWER, ErrorOccurred, Event, Finished, ModelAsked, ModelCalled, RunStarted, StepFinished, StepStarted, Validated, Waiting,
)
from surfer.agent.handover import HandedBack, HumanActed
from surfer.apps.console import redraws
from surfer.core.actions import headline

_STATUS_STYLE = {"success": "bold green", "failed": "bold red", "error": "bold red", "limit": "bold yellow", "stuck": "bold yellow", "needs_approval": "bold magenta", "needs_input": "bold magenta", "interrupted": "bold yellow"}


class LiveView:
    """`spinner=False` (or a console that is not a terminal) prints plain lines only."""

    def __init__(self, console: Console, spinner: bool = True) -> None:
        self.console = console
        self.spinner = spinner and redraws(console)
        self._whole_lines = not redraws(console)  # off a terminal: no line cut to a width nobody sees
        self._status: Any = None
        self._verdicts: list[Text] = []  # printed under the step they judge
        self._run_dir: str | None = None  # where the run said it would be recorded

    def _spin(self, waiting: Waiting) -> None:
        if not self.spinner:
            return
        if self._status is None:
            self._status = self.console.status(waiting)
            self._status.start()
        else:
            self._status.update(waiting)

    def _stop_spin(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _line(self, *parts: str | tuple[str, str], style: str = "") -> None:
        self._print(Text.assemble(*parts, style=style))

    def _print(self, text: Text) -> None:
        self.console.print(text, soft_wrap=self._whole_lines)

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._line(("surfer ", "bold cyan"), event.task)
            backends = event.config.get("backends", {})
            where = f"  {event.url}" if event.url else ""
            self._line(f"{where}  profile={event.config.get('profile')}  policy={backends.get('policy', '?')}", style="dim")
            self._run_dir = event.run_dir
            if event.run_dir:
                self._line(f"  run directory: {event.run_dir}", style="dim")
        elif isinstance(event, StepStarted):
            self._verdicts = []
        elif isinstance(event, ModelAsked):
            self._spin(Waiting(event.step, event.role))
        elif isinstance(event, ModelCalled):
            self._stop_spin()
            if event.call.error and not event.call.error.startswith(NO_ANSWER):  # (no answer: the step's error says why)
                self._line(f"   {event.call.role} answer rejected: {event.call.error}", style="red")
        elif isinstance(event, Validated):
            verdict = ("accepted", "green") if event.verdict.accepted else ("rejected", "red")
            self._verdicts.append(Text.assemble("   validator ", verdict, f": {event.verdict.reasons}"))
        elif isinstance(event, StepFinished):
            self._stop_spin()
            self._step(event)
        elif isinstance(event, HumanActed):  # what a person did after taking over, at the hand-back
            self._stop_spin()
            taken = event.step.taken
            what = headline(taken.action) if taken.action is not None else "(the screens before and after)"
            self._line(("person ", "bold yellow"), ("→ ", "bold"), (what, "yellow"), (f"  {taken.detail}" if taken.detail else "", "dim"))
        elif isinstance(event, HandedBack) and event.declined:
            self._line("   the person declined to take over: the task ends needing their input", style="dim")
        elif isinstance(event, HandedBack):
            self._line(f"   the person handed back after {event.seconds:.1f}s ({event.actions} action(s)); the agent looks again", style="dim")
        elif isinstance(event, ErrorOccurred):
            if event.fatal:
                self._stop_spin()
        elif isinstance(event, Finished):
            self._stop_spin()
            self._result(event)

    def _step(self, event: StepFinished) -> None:
        r = event.record
        self._line((f"step {r.index:>2} ", "bold"), (r.url or "", "dim"))
        if r.thought:
            thought = " ".join(r.thought.split())  # one line; cut at 300 characters, and said to be cut
            self._line("   " + (thought if len(thought) <= 300 else thought[:299] + "…"), style="italic")
        if r.action is not None:
            line = Text("   → ", style="bold")
            line.append(r.action.describe(), style="cyan")
            for point in r.points:
                line.append(f"  @ {point}", style="magenta")
            self._print(line)
        for verdict in self._verdicts:
            self._print(verdict)
        self._verdicts = []
        t = r.timings
        self._line(
            f"   model {t.model:.2f}s · action {t.action:.2f}s · settle {t.settle:.2f}s · "
            f"screenshot {t.screenshot:.2f}s · overhead {t.overhead:.2f}s"
            + (f" · waited for you {t.waiting:.1f}s" if t.waiting >= 0.05 else "") + f" · tokens {r.usage.total_tokens}", style="dim",
        )
        if r.error:
            self._line(f"   error: {r.error}", style="red")
        elif isinstance(r.outcome, dict) and r.outcome.get("refused"):  # not performed: a sensitive action, a bound secret
            self._line(f"   refused: {r.outcome.get('error', '')}", style="red")

    def _result(self, event: Finished) -> None:
        res = event.result
        self._line(("result: ", "bold"), (res.status, _STATUS_STYLE.get(res.status, "bold")),
                   f"  ({res.steps} steps, {res.timings.seconds:.1f}s)")
        if res.answer is not None:
            self._line(("answer: ", "bold"), res.answer)
        if res.question:
            self._line(("question: ", "bold"), res.question)
        if res.reason:
            self._line(f"reason: {res.reason}", style="dim" if res.ok else "red")
        if res.run_dir:
            if os.path.exists(os.path.join(res.run_dir, "report.html")):  # (not in a directory deleted meanwhile)
                self._line(f"report: {res.run_dir}/report.html", style="dim")
        elif self._run_dir and res.error_kind == "unreachable":
            self._line(f"nothing recorded: the run never reached its model server ({self._run_dir} was not written)", style="dim")
        elif self._run_dir and not os.path.lexists(self._run_dir):  # (a browser that never started)
            self._line(f"nothing recorded: the run never started ({self._run_dir} was not written)", style="dim")
