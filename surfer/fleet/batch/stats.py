"""Live statistics of a batch and their terminal display."""

from __future__ import annotations

import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any



from surfer.agent.events import Event, ModelCalled, StepFinished
from surfer.models.affinity import current_session
from surfer.models.outage import outage_note


@dataclass
class BatchStats:
    """An Agent listener shared by every session, and a rich renderable."""

    total: int = 0
    skipped: int = 0  # tasks with a final outcome from an earlier run (resume): not run again
    skipped_succeeded: int = 0  # ... of which succeeded, and ended in error: the success rate and errors shown
    skipped_errors: int = 0  # are the batch's, earlier runs' tasks included, as done/total is
    done: int = 0
    succeeded: int = 0
    errors: int = 0
    unfinished: int = 0  # attempts that ended no task (server gone, stopped): they run again on resume
    running: int = 0
    browser_crashes: int = 0  # attempts ended by a crashed browser or page (retried, or recorded as errors)
    steps: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    step_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=2000))
    waiting: Any = None  # () -> the sessions' model calls in flight (surfer.agent.events.Waiting)
    latencies: dict[str, list[float]] = field(default_factory=dict)  # model-call seconds per role, since the last metrics line
    servers: Any = None  # () -> each model server's state, with several (BatchServers.snapshot)
    server_steps: dict[int, int] = field(default_factory=dict)  # steps by the sessions on each server (its number)
    _spin: Any = None

    def model_latency(self, role: str, seconds: float) -> None:
        self.latencies.setdefault(role, []).append(seconds)

    def metrics(self) -> dict[str, Any]:
        """One line of metrics.jsonl (latency percentiles over the calls since the previous line)."""
        from surfer.fleet.sessions import percentiles

        latencies, self.latencies = self.latencies, {}
        return {
            "t": round(time.time(), 3), "elapsed": round(time.monotonic() - self.started, 3), "steps": self.steps,
            "done": self.done, "succeeded": self.succeeded, "errors": self.errors, "unfinished": self.unfinished,
            "running": self.running, "skipped": self.skipped, "skipped_succeeded": self.skipped_succeeded,
            "browser_crashes": self.browser_crashes,
            "latency": {role: percentiles(values) for role, values in latencies.items()},
            **({"server": note} if (note := outage_note()) else {}),  # "waiting for the model server at URL since HH:MM:SS"
            **({"servers": rows} if (rows := self.server_rows()) else {}),
        }

    def server_rows(self) -> list[dict[str, Any]]:
        """With several model servers: each one's state, sessions, waiting requests, steps and steps/s."""
        rows = self.servers() if self.servers else []
        elapsed = max(1e-9, time.monotonic() - self.started)
        for row in rows:
            row["steps"] = steps = self.server_steps.get(row["server"], 0)
            row["steps_per_s"] = round(steps / elapsed, 4)
        return rows

    def __call__(self, event: Event) -> None:
        if isinstance(event, StepFinished):
            self.steps += 1
            self.step_seconds.append(event.record.timings.total)
            session = current_session()  # the session whose step it was (listeners run in its context)
            if session is not None and session.server is not None:
                number = session.server.index
                self.server_steps[number] = self.server_steps.get(number, 0) + 1
        elif isinstance(event, ModelCalled):
            self.tokens += event.call.usage.total_tokens

    def resumed(self, finished: list[dict[str, Any]]) -> None:
        """The results lines of the tasks an earlier run finished (skipped now): counted in the batch's figures."""
        self.skipped = len(finished)
        self.skipped_succeeded = sum(r.get("status") == "success" for r in finished)
        self.skipped_errors = sum(r.get("status") == "error" for r in finished)

    def task_done(self, status: str) -> None:
        self.done += 1
        self.succeeded += status == "success"
        self.errors += status == "error"

    def snapshot(self) -> dict[str, Any]:
        elapsed = max(1e-9, time.monotonic() - self.started)
        times = sorted(self.step_seconds)
        return {
            "total": self.total,
            "skipped": self.skipped,
            "done": self.done,
            "succeeded": self.succeeded,
            "errors": self.errors,
            "unfinished": self.unfinished,
            "running": self.running,
            "browser_crashes": self.browser_crashes,
            # over every task with a final outcome, the earlier runs' (skipped) included, as done/total counts them
            "success_rate": (self.succeeded + self.skipped_succeeded) / ended if (ended := self.done + self.skipped) else None,
            "batch_errors": self.errors + self.skipped_errors,
            "steps": self.steps,
            "steps_per_s": self.steps / elapsed,
            "tokens_per_s": self.tokens / elapsed,
            "step_p50": statistics.median(times) if times else None,
            "step_p95": times[min(len(times) - 1, int(0.95 * len(times)))] if times else None,
            "seconds": elapsed,
        }

    def line(self) -> str:
        s = self.snapshot()
        rate = f"{s['success_rate']:.0%}" if s["success_rate"] is not None else "-"
        p50 = f"{s['step_p50']:.2f}s" if s["step_p50"] is not None else "-"
        p95 = f"{s['step_p95']:.2f}s" if s["step_p95"] is not None else "-"
        return (
            f"done {s['done'] + s['skipped']}/{s['total']} (skipped {s['skipped']}) · running {s['running']} · "
            f"success {rate} · errors {s['batch_errors']} · "
            + (f"unfinished {s['unfinished']} · " if s["unfinished"] else "")
            + f"browser crashes {s['browser_crashes']} · {s['steps_per_s']:.2f} steps/s · "
            f"{s['tokens_per_s']:.0f} tokens/s · step p50 {p50} p95 {p95}"
        )

    def waiting_line(self) -> str | None:
        """The model calls in flight: how many per role, and the longest wait (or the server's outage)."""
        note = outage_note()
        if note:
            return note
        waiting = self.waiting() if self.waiting else []
        if not waiting:
            return None
        roles: dict[str, int] = {}
        for w in waiting:
            roles[w.role] = roles.get(w.role, 0) + 1
        longest = max(time.monotonic() - w.since for w in waiting)
        return "asking the model: " + " · ".join(f"{role} ×{n}" for role, n in roles.items()) + f" · longest {longest:.0f}s"

    def __rich__(self) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        grid = Table.grid(padding=(0, 1))
        grid.add_row(ProgressBar(total=max(1, self.total), completed=self.done + self.skipped, width=40), Text(self.line()))
        for row in self.server_rows():
            grid.add_row(Text(f"server {row['server']}", style="dim"), Text(server_line(row)))
        waiting = self.waiting_line()
        if waiting:
            grid.add_row(self._spinner, Text(waiting))
        return grid

    @property
    def _spinner(self) -> Any:
        if self._spin is None:
            from rich.spinner import Spinner

            self._spin = Spinner("dots")
        return self._spin


def server_line(row: dict[str, Any]) -> str:
    """One server's line of the live display."""
    waiting = "-" if row.get("waiting") is None else f"{row['waiting']:g}"
    state = "" if row["state"] == "up" else f" · {row['state']}"
    return (f"{row['base_url']} · {row['sessions']} sessions · {row['steps_per_s']:.2f} steps/s · "
            f"waiting {waiting}{state}")
