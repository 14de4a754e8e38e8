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
import itertools
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from surfer.apps.signals import run_command

from surfer.core.errors import ConfigError

if TYPE_CHECKING:
    from surfer.agent.events import Event
    from surfer.core.actions import CssPoint

VIEWPORT = (1280, 800)
_FIELDS = ("the 'Full name' text field", "the 'Email address' text field")


def _pct(values: list[float], q: float) -> float | None:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None


def _psutil() -> Any:
    try:
        import psutil
    except ImportError:
        raise ConfigError(
            "the throughput benchmark reads memory and CPU with psutil: pip install 'surfer-agent[bench]'"
        ) from None
    return psutil


def _tree() -> list[Any]:
    me = _psutil().Process()
    return [me, *me.children(recursive=True)]


def process_tree_memory() -> tuple[int, int]:
    """(RSS, PSS) in bytes summed over this process and all its descendants.
    RSS counts pages shared between Chromium's processes once per process;
    PSS splits them, so it is the fairer total (Linux only; else equal to RSS).
    Reading PSS walks every page table: ~2 ms of CPU per Chromium process."""
    psutil = _psutil()
    rss = pss = 0
    for proc in _tree():
        try:
            info = proc.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        rss += info.rss
        pss += getattr(info, "pss", info.rss)
    return rss, pss


def system_memory_used() -> int | None:
    """MemTotal - MemAvailable in bytes (Linux), the machine's memory in use."""
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
        return (int(fields["MemTotal"].split()[0]) - int(fields["MemAvailable"].split()[0])) * 1024
    except (OSError, KeyError, ValueError):
        return None


def process_role(proc: Any) -> str:
    """Which part of the harness a process of the tree is: 'surfer' (this
    process), 'driver' (Playwright's Node.js driver), 'chromium' (the browser
    and its renderers, GPU and utility processes) or 'other' (the stand-in)."""
    import os as _os

    if proc.pid == _os.getpid():
        return "surfer"
    try:
        name = proc.name().lower()
        exe = (proc.exe() or "").lower()
    except Exception:  # noqa: BLE001 - gone, or not ours to read
        return "other"
    if name == "node" or exe.endswith("/node"):
        return "driver"
    if "chrom" in name or "chrom" in exe or "headless" in name:
        return "chromium"
    return "other"


ROLES = ("surfer", "driver", "chromium", "other")


class DriverCalls:
    """Counts the messages this process sends to Playwright's driver (each a
    round trip through Node.js, and most a DevTools command to Chromium), by
    method, while in use. `__waitInfo__` (fire-and-forget bookkeeping) is
    counted apart."""

    def __init__(self) -> None:
        self.by_method: dict[str, int] = {}
        self._original: Any = None

    @property
    def total(self) -> int:
        return sum(n for m, n in self.by_method.items() if m != "__waitInfo__")

    def __enter__(self) -> "DriverCalls":
        from playwright._impl.connection import Connection

        original = self._original = Connection.send_message_to_server
        counts = self.by_method

        def counted(connection: Any, obj: Any, method: str, params: Any, options: Any) -> Any:
            key = f"{getattr(obj, '_type', '?')}.{method}" if method != "__waitInfo__" else method
            counts[key] = counts.get(key, 0) + 1
            return original(connection, obj, method, params, options)

        Connection.send_message_to_server = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from playwright._impl.connection import Connection

        Connection.send_message_to_server = self._original  # type: ignore[method-assign]


