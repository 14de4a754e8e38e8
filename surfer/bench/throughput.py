"""`surfer bench throughput`: how many agent steps per second the harness
sustains with N sessions in one Chromium, the model answering instantly
(the stand-in server over real HTTP; `--model-latency` makes it wait), so
that what is measured is surfer: screenshots, encoding, actions, settle
waits, event writers.

Each session runs `--steps` steps on the demo site's registration form
(typing into the two fields, clicking the heading), then one final answer.
Reports steps/s, per-step harness overhead (p50/p95, split screenshot /
encode / action / settle), the process tree's CPU per step and cores busy
(with the speed-up ceiling those imply), peak memory of the whole process
tree (browser included) and scaling against concurrency 1. Writes JSON."""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from surfer.apps.signals import run_command

from surfer.bench.sampler import DriverCalls, TreeSampler
from surfer.core.errors import ConfigError
from surfer.bench.responder import VIEWPORT, StepResponder, measure_centres
from surfer.fleet.resources import ROLES

if TYPE_CHECKING:
    from surfer.agent.events import Event

def percentile(values: list[float], q: float) -> float | None:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None


async def measure_level(
    concurrency: int, steps: int, base_url: str, model: str, url: str, out_dir: Path | None, *, legacy: bool = False,
    trace: str = "off",
) -> dict[str, Any]:
    """`concurrency` sessions of `steps` steps each in one fresh Chromium
    (`legacy`: on the step path before issue 14, for a side-by-side figure)."""
    from surfer.agent.config import AgentConfig, BrowserSettings
    from surfer.agent.events import StepFinished, StepStarted
    from surfer.agent.loop import Agent
    from surfer.fleet.batch import shared_backends
    from surfer.fleet.browser_pool import SharedBrowser
    from surfer.tools.browser import BrowserEnvironment

    config = AgentConfig(
        base_url=base_url,
        model=model,
        max_steps=steps,
        max_repeats=steps + 1,  # the bench's scripted model cycles through the same three actions on purpose
        sensitive_actions="approve",
        validate_answers=False,
        browser=BrowserSettings(viewport=VIEWPORT),
    )
    backends = shared_backends(config, None)
    for backend in backends.values():
        if hasattr(backend, "typed_requests"):
            backend.typed_requests = legacy
    records: list[dict[str, float]] = []
    bounds: list[float] = []

    def listen(event: Event) -> None:
        if isinstance(event, StepStarted):
            bounds.append(time.perf_counter())
        elif (
            isinstance(event, StepFinished) and event.record.action is not None and event.record.action.type != "answer"
        ):
            t = event.record.timings
            bounds.append(time.perf_counter())
            records.append(
                {
                    "total": t.total,
                    "model": t.model,
                    "overhead": t.total - t.model,
                    "screenshot": t.screenshot,
                    "encode": t.encode,
                    "action": t.action,
                    "settle": t.settle,
                }
            )

    browser = SharedBrowser(legacy=legacy)
    statuses: dict[str, int] = {}
    with TreeSampler() as tree, DriverCalls() as calls:
        await browser.start()
        try:

            async def session(i: int) -> None:
                env = BrowserEnvironment(browser=browser.browser, viewport=VIEWPORT, legacy_step=legacy, trace=trace)
                agent = Agent(config, environment=env, backends=backends, listeners=[listen])
                try:
                    result = await agent.run("Fill in the form.", url, out_dir=out_dir / f"s{i}" if out_dir else False)
                    statuses[result.status] = statuses.get(result.status, 0) + 1
                finally:
                    await env.close()

            await asyncio.gather(*(session(i) for i in range(concurrency)))
        finally:
            await browser.close()
            for backend in {id(b): b for b in backends.values()}.values():
                await backend.aclose()
    window = (max(bounds) - min(bounds)) if bounds else 0.0
    cpu = tree.cpu_between(min(bounds), max(bounds)) if bounds else 0.0
    per_step = 1000 / len(records) if records else 0.0
    by_role = {role: round(tree.cpu_between(min(bounds), max(bounds), role) * per_step, 2) if bounds else None for role in ROLES}
    # Counted over the whole level (start-up and final answers included), per measured step.
    top_calls = sorted(calls.by_method.items(), key=lambda item: -item[1])[:12]
    cpus = os.cpu_count() or 1
    split = (
        {
            k: {"p50": statistics.median(r[k] for r in records), "p95": percentile([r[k] for r in records], 0.95)}
            for k in ("overhead", "screenshot", "encode", "action", "settle", "model", "total")
        }
        if records
        else {}
    )
    traced = sum(p.stat().st_size for p in out_dir.rglob("trace.zip")) if out_dir is not None and trace != "off" else None
    return {
        "concurrency": concurrency,
        "path": "legacy" if legacy else "new",
        "trace": trace,
        # with --trace on: the trace.zip bytes per agent step (screenshots, DOM snapshots, network)
        "trace_bytes_per_step": round(traced / len(records)) if traced is not None and records else None,
        "steps": len(records),
        "seconds": round(window, 3),
        "steps_per_s": len(records) / window if window else 0.0,
        "seconds_per_step": split,
        # CPU of the whole tree (harness, driver, Chromium, stand-in) while steps ran:
        # at `cores_busy` == cpus the level is CPU-bound, and `cpu_bound_steps_per_s`
        # is what this machine could give at this CPU cost per step.
        "cpu_seconds": round(cpu, 3),
        "cores_busy": round(cpu / window, 3) if window else 0.0,
        "cpu_ms_per_step": round(1000 * cpu / len(records), 2) if records else None,
        "cpu_ms_per_step_by_process": by_role,
        "driver_calls_per_step": round(calls.total / len(records), 2) if records else None,
        "driver_calls_by_method_per_step": {m: round(n / len(records), 2) for m, n in top_calls} if records else {},
        "cpu_bound_steps_per_s": cpus * len(records) / cpu if cpu else None,
        "sampler_cpu_seconds": round(tree.own_cpu, 3),
        "peak_rss_mib": round(tree.peak / 2**20, 1),
        "peak_pss_mib": round(tree.peak_pss / 2**20, 1),
        # Growth of the machine's memory in use (MemTotal - MemAvailable) over the level: includes page cache.
        "system_memory_growth_mib": None if tree.system_growth is None else round(tree.system_growth / 2**20, 1),
        "statuses": statuses,
    }


