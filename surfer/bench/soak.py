"""`surfer bench soak`: a long batch with faults injected while it runs, to
show that a batch loses nothing, records nothing twice and does not grow.

    surfer bench soak                       # 1,000 tasks at concurrency 32
    surfer bench soak --tasks 100 --concurrency 8 --outages 2,5 --chromium-kills 1

It runs `surfer batch` as a child process (the documented command, as a user
runs it) on the demo site's registration form against the stand-in model in
its own process, with a seeded share of model calls failing (HTTP 500,
malformed replies, calls never answered: those are cut by the task's time
limit). At set points of progress (tasks recorded) it stops the model server
and starts it again on the same port after each of `--outages` seconds, kills
Chromium (SIGKILL, as the out-of-memory killer would), and sends the batch
SIGTERM once, then resumes it by running the same command again. It samples
the batch's process tree (PSS of surfer, Playwright's driver and Chromium;
open descriptors; Chromium processes) every few seconds.

Reports tasks lost (no final record), tasks recorded more than once, final
statuses by cause, memory / descriptors / Chromium processes early (the
medians of the samples from 10 % of the tasks on, over a tenth of them) and
late (over the last tenth with every session still busy), disk per task and
steps/s. Prints a table and writes JSON."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import typer

from surfer.bench.faults import FaultRates, FaultyResponder, TreeUsage, kill_browser, tree_usage
from surfer.core.errors import ConfigError

SAMPLE_EVERY = 3.0  # seconds between samples of the process tree
POLL = 0.25


@dataclass(frozen=True)
class SoakPlan:
    tasks: int = 1000
    concurrency: int = 32
    steps: int = 4  # agent steps per task before its final answer
    max_seconds: float = 30.0  # each task's time limit: cuts the hung calls
    outages: tuple[float, ...] = (5.0, 40.0)  # model-server restarts: seconds down
    chromium_kills: int = 5
    sigterm: bool = True  # one SIGTERM, then a resume
    rates: FaultRates = field(default_factory=FaultRates)
    server_wait: float = 120.0
    seed: int = 7

    def check(self) -> None:
        if self.tasks < 10:
            raise ConfigError(f"--tasks must be at least 10, got {self.tasks}")
        if not 1 <= self.concurrency <= self.tasks:
            raise ConfigError(f"--concurrency must be between 1 and --tasks, got {self.concurrency}")
        if self.steps < 1 or self.max_seconds <= 0 or self.chromium_kills < 0:
            raise ConfigError("--steps must be at least 1, --max-seconds above 0, --chromium-kills at least 0")
        if any(s < 0 for s in self.outages):
            raise ConfigError(f"--outages are seconds down, at least 0: {self.outages}")
        if any(s >= self.server_wait for s in self.outages):
            raise ConfigError(f"an outage of {max(self.outages):g} s would pass --server-wait {self.server_wait:g} s")
        self.rates.check()

    def schedule(self) -> list[tuple[int, str, float]]:
        """(tasks recorded, fault, argument), in order: the SIGTERM early (so that the memory
        samples come from one process), outages and Chromium kills spread over the rest."""
        n = self.tasks
        events = [(max(1, round(0.04 * n)), "sigterm", 0.0)] if self.sigterm else []
        for i, down in enumerate(self.outages):
            events.append((round(n * (0.15 + 0.7 * i / max(1, len(self.outages)))), "outage", down))
        for i in range(self.chromium_kills):
            events.append((round(n * (0.2 + 0.65 * (i + 0.5) / self.chromium_kills)), "kill_chromium", 0.0))
        return sorted(events)

    @property
    def early_sample(self) -> int:
        """The first memory sample: at 10 % of the tasks, once the batch resumed after its SIGTERM has
        run a couple of rounds of sessions (its memory is warm)."""
        after_resume = max(1, round(0.04 * self.tasks)) + 2 * self.concurrency if self.sigterm else 0
        return min(self.tasks // 2, max(round(0.1 * self.tasks), after_resume))


class ModelServer:
    """The stand-in model in its own process on a fixed port, stopped and started again like a
    restarted vLLM server (a new process, the same address)."""

    def __init__(self, centres: Any, plan: SoakPlan, fault_log: Path) -> None:
        self.centres, self.plan, self.fault_log = centres, plan, fault_log
        self.port = _free_port()
        self.starts = 0
        self._process: Any = None

    def start(self) -> None:
        from surfer.models.standin import StandInProcess

        self.starts += 1
        process = StandInProcess(
            _responder, self.centres, self.plan.rates, self.plan.seed + self.starts, str(self.fault_log),
            options={"port": self.port},
        )
        self._process = process.__enter__()

    def stop(self) -> None:
        if self._process is not None:
            self._process.__exit__(None, None, None)
            self._process = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        return self._process.model


def _responder(centres: Any, rates: FaultRates, seed: int, log: str) -> FaultyResponder:
    return FaultyResponder(centres, "normalized_1000", rates, seed, log)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _recorded(results: Path) -> int:
    try:
        with results.open("rb") as f:
            return sum(1 for line in f if line.endswith(b"\n"))
    except FileNotFoundError:
        return 0


class Soak:
    """One soak run: the batch process, the model server, the faults and the samples."""

    def __init__(self, plan: SoakPlan, work: Path, site_url: str, server: ModelServer) -> None:
        self.plan, self.work, self.server = plan, work, server
        self.out = work / "out"
        self.results = self.out / "results.jsonl"
        self.tasks_file = work / "tasks.jsonl"
        with self.tasks_file.open("w", encoding="utf-8") as f:
            for i in range(plan.tasks):
                f.write(json.dumps({"id": f"t{i:04d}", "task": "Fill in the form.", "url": site_url}) + "\n")
        self.samples: list[TreeUsage] = []
        self.faults: list[dict[str, Any]] = []
        self.exits: list[int] = []
        self.batch_seconds = 0.0

    def command(self) -> list[str]:
        p = self.plan
        return [
            sys.executable, "-m", "surfer", "batch", str(self.tasks_file), "--out", str(self.out),
            "--concurrency", str(p.concurrency), "--base-url", self.server.base_url, "--model", self.server.model,
            "--max-steps", str(p.steps), "--max-seconds", f"{p.max_seconds:g}", "--no-validator", "--quiet",
            "--server-wait", f"{p.server_wait:g}",
        ]

    def _launch(self) -> subprocess.Popen[bytes]:
        log = (self.work / "batch.log").open("ab")
        return subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=self.work)

    def run(self) -> None:
        pending = self.plan.schedule()
        batch = self._launch()
        started = time.monotonic()
        outage: dict[str, Any] | None = None  # the outage under way, with the time the server comes back
        next_sample = 0.0
        try:
            while True:
                now = time.monotonic()
                done = _recorded(self.results)
                if outage is not None and now >= outage["until"]:
                    self.server.start()
                    outage["down_s"] = round(time.monotonic() - started - outage["at_s"], 1)
                    del outage["until"]
                    outage = None
                while pending and done >= pending[0][0] and (pending[0][1] != "outage" or outage is None):
                    _, fault, argument = pending.pop(0)
                    entry: dict[str, Any] = {"fault": fault, "at_task": done, "at_s": round(now - started, 1)}
                    self.faults.append(entry)
                    if fault == "sigterm":
                        batch.send_signal(signal.SIGTERM)
                        entry["exit"] = self._wait(batch, 120)
                        batch = self._launch()  # the resume: the same command again
                    elif fault == "outage":
                        self.server.stop()
                        outage = entry
                        entry["until"] = now + argument
                    else:
                        entry["pid"] = kill_browser(batch.pid)
                if now >= next_sample or (done >= self.plan.early_sample and not self._sampled_early()):
                    usage = tree_usage(batch.pid, done)
                    if usage is not None and batch.poll() is None:
                        self.samples.append(usage)
                    next_sample = now + SAMPLE_EVERY
                if batch.poll() is not None:
                    self.exits.append(batch.returncode)
                    break
                time.sleep(POLL)
        finally:
            if batch.poll() is None:
                os.killpg(batch.pid, signal.SIGKILL)
                batch.wait()
            if outage is not None:
                self.server.start()
            self.batch_seconds = time.monotonic() - started

    def _sampled_early(self) -> bool:
        return any(s.finished >= self.plan.early_sample for s in self.samples)

    def _wait(self, batch: subprocess.Popen[bytes], timeout: float) -> int:
        try:
            code = batch.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(batch.pid, signal.SIGKILL)
            code = batch.wait()
        self.exits.append(code)
        return code

    def report(self) -> dict[str, Any]:
        records = []
        for line in self.results.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        from surfer.fleet.batch import is_final

        by_id = Counter(r["id"] for r in records)
        final = {r["id"]: r for r in records if is_final(r)}
        expected = {f"t{i:04d}" for i in range(self.plan.tasks)}
        causes = Counter(f"{r['status']}" + (f" ({r['error_kind']})" if r.get("error_kind") else "") for r in final.values())
        n, c = self.plan.tasks, self.plan.concurrency
        early = _median_usage([u for u in self.samples if self.plan.early_sample <= u.finished <= self.plan.early_sample + n // 10])
        late = _median_usage([u for u in self.samples if n - c - n // 10 <= u.finished <= n - c])  # all sessions busy
        fault_log = self.work / "faults.log"
        injected = Counter(fault_log.read_text().split()) if fault_log.exists() else Counter()
        disk = sum(p.stat().st_size for p in self.out.rglob("*") if p.is_file())
        steps = sum(int(r.get("steps") or 0) for r in final.values())
        growth = (late["pss_mib"] / early["pss_mib"] - 1) if early and late and early["pss_mib"] else None
        return {
            "benchmark": "soak",
            "plan": {**asdict(self.plan), "outages": list(self.plan.outages)},
            "cpus": os.cpu_count(),
            "tasks": self.plan.tasks,
            "lost": len(expected - set(final)),
            "recorded_twice": sum(1 for n in by_id.values() if n > 1),
            "records": len(records),
            "final_statuses": dict(sorted(causes.items(), key=lambda kv: -kv[1])),
            "tasks_with_browser_crash": sum(1 for r in final.values() if r.get("browser_crashes")),
            "injected": {**{k: injected.get(k, 0) for k in ("http_500", "malformed", "hung")}, "faults": self.faults},
            "exits": self.exits,
            "usage_early": early,
            "usage_late": late,
            "pss_growth": None if growth is None else round(growth, 4),
            "samples": [s.to_dict() for s in self.samples],
            "disk_bytes_per_task": round(disk / self.plan.tasks),
            "batch_seconds": round(self.batch_seconds, 1),
            "steps": steps,
            "steps_per_s": round(steps / self.batch_seconds, 2) if self.batch_seconds else None,
        }


def _median_usage(samples: list[TreeUsage]) -> dict[str, Any] | None:
    """The median of each figure over a stretch of samples (one sample swings by ±10 % as pages
    load and close), with the stretch's first and last task counts."""
    if not samples:
        return None
    rows = [u.to_dict() for u in samples]
    middle = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k != "finished"}
    return {"from_task": rows[0]["finished"], "to_task": rows[-1]["finished"], "samples": len(rows), **middle}