class TreeSampler:
    """Samples the process tree (this process, Chromium, the driver, the
    stand-in) in a thread: CPU seconds over time, peak RSS, peak PSS.

    CPU and RSS are cheap to read and sampled every `interval`; PSS costs
    ~75 ms of CPU per sweep at 32 sessions, so it is read only every
    `pss_every` seconds or when RSS grows 10% past its peak. The sampler's
    own CPU is reported (`own_cpu`) so a reader can see what measuring cost."""

    def __init__(self, interval: float = 0.25, pss_every: float = 3.0) -> None:
        self.interval, self.pss_every = interval, pss_every
        self._cpu_by_pid: dict[int, float] = {}
        self._cpu_base: dict[int, float] = {}
        self._role_by_pid: dict[int, str] = {}
        self.samples: list[tuple[float, float]] = []  # (perf_counter, CPU seconds since start)
        self.role_samples: dict[str, list[tuple[float, float]]] = {role: [] for role in ROLES}
        self.peak = self.peak_pss = 0
        self.system_base = system_memory_used()
        self.system_peak = self.system_base
        self.own_cpu = 0.0
        self._last_pss = float("-inf")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)

    def _sample(self, *, force_pss: bool = False) -> None:
        psutil = _psutil()
        rss = 0
        for proc in _tree():
            try:
                with proc.oneshot():
                    times, mem = proc.cpu_times(), proc.memory_info()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            self._cpu_by_pid[proc.pid] = times.user + times.system  # exited processes keep their last value
            if proc.pid not in self._role_by_pid:
                self._role_by_pid[proc.pid] = process_role(proc)
            rss += mem.rss
        now = time.perf_counter()
        self.samples.append((now, sum(self._cpu_by_pid.values()) - sum(self._cpu_base.values())))
        by_role = dict.fromkeys(ROLES, 0.0)
        for pid, cpu in self._cpu_by_pid.items():
            by_role[self._role_by_pid.get(pid, "other")] += cpu - self._cpu_base.get(pid, 0.0)
        for role, cpu in by_role.items():
            self.role_samples[role].append((now, cpu))
        if force_pss or rss > self.peak * 1.1 or now - self._last_pss >= self.pss_every:
            full_rss, pss = process_tree_memory()
            self.peak_pss, self._last_pss = max(self.peak_pss, pss), now
            rss = max(rss, full_rss)
        self.peak = max(self.peak, rss)
        used = system_memory_used()
        if used is not None and self.system_peak is not None:
            self.system_peak = max(self.system_peak, used)

    @property
    def system_growth(self) -> int | None:
        """How much more of the machine's memory was in use at the peak than at the start."""
        return None if self.system_base is None or self.system_peak is None else self.system_peak - self.system_base

    def _run(self) -> None:
        started = time.thread_time()
        while not self._stop.wait(self.interval):
            self._sample()
        self.own_cpu = time.thread_time() - started

    def cpu_between(self, start: float, end: float, role: str | None = None) -> float:
        """CPU seconds the tree (or its processes of one `role`) used between two
        perf_counter times (interpolated)."""
        points = self.samples if role is None else self.role_samples[role]

        def at(t: float) -> float:
            for (t0, c0), (t1, c1) in zip(points, points[1:]):
                if t0 <= t <= t1:
                    return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.0)
            return points[0][1] if t < points[0][0] else points[-1][1]

        return at(end) - at(start) if points else 0.0

    def __enter__(self) -> "TreeSampler":
        self._sample(force_pss=True)
        self._cpu_base = dict(self._cpu_by_pid)
        now = time.perf_counter()
        self.samples = [(now, 0.0)]
        self.role_samples = {role: [(now, 0.0)] for role in ROLES}
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample(force_pss=True)


class StepResponder:
    """Stand-in model: the policy types into the form fields and clicks the
    heading in turn (answering at the step limit), the localizer answers
    with each target's measured centre."""

    def __init__(self, centres: dict[str, CssPoint], frame: str) -> None:
        from surfer.apps.demo import frame_mapper

        self.centres = centres
        self.to_frame = frame_mapper(frame, VIEWPORT, 1.0)  # type: ignore[arg-type]
        self._turn = itertools.count()

    def __call__(self, request: Any) -> dict[str, Any]:
        if request.role == "localizer":
            target = request.text.split("Target: ", 1)[-1].split("\n", 1)[0].strip()
            x, y = self.to_frame(self.centres[target], request.image_size(-1))
            return {"x": x, "y": y}
        if "limit has been reached" in request.text:
            return {"thought": "Done.", "notes": "", "action": {"type": "answer", "text": "done"}}
        turn = next(self._turn) % 3
        if turn == 2:
            action: dict[str, Any] = {"type": "click", "target": "the page heading"}
        else:
            action = {"type": "type", "text": f"value {turn}", "target": _FIELDS[turn]}
        return {"thought": "Keep working.", "notes": "", "action": action}


async def _centres(site_url: str) -> dict[str, CssPoint]:
    from surfer.apps.demo import measure_targets
    from surfer.core.actions import CssPoint

    centres = await measure_targets(site_url, VIEWPORT)
    heading = centres["the 'Full name' text field"]
    centres["the page heading"] = CssPoint(x=heading.x, y=30.0)  # the header bar: a click that changes nothing
    return {k: v for k, v in centres.items() if k in (*_FIELDS, "the page heading")}