async def run_throughput(
    levels: list[int], steps: int, *, write_runs: bool = False, server_process: bool = True, model_latency: float = 0.0,
    compare_legacy: bool = False, trace: bool = False,
) -> dict[str, Any]:
    from surfer.apps.demo.oracle import DEMO_SITE
    from surfer.apps.demo.static_site import StaticSite
    from surfer.models.standin import StandInProcess, StandInServer

    if not levels or any(c < 1 for c in levels):
        raise ConfigError(f"--concurrency must list positive integers, got {levels}")
    if steps < 1:
        raise ConfigError(f"--steps must be at least 1, got {steps}")
    if model_latency < 0:
        raise ConfigError(f"--model-latency must be at least 0, got {model_latency:g}")
    results = []
    with StaticSite(DEMO_SITE) as site, tempfile.TemporaryDirectory() as tmp:
        centres = await measure_centres(site.base_url)
        # In a child process the stand-in server does not compete with the harness for the GIL.
        server: Any = (
            StandInProcess(StepResponder, centres, "normalized_1000", options={"delay": model_latency})
            if server_process
            else StandInServer(StepResponder(centres, "normalized_1000"), delay=model_latency)
        )
        with server:
            for c in levels:
                # turn about (a busy machine slows both): the legacy step path, or tracing off and on
                variants = [(True, "off"), (False, "off")] if compare_legacy else [(False, "off")]
                if trace:
                    variants.append((False, "on"))
                for legacy, tracing in variants:
                    name = f"c{c}{'-legacy' if legacy else ''}{'-trace' if tracing == 'on' else ''}"
                    out_dir = Path(tmp) / name if write_runs or tracing == "on" else None
                    results.append(await measure_level(
                        c, steps, server.base_url, server.model, site.url("register.html"), out_dir, legacy=legacy,
                        trace=tracing,
                    ))
    for r in results:
        base = next((b["steps_per_s"] for b in results
                     if b["concurrency"] == 1 and b["path"] == r["path"] and b["trace"] == r["trace"]), None)
        r["speedup_vs_1"] = r["steps_per_s"] / base if base else None
        r["efficiency"] = r["steps_per_s"] / (base * r["concurrency"]) if base else None
        # The most any harness could reach on these cores at this level's CPU cost per step.
        r["speedup_ceiling"] = r["cpu_bound_steps_per_s"] / base if base and r["cpu_bound_steps_per_s"] else None
    return {
        "benchmark": "throughput",
        "steps_per_session": steps,
        "model_latency": model_latency,
        "cpus": os.cpu_count(),
        "write_runs": write_runs,
        "server_process": server_process,
        "compare_legacy": compare_legacy,
        "trace": trace,
        "levels": results,
    }


