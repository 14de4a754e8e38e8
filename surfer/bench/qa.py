"""`surfer bench qa`: the sample suite's wall time on a first run (every step
with the model; the stand-in oracle answers after `--model-latency` seconds,
in a child process) against a re-run from the action cache, in one command;
`--runs` repetitions (each from an empty cache), medians compared."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from surfer.agent.config import AgentConfig

from surfer.qa.cache import ActionCache
from surfer.qa.outcomes import QaSummary
from surfer.qa.runner import QaRunner, SuiteRun
from surfer.qa.suite import load_suite

BENCH_PASSWORD = "bench-password-1"


def _figures(summaries: list[QaSummary]) -> dict[str, Any]:
    """Wall times of every repetition and their median; the rest from the median one."""
    times = [s.seconds for s in summaries]
    summary = sorted(summaries, key=lambda s: s.seconds)[len(summaries) // 2]
    return {
        "seconds": round(statistics.median(times), 3),
        "runs": [round(t, 3) for t in times],
        "passed": summary.count("passed", "flaky"),
        "cases": len(summary.cases),
        "model_calls": sum(c.model_calls for c in summary.cases),
        "steps_from_cache": sum(c.last.cached_steps for c in summary.cases if c.last),
        "steps": sum(len(c.last.steps) for c in summary.cases if c.last),
        "case_seconds": {c.id: round(c.seconds, 3) for c in summary.cases},
    }


async def _run(config: AgentConfig, suite_path: Path, site_url: str, out: Path, cache: ActionCache,
               said: set[str]) -> QaSummary:
    """One run of the suite; a warning (its secret may be typed on any site) said once a benchmark, not once a run
    (`said`: what was said already)."""
    environ = {**os.environ, "LIBRARY_PASSWORD": BENCH_PASSWORD}
    suite = load_suite(suite_path, {"demo_url": site_url}, environ)
    runner = QaRunner([SuiteRun(suite, config)], out, cache=cache, environ=environ)

    def warn(text: str) -> None:
        if text not in said:
            said.add(text)
            print(f"warning: {text}", file=sys.stderr)

    runner.warn_unbound_secrets(warn)
    return await runner.run()


def bench_qa(model_latency: float, out: Path, runs: int = 3, suite_path: Path | None = None) -> dict[str, Any]:
    from surfer.apps import options

    from surfer.apps.demo.static_site import StaticSite
    from surfer.models.profiles import get_profile
    from surfer.models.standin import StandInProcess

    from surfer.apps.demo.qa_oracle import DEMO_SITE, SAMPLE_SUITE, measure_qa_targets, qa_oracle

    console = options.console()
    suite_path = suite_path or SAMPLE_SUITE
    with StaticSite(DEMO_SITE) as site, tempfile.TemporaryDirectory(prefix="surfer-bench-qa-") as tmp:
        centres = asyncio.run(measure_qa_targets(site.base_url))
        frame = get_profile("holotron").frame
        with StandInProcess(qa_oracle, centres, frame, options={"delay": model_latency}) as server:
            config = AgentConfig(base_url=server.base_url, model=server.model, profile="holotron")
            first, cached = [], []
            said: set[str] = set()
            for k in range(runs):  # each repetition: an empty cache, a first run, a re-run from its cache
                cache = ActionCache(Path(tmp) / f"cache-{k}")
                first.append(asyncio.run(_run(config, suite_path, site.base_url, Path(tmp) / f"first-{k}", cache, said)))
                cached.append(asyncio.run(_run(config, suite_path, site.base_url, Path(tmp) / f"cached-{k}", cache, said)))
    report: dict[str, Any] = {
        "suite": str(suite_path), "model_latency": model_latency, "repetitions": runs, "machine": platform.machine(),
        "cpus": os.cpu_count(), "first_run": _figures(first), "cached_run": _figures(cached),
    }
    report["speedup"] = round(report["first_run"]["seconds"] / report["cached_run"]["seconds"], 2)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    for name in ("first_run", "cached_run"):
        f = report[name]
        console.print(f"{name.replace('_', ' ')}: {f['seconds']:.2f} s median of {runs} · {f['passed']}/{f['cases']} passed · "
                      f"{f['model_calls']} model call(s) · {f['steps_from_cache']}/{f['steps']} steps from the cache")
    console.print(f"cached re-run is {report['speedup']}x faster (model latency {model_latency:g} s) · {out}")
    return report


def register(bench_app: Any) -> None:
    import typer

    @bench_app.command("qa")
    def qa(
        model_latency: float = typer.Option(0.5, "--model-latency", min=0.0, help="Seconds the stand-in model takes per answer."),
        out: Path = typer.Option(Path(".bench/qa.json"), "--out", help="Where to write the figures (JSON)."),
        runs: int = typer.Option(3, "--runs", min=1, help="Repetitions (first run + cached re-run each); medians compared."),
    ) -> None:
        """The sample suite's wall time: a first run (every step with the model) vs a re-run from the action cache."""
        bench_qa(model_latency, out, runs)
