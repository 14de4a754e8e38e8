"""`surfer bench throughput --ray ADDRESS`: the same sessions through the
local batch runner and through `RayBatch`, level by level: steps/s of each
(from the first task sent to the last result; worker start-up excluded), their
ratio (Ray's overhead), the memory of each worker (actor + its Chromium) and
of Ray's own daemons per node, and the cost of the cluster-wide in-flight cap
per model request. `--ray local:N` starts N nodes on this machine
(`ray.cluster_utils.Cluster`, each with `surfer_slots`) to measure on one box.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from surfer.core.errors import ConfigError

GATE_ROUNDS = 300


def _config(base_url: str, model: str, steps: int) -> Any:
    from surfer.agent.config import AgentConfig, BrowserSettings
    from surfer.bench.responder import VIEWPORT

    return AgentConfig(
        base_url=base_url, model=model, max_steps=steps, max_repeats=steps + 1, sensitive_actions="approve",
        validate_answers=False, browser=BrowserSettings(viewport=VIEWPORT),
    )


def _tasks(url: str, n: int) -> list[Any]:
    from surfer.fleet.batch import BatchTask

    return [BatchTask(id=f"s{i}", group=f"s{i}", task="Fill in the form.", url=url) for i in range(n)]


def _ray_daemons_rss() -> int:
    """RSS of Ray's own processes on this machine (GCS, raylets, log monitors, ...), workers excluded."""
    import psutil

    total = 0
    for proc in psutil.process_iter(["name", "cmdline", "memory_info"]):
        line = " ".join(proc.info["cmdline"] or [])
        name = proc.info["name"] or ""
        if ("ray" in name or "/ray/" in line) and "ray::" not in line and "default_worker" not in line:
            total += proc.info["memory_info"].rss if proc.info["memory_info"] else 0
    return total


async def _local_level(config: Any, tasks: list[Any], out: Path) -> dict[str, Any]:
    from surfer.agent.events import StepStarted
    from surfer.fleet.batch import Batch
    from surfer.bench.sampler import TreeSampler

    first: list[float] = []
    batch = Batch(config, tasks, out, concurrency=len(tasks),
                  listeners=[lambda e: first.append(time.monotonic()) if isinstance(e, StepStarted) and not first else None])
    with TreeSampler() as tree:
        summary = await batch.run()
    window = time.monotonic() - first[0] if first else 0.0  # close-down included, as for Ray
    return {"steps": summary.stats["steps"], "seconds": round(window, 3), "statuses": summary.statuses,
            "steps_per_s": summary.stats["steps"] / window if window else 0.0,
            "peak_rss_mib": round(tree.peak / 2**20, 1), "peak_pss_mib": round(tree.peak_pss / 2**20, 1)}


async def _ray_level(config: Any, tasks: list[Any], out: Path, address: str) -> dict[str, Any]:
    import ray

    from surfer.fleet.cluster import RayBatch

    batch = RayBatch(config, tasks, out, address=address, concurrency=len(tasks))
    running = asyncio.create_task(batch.run())
    peaks: dict[str, tuple[int, int]] = {}
    while not running.done():
        await asyncio.wait({running}, timeout=1.0)
        workers = [w for w in batch.workers if w.alive]
        if batch.dispatch_started is not None and workers and not running.done():
            for status in await asyncio.gather(*(w.handle.status.remote() for w in workers), return_exceptions=True):
                if isinstance(status, dict) and "rss" in status:
                    old = peaks.get(status["name"], (0, 0))
                    peaks[status["name"]] = (max(old[0], status["rss"]), max(old[1], status["pss"]))
    summary = await running
    end = time.monotonic()
    window = end - (batch.dispatch_started or end)
    del ray
    return {"steps": summary.stats["steps"], "seconds": round(window, 3), "statuses": summary.statuses,
            "steps_per_s": summary.stats["steps"] / window if window else 0.0, "workers": len(batch.workers),
            "worker_peak_rss_mib": [round(r / 2**20, 1) for r, _ in peaks.values()],
            "worker_peak_pss_mib": [round(p / 2**20, 1) for _, p in peaks.values()]}