async def measure_level(
    concurrency: int, steps: int, base_url: str, model: str, url: str, out_dir: Path | None, *, legacy: bool = False,
) -> dict[str, Any]:
    """`concurrency` sessions of `steps` steps each in one fresh Chromium
    (`legacy`: on the step path before issue 14, for a side-by-side figure)."""
    from surfer.agent.config import AgentConfig, BrowserSettings
    from surfer.agent.events import StepFinished, StepStarted
    from surfer.agent.loop import Agent
    from surfer.apps.batch import shared_backends
    from surfer.tools.browser_pool import SharedBrowser
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
                env = BrowserEnvironment(browser=browser.browser, viewport=VIEWPORT, legacy_step=legacy)
                agent = Agent(config, environment=env, backends=backends, listeners=[listen])
                try:
                    result = await agent.run("Fill in the form.", url, out_dir=out_dir / f"s{i}" if out_dir else None)
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
            k: {"p50": statistics.median(r[k] for r in records), "p95": _pct([r[k] for r in records], 0.95)}
            for k in ("overhead", "screenshot", "encode", "action", "settle", "model", "total")
        }
        if records
        else {}
    )
    return {
        "concurrency": concurrency,
        "path": "legacy" if legacy else "new",
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
    compare_legacy: bool = False,
) -> dict[str, Any]:
    from surfer.apps.demo import DEMO_SITE
    from surfer.apps.static_site import StaticSite
    from surfer.models.standin import StandInProcess, StandInServer

    if not levels or any(c < 1 for c in levels):
        raise ConfigError(f"--concurrency must list positive integers, got {levels}")
    if steps < 1:
        raise ConfigError(f"--steps must be at least 1, got {steps}")
    if model_latency < 0:
        raise ConfigError(f"--model-latency must be at least 0, got {model_latency:g}")
    results = []
    with StaticSite(DEMO_SITE) as site, tempfile.TemporaryDirectory() as tmp:
        centres = await _centres(site.base_url)
        # In a child process the stand-in server does not compete with the harness for the GIL.
        server: Any = (
            StandInProcess(StepResponder, centres, "normalized_1000", options={"delay": model_latency})
            if server_process
            else StandInServer(StepResponder(centres, "normalized_1000"), delay=model_latency)
        )
        with server:
            for c in levels:
                for legacy in (True, False) if compare_legacy else (False,):  # turn about: a busy machine slows both
                    out_dir = Path(tmp) / f"c{c}{'-legacy' if legacy else ''}" if write_runs else None
                    results.append(await measure_level(
                        c, steps, server.base_url, server.model, site.url("register.html"), out_dir, legacy=legacy,
                    ))
    for r in results:
        base = next((b["steps_per_s"] for b in results if b["concurrency"] == 1 and b["path"] == r["path"]), None)
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
        "levels": results,
    }


def throughput_page(report: dict[str, Any]) -> str:
    """The report as a self-contained HTML page: steps/s and per-step overhead against concurrency."""
    from surfer.apps.charts import line_chart, page

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


def parse_levels(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"--concurrency must look like 1,8,32,64, got {text!r}") from None


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
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
        out: Optional[Path] = typer.Option(None, "--out", help="JSON file to write (default .bench/throughput.json)."),
        ray: Optional[str] = typer.Option(
            None, "--ray", metavar="ADDRESS",
            help="Compare the local batch runner with `surfer batch --ray` on this cluster (local:N: N nodes here).",
        ),
    ) -> None:
        """Agent steps/s, harness overhead and peak RSS at several concurrency levels (stand-in model)."""
        import json

        from surfer.apps.cli import EXIT_USAGE

        if ray is not None:
            from surfer.apps.cluster.bench import print_comparison, run_ray_comparison

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

        try:
            report = run_command(
                run_throughput(
                    parse_levels(concurrency), steps, write_runs=write_runs, server_process=not in_process,
                    model_latency=model_latency, compare_legacy=compare_legacy,
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
                f"{r['concurrency']:>8} {r['path']:>6} {r['steps_per_s']:>8.2f} {(r['speedup_vs_1'] or 0):>7.2f}x "
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
                f"{r['concurrency']:>8} {r['path']:>6} {split['surfer'] or 0:>20.1f} {split['driver'] or 0:>7.1f} "
                f"{split['chromium'] or 0:>9.1f} {split['other'] or 0:>6.1f} {r['driver_calls_per_step'] or 0:>18.1f}"
            )
        target = out or Path(".bench/throughput.json")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(report, indent=2))
        chart = target.with_suffix(".html")
        chart.write_text(throughput_page(report), encoding="utf-8")
        typer.echo(f"wrote {target} and {chart}")