def run_soak(plan: SoakPlan, keep: Path | None = None) -> dict[str, Any]:
    from surfer.apps.demo.oracle import DEMO_SITE
    from surfer.apps.demo.static_site import StaticSite
    from surfer.bench.responder import measure_centres

    plan.check()
    with StaticSite(DEMO_SITE) as site, tempfile.TemporaryDirectory(prefix="surfer-soak-") as tmp:
        work = keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        centres = asyncio.run(measure_centres(site.base_url))
        server = ModelServer(centres, plan, work / "faults.log")
        server.start()
        try:
            soak = Soak(plan, work, site.url("register.html"), server)
            soak.run()
        finally:
            server.stop()
        return soak.report()


def print_report(report: dict[str, Any], echo: Any) -> None:
    early, late = report["usage_early"] or {}, report["usage_late"] or {}
    echo(f"tasks {report['tasks']}: lost {report['lost']}, recorded twice {report['recorded_twice']}, "
         f"{report['records']} records; batch exits {report['exits']}")
    echo("final statuses: " + ", ".join(f"{k} {v}" for k, v in report["final_statuses"].items())
         + f"; tasks that met a browser crash: {report['tasks_with_browser_crash']}")
    injected = report["injected"]
    echo(f"injected: HTTP 500 {injected['http_500']}, malformed {injected['malformed']}, hung {injected['hung']}; "
         + "; ".join(f"{f['fault']} at task {f['at_task']}" + (f" ({f.get('down_s', f.get('planned_down_s'))} s down)"
                     if f["fault"] == "outage" else "") for f in injected["faults"]))
    echo(f"{'medians':>24} {'tasks':>9} {'PSS MiB':>8} {'surfer':>7} {'chromium':>9} {'fds':>5} {'surfer fds':>10} {'chromium procs':>15}")
    for label, u in (("early", early), ("late (all sessions busy)", late)):
        if u:
            echo(f"{label:>24} {u['from_task']:>4}-{u['to_task']:<4} {u['pss_mib']:>8.0f} {u['surfer_pss_mib']:>7.0f} "
                 f"{u['chromium_pss_mib']:>9.0f} {u['fds']:>5.0f} {u['surfer_fds']:>10.0f} {u['chromium_processes']:>15.0f}")
    growth = report["pss_growth"]
    echo(f"PSS growth {'-' if growth is None else f'{100 * growth:+.1f} %'}; disk {report['disk_bytes_per_task'] / 1024:.0f} KiB "
         f"per task; {report['steps']} steps in {report['batch_seconds']:.0f} s = {report['steps_per_s']} steps/s")


