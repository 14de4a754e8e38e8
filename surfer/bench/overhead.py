"""`surfer bench overhead`: per-step harness overhead (all time except model
calls) on the shipped demo site, with a stand-in model answering instantly
through the real HTTP path. Prints figures and writes JSON."""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from surfer.apps.signals import run_command

if TYPE_CHECKING:
    from surfer.agent.events import Event


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def measure_overhead(runs: int = 5, profile: str = "holotron", viewport: tuple[int, int] = (1280, 800), scale: float = 1.0) -> dict[str, Any]:
    from surfer.agent.config import AgentConfig, BrowserSettings
    from surfer.agent.events import StepFinished, StepStarted
    from surfer.agent.loop import Agent
    from surfer.apps.demo.oracle import DEMO_SITE, DEMO_TASK, demo_oracle, measure_targets
    from surfer.apps.demo.static_site import StaticSite
    from surfer.models.profiles import get_profile
    from surfer.models.standin import StandInProcess

    frame = get_profile(profile).frame
    steps: list[dict[str, float]] = []
    statuses: list[str] = []
    with StaticSite(DEMO_SITE) as site, tempfile.TemporaryDirectory() as tmp:
        centres = await measure_targets(site.base_url, viewport, scale)
        # The stand-in answers from a child process: its work is not the harness's.
        with StandInProcess(demo_oracle, centres, frame, viewport, scale) as server:
            config = AgentConfig(
                base_url=server.base_url, model=server.model, profile=profile,
                browser=BrowserSettings(viewport=viewport, device_scale_factor=scale),
            )
            for i in range(runs + 1):  # run 0 warms up Chromium and is not counted
                marks: dict[int, float] = {}

                def listen(event: Event, marks: dict[int, float] = marks) -> None:
                    if isinstance(event, StepStarted):
                        marks[event.index] = time.perf_counter()
                    elif isinstance(event, StepFinished):
                        r = event.record
                        wall = time.perf_counter() - marks[r.index]
                        if i and r.action is not None and r.action.type not in ("answer", "fail"):
                            steps.append({
                                "wall": wall, "model": r.timings.model, "overhead": wall - r.timings.model,
                                "screenshot": r.timings.screenshot, "encode": r.timings.encode,
                                "action": r.timings.action, "settle": r.timings.settle,
                            })

                agent = Agent(config, listeners=[listen])
                try:
                    result = await agent.run(DEMO_TASK, site.url("index.html"), out_dir=Path(tmp) / f"run-{i}")
                finally:
                    await agent.aclose()
                if i:
                    statuses.append(result.status)
    keys = ("overhead", "screenshot", "encode", "action", "settle", "model", "wall")
    summary = {k: {"p50": statistics.median(s[k] for s in steps), "p95": _pct([s[k] for s in steps], 0.95)} for k in keys} if steps else {}
    return {
        "benchmark": "overhead", "runs": runs, "profile": profile, "viewport": list(viewport), "scale": scale,
        "steps_measured": len(steps), "statuses": statuses, "seconds": summary,
    }


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("overhead")
    def overhead(
        runs: int = typer.Option(5, "--runs", min=1, help="Measured runs of the demo task (after one warm-up run)."),
        profile: str = typer.Option("holotron", "--profile", help="Profile whose image handling and frame to use."),
        out: Optional[Path] = typer.Option(None, "--out", help="JSON file to write (default .bench/overhead.json)."),
        startup_runs: int = typer.Option(5, "--startup-runs", min=0, help="Spawned `surfer --help` / `surfer run` pairs timed for start-up (0: skip)."),
        compare: Optional[Path] = typer.Option(
            None, "--compare", help="Another source tree (e.g. a checkout of an older commit): its start-up is timed in the same run, turn about."),
    ) -> None:
        """Per-step harness overhead (everything but model time) on the demo site, and start-up time."""
        report = run_command(measure_overhead(runs=runs, profile=profile))
        if startup_runs:
            from surfer.apps.demo.oracle import DEMO_SITE
            from surfer.bench.startup import measure_startup
            from surfer.apps.demo.static_site import StaticSite

            codes: dict[str, Optional[Path]] = {"this": None, **({"compare": compare.resolve()} if compare else {})}
            with StaticSite(DEMO_SITE) as site:
                report["startup"] = measure_startup(site.url("index.html"), startup_runs, codes)
        target = out or Path(".bench/overhead.json")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(report, indent=2))
        print(f"steps measured: {report['steps_measured']}  runs: {report['statuses']}")
        for key, value in report["seconds"].items():
            print(f"  {key:<11} p50 {value['p50'] * 1000:7.1f} ms   p95 {value['p95'] * 1000:7.1f} ms")
        for name, figures in report.get("startup", {}).items():
            print(
                f"  start-up ({name}{': ' + str(compare) if name == 'compare' else ''}): `surfer --help` {figures['help']:.2f} s, "
                f"start to first screenshot {figures['first_screenshot']:.2f} s (medians of {figures['runs']})"
            )
        print(f"wrote {target}")
        if not report["steps_measured"] or any(s != "success" for s in report["statuses"]):
            raise typer.Exit(1)