async def gate_overhead(rounds: int = GATE_ROUNDS) -> dict[str, float]:
    """Seconds per request that the cluster-wide cap adds (acquire + release through
    the gate actor, release not awaited as in `ClusterInflightLimit`) vs the local one."""
    import ray

    from surfer.fleet.cluster.gate import InflightGate

    gate = ray.remote(InflightGate).options(num_cpus=0, max_concurrency=1000).remote(8)
    await gate.stats.remote()
    times = []
    for n in range(rounds):
        started = time.perf_counter()
        await gate.acquire.remote("bench", f"t{n}")
        gate.release.remote(f"t{n}")
        times.append(time.perf_counter() - started)
    await gate.stats.remote()
    ray.kill(gate)
    local = asyncio.Semaphore(8)
    started = time.perf_counter()
    for _ in range(rounds):
        await local.acquire()
        local.release()
    return {"cluster_ms_p50": statistics.median(times) * 1000,
            "cluster_ms_p95": sorted(times)[int(0.95 * len(times))] * 1000,
            "local_ms": (time.perf_counter() - started) / rounds * 1000}


async def run_ray_comparison(
    levels: list[int], steps: int, address: str, *, model_latency: float = 0.0, slots_per_node: int = 64,
) -> dict[str, Any]:
    import ray

    from surfer.apps.demo.oracle import DEMO_SITE
    from surfer.apps.demo.static_site import StaticSite
    from surfer.bench.responder import StepResponder, measure_centres
    from surfer.models.standin import StandInProcess

    if address.startswith("local:"):
        try:
            nodes = int(address.split(":", 1)[1])
        except ValueError:
            raise ConfigError(f"--ray local:N needs a node count, got {address!r}") from None
    levels_out: list[dict[str, Any]] = []
    with StaticSite(DEMO_SITE) as site, tempfile.TemporaryDirectory() as tmp:
        centres = await measure_centres(site.base_url)
        with StandInProcess(StepResponder, centres, "normalized_1000", options={"delay": model_latency}) as server:
            config = _config(server.base_url, server.model, steps)
            url = site.url("register.html")
            for c in levels:  # before any Ray process exists: the local tree's memory is the runner's alone
                levels_out.append({"concurrency": c, "local": await _local_level(config, _tasks(url, c), Path(tmp) / f"local-{c}")})
            cluster = None
            daemons_before = _ray_daemons_rss()
            if address.startswith("local:"):
                from ray.cluster_utils import Cluster

                cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
                for _ in range(nodes):
                    cluster.add_node(num_cpus=1, resources={"surfer_slots": slots_per_node})
                cluster.wait_for_nodes()
                address = cluster.address
            from surfer.fleet.cluster import connect

            owns = connect(address)
            try:
                nodes_alive = len([n for n in ray.nodes() if n["Alive"]])
                daemons = _ray_daemons_rss() - daemons_before
                for level in levels_out:
                    c = level["concurrency"]
                    level["ray"] = await _ray_level(config, _tasks(url, c), Path(tmp) / f"ray-{c}", address)
                    level["ratio"] = level["ray"]["steps_per_s"] / level["local"]["steps_per_s"] if level["local"]["steps_per_s"] else None
                overhead = await gate_overhead()
            finally:
                if owns:
                    ray.shutdown()
                if cluster is not None:
                    cluster.shutdown()
    return {"benchmark": "throughput-ray", "steps_per_session": steps, "model_latency": model_latency,
            "nodes": nodes_alive, "ray_daemons_rss_mib": round(daemons / 2**20, 1),
            "ray_daemons_rss_mib_per_node": round(daemons / 2**20 / max(1, nodes_alive), 1),
            "inflight_gate": overhead, "levels": levels_out}


def print_comparison(report: dict[str, Any], echo: Any) -> None:
    echo(f"{report['nodes']} Ray node(s); Ray's daemons {report['ray_daemons_rss_mib_per_node']:.0f} MiB RSS per node; "
         f"in-flight cap: {report['inflight_gate']['cluster_ms_p50']:.2f} ms per request (p95 "
         f"{report['inflight_gate']['cluster_ms_p95']:.2f}) vs {report['inflight_gate']['local_ms'] * 1000:.1f} µs locally")
    echo(f"{'sessions':>8} {'local steps/s':>14} {'ray steps/s':>12} {'ratio':>6} {'local peak RSS':>15} {'ray worker peak RSS':>22}")
    for level in report["levels"]:
        local, on_ray = level["local"], level["ray"]
        workers = " + ".join(f"{r:.0f}" for r in on_ray["worker_peak_rss_mib"]) or "-"
        echo(f"{level['concurrency']:>8} {local['steps_per_s']:>14.2f} {on_ray['steps_per_s']:>12.2f} "
             f"{(level['ratio'] or 0):>5.2f}x {local['peak_rss_mib']:>11.0f} MiB {workers:>18} MiB")