def _seconds_list(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"--outages must look like 5,40 (seconds), got {text!r}") from None


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("soak")
    def soak(
        tasks: int = typer.Option(1000, "--tasks", help="Tasks in the batch."),
        concurrency: int = typer.Option(32, "--concurrency", "-c", help="Concurrent sessions."),
        outages: str = typer.Option("5,40", "--outages", help="Model-server restarts: seconds down each ('' for none)."),
        chromium_kills: int = typer.Option(5, "--chromium-kills", help="Times Chromium is killed (SIGKILL)."),
        http_500: float = typer.Option(0.01, "--http-500", help="Share of model calls answered HTTP 500."),
        malformed: float = typer.Option(0.01, "--malformed", help="Share of model calls answered with malformed text."),
        hung: float = typer.Option(0.005, "--hung", help="Share of model calls never answered."),
        no_sigterm: bool = typer.Option(False, "--no-sigterm", help="Do not stop the batch with SIGTERM and resume it."),
        max_seconds: float = typer.Option(30.0, "--max-seconds", help="Each task's time limit (cuts hung calls)."),
        server_wait: float = typer.Option(120.0, "--server-wait", help="The batch's --server-wait."),
        keep: Optional[Path] = typer.Option(None, "--keep", help="Keep the batch's files in this directory."),
        out: Optional[Path] = typer.Option(None, "--out", help="JSON file to write (default .bench/soak.json)."),
    ) -> None:
        """A long batch with faults injected (server restarts, Chromium kills, bad replies, SIGTERM + resume):
        tasks lost and recorded twice, statuses, memory, descriptors and disk."""
        from surfer.apps.exit_codes import EXIT_USAGE

        try:
            plan = SoakPlan(
                tasks=tasks, concurrency=concurrency, outages=_seconds_list(outages), chromium_kills=chromium_kills,
                rates=FaultRates(http_500=http_500, malformed=malformed, hung=hung), sigterm=not no_sigterm,
                max_seconds=max_seconds, server_wait=server_wait,
            )
            report = run_soak(plan, keep)
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_USAGE) from None
        print_report(report, typer.echo)
        target = out or Path(".bench/soak.json")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(report, indent=2))
        typer.echo(f"wrote {target}")
