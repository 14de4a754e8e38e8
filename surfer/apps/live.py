"""The CLI's live view: a consumer of the agent's event stream that prints
each step's thought, action, target, resolved point and timings."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from surfer.agent.events import (
    ActionPerformed, ErrorOccurred, Event, Finished, ModelCalled, RunStarted, StepFinished, StepStarted, Validated,
)

_STATUS_STYLE = {"success": "bold green", "failed": "bold red", "error": "bold red", "limit": "bold yellow", "stuck": "bold yellow", "interrupted": "bold yellow"}


class LiveView:
    def __init__(self, console: Console) -> None:
        self.console = console
        self._status = None

    def _spin(self, message: str) -> None:
        if self._status is None:
            self._status = self.console.status(message)
            self._status.start()
        else:
            self._status.update(message)

    def _stop_spin(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def __call__(self, event: Event) -> None:
        c = self.console
        if isinstance(event, RunStarted):
            c.print(Text.assemble(("surfer ", "bold cyan"), event.task, style=""))
            where = f"  {event.url}" if event.url else ""
            backends = event.config.get("backends", {})
            c.print(f"[dim]{where}  profile={event.config.get('profile')}  policy={backends.get('policy', '?')}[/dim]")
            if event.run_dir:
                c.print(f"[dim]  run directory: {event.run_dir}[/dim]")
        elif isinstance(event, StepStarted):
            self._spin(f"step {event.index}: asking the policy…")
        elif isinstance(event, ModelCalled):
            note = f" [red]rejected: {event.call.error}[/red]" if event.call.error else ""
            self._spin(f"step {event.step}: {event.call.role} answered in {event.call.seconds:.2f}s{note}")
        elif isinstance(event, Validated):
            verdict = "[green]accepted[/green]" if event.verdict.accepted else "[red]rejected[/red]"
            self._stop_spin()
            c.print(f"   validator {verdict}: {event.verdict.reasons}")
        elif isinstance(event, ActionPerformed):
            pass  # printed with the step record, which has the timings
        elif isinstance(event, StepFinished):
            self._stop_spin()
            r = event.record
            c.print(Text.assemble((f"step {r.index:>2} ", "bold"), (r.url or "", "dim")))
            if r.thought:
                c.print(Text("   " + r.thought.strip().replace("\n", " ")[:300], style="italic"))
            if r.action is not None:
                line = Text("   → ", style="bold")
                line.append(r.action.describe(), style="cyan")
                for point in r.points:
                    line.append(f"  @ {point}", style="magenta")
                c.print(line)
            t = r.timings
            c.print(
                f"   [dim]model {t.model:.2f}s · action {t.action:.2f}s · settle {t.settle:.2f}s · "
                f"screenshot {t.screenshot:.2f}s · overhead {t.overhead:.2f}s · tokens {r.usage.total_tokens}[/dim]"
            )
            if r.error:
                c.print(f"   [red]error: {r.error}[/red]")
        elif isinstance(event, ErrorOccurred):
            if event.fatal:
                self._stop_spin()
        elif isinstance(event, Finished):
            self._stop_spin()
            res = event.result
            style = _STATUS_STYLE.get(res.status, "bold")
            c.print(Text.assemble(("result: ", "bold"), (res.status, style), f"  ({res.steps} steps, {res.timings.seconds:.1f}s)"))
            if res.answer is not None:
                c.print(Text.assemble(("answer: ", "bold"), res.answer))
            if res.reason:
                c.print(Text(f"reason: {res.reason}", style="dim" if res.ok else "red"))
            if res.run_dir:
                c.print(f"[dim]report: {res.run_dir}/report.html[/dim]")