def throughput_page(report: dict[str, Any]) -> str:
    """The report as a self-contained HTML page: steps/s and per-step overhead against concurrency."""
    from surfer.bench.charts import line_chart, page

    levels = report["levels"]
    xs = [r["concurrency"] for r in levels]

    def ms(key: str, q: str) -> list[float | None]:
        values = [(r["seconds_per_step"].get(key) or {}).get(q) for r in levels]
        return [None if v is None else round(1000 * v, 2) for v in values]

    charts = [
        line_chart("Steps per second", xs, {"steps/s": [r["steps_per_s"] for r in levels]},
                   x_label="concurrent sessions", y_label="steps/s"),
        line_chart("Harness overhead per step", xs, {"p50": ms("overhead", "p50"), "p95": ms("overhead", "p95")},
                   x_label="concurrent sessions", y_label="ms per step"),
    ]
    intro = (f"{report['steps_per_session']} steps per session, model latency {report['model_latency']:g} s, "
             f"{report['cpus']} CPUs; run directories {'written' if report['write_runs'] else 'not written'}.")
    return page("surfer bench throughput", intro, charts)


def parse_levels(text: str, flag: str = "--concurrency") -> list[int]:
    """Comma-separated session counts, each at least 1 (`flag`: the option named in the error)."""
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"{flag} must look like 1,8,32,64, got {text!r}") from None
    if not levels or min(levels) < 1:
        raise ConfigError(f"{flag} must list positive integers, got {text!r}")
    return levels


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("throughput")
    def throughput(
        concurrency: str = typer.Option("1,8,32,64", "--concurrency", "-c", help="Comma-separated session counts."),
        steps: int = typer.Option(10, "--steps", help="Steps per session."),
        write_runs: bool = typer.Option(
            False, "--write-runs", help="Also write run directories (measures the trajectory writer)."
        ),
        in_process: bool = typer.Option(
            False, "--in-process-server", help="Run the stand-in server in this process (shares the GIL)."
        ),
        model_latency: float = typer.Option(
            0.0, "--model-latency", help="Seconds the stand-in waits before each answer (0: instant; a loaded server: ~0.3-1)."
        ),
        compare_legacy: bool = typer.Option(
            False, "--compare-legacy", help="Run each level also on the step path before issue 14 (Playwright screenshots, "
            "key-by-key typing, typed SDK requests), turn about, for a side-by-side figure."),
        trace: str = typer.Option(
            "off", "--trace", metavar="on|off", help="on: run each level also with Playwright tracing on, turn about "
            "with it off: what a trace costs per step in CPU ms and bytes."),
        out: Optional[Path] = typer.Option(None, "--out", help="JSON file to write (default .bench/throughput.json)."),
        ray: Optional[str] = typer.Option(
            None, "--ray", metavar="ADDRESS",
            help="Compare the local batch runner with `surfer batch --ray` on this cluster (local:N: N nodes here).",
        ),
    ) -> None:
        """Agent steps/s, harness overhead and peak RSS at several concurrency levels (stand-in model)."""
        import json

        from surfer.apps.exit_codes import EXIT_USAGE

        if ray is not None:
            from surfer.bench.cluster import print_comparison, run_ray_comparison

            try:
                report = run_command(run_ray_comparison(parse_levels(concurrency), steps, ray, model_latency=model_latency))
            except ConfigError as exc:
                typer.echo(f"error: {exc}", err=True)
                raise typer.Exit(EXIT_USAGE) from None
            print_comparison(report, typer.echo)
            target = out or Path(".bench/throughput-ray.json")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(report, indent=2))
            typer.echo(f"wrote {target}")
            return

        if trace not in ("on", "off"):
            typer.echo(f"error: --trace must be on or off, got {trace!r}", err=True)
            raise typer.Exit(EXIT_USAGE)
        try:
            report = run_command(
                run_throughput(
                    parse_levels(concurrency), steps, write_runs=write_runs, server_process=not in_process,
                    model_latency=model_latency, compare_legacy=compare_legacy, trace=trace == "on",
                )
            )
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_USAGE) from None
        typer.echo(
            f"{'sessions':>8} {'path':>6} {'steps/s':>8} {'speedup':>8} {'ceiling':>8} {'cores':>6} {'CPU ms/step':>11} "
            f"{'overhead p50/p95 ms':>20} {'shot':>6} {'encode':>6} {'action':>6} {'settle':>6} {'peak RSS / PSS / machine +':>26}"
        )
        for r in report["levels"]:
            s = r["seconds_per_step"]
            ms = {k: (s[k]["p50"] or 0) * 1000 for k in s}
            typer.echo(
                f"{r['concurrency']:>8} {r['path'] + ('+trace' if r['trace'] == 'on' else ''):>6} {r['steps_per_s']:>8.2f} {(r['speedup_vs_1'] or 0):>7.2f}x "
                f"{(r['speedup_ceiling'] or 0):>7.2f}x {r['cores_busy']:>6.2f} {(r['cpu_ms_per_step'] or 0):>11.0f} "
                f"{ms.get('overhead', 0):>9.0f} / {(s.get('overhead', {}).get('p95') or 0) * 1000:<8.0f} "
                f"{ms.get('screenshot', 0):>6.0f} {ms.get('encode', 0):>6.0f} {ms.get('action', 0):>6.0f} "
                f"{ms.get('settle', 0):>6.0f} {r['peak_rss_mib']:>6.0f} / {r['peak_pss_mib']:.0f} / "
                f"{r['system_memory_growth_mib'] if r['system_memory_growth_mib'] is not None else '-'} MiB"
            )
        typer.echo(f"{'sessions':>8} {'path':>6} {'CPU ms/step: surfer':>20} {'driver':>7} {'chromium':>9} {'other':>6} {'driver calls/step':>18}")
        for r in report["levels"]:
            split = r["cpu_ms_per_step_by_process"]
            typer.echo(
                f"{r['concurrency']:>8} {r['path'] + ('+trace' if r['trace'] == 'on' else ''):>6} {split['surfer'] or 0:>20.1f} {split['driver'] or 0:>7.1f} "
                f"{split['chromium'] or 0:>9.1f} {split['other'] or 0:>6.1f} {r['driver_calls_per_step'] or 0:>18.1f}"
            )
        for r in report["levels"]:
            if r["trace_bytes_per_step"] is not None:
                typer.echo(f"{r['concurrency']:>8} sessions, tracing on: {r['cpu_ms_per_step'] or 0:.0f} CPU ms/step, "
                           f"{r['trace_bytes_per_step'] / 1024:.0f} KiB of trace per step")
        target = out or Path(".bench/throughput.json")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(report, indent=2))
        chart = target.with_suffix(".html")
        chart.write_text(throughput_page(report), encoding="utf-8")
        typer.echo(f"wrote {target} and {chart}")
