"""`surfer batch --ray`: a local Ray cluster (a head and two worker "nodes",
each its own raylet process with `surfer_slots`) runs demo-site batches
through the stand-in server; results match the local runner's, a killed
worker's tasks run exactly once more elsewhere, Ctrl-C keeps finished work."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from importlib.util import find_spec

import pytest

from surfer.fleet.batch import ResultsIndex, run_batch
from surfer.apps.demo.oracle import DemoOracle, frame_mapper
from surfer.fleet.cluster import RayBatch
from surfer.fleet.cluster.runner import plan
from test_batch import VIEWPORT, centres, config_for, demo_tasks  # noqa: F401 - fixtures

# Ray is imported where a test uses it (~0.7 s of CPU): every pytest process collects this file.
pytestmark = pytest.mark.skipif(find_spec("ray") is None, reason="Ray is not installed (the ray extra)")

IDS = [f"t{n:02d}" for n in range(12)]  # two rounds of 6 sessions: a round in flight when the worker dies, one after
TIMING = ("seconds", "finished_at", "retried")


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    """Two nodes (the head and one more, each its own raylet process) with 3 session slots each."""
    import ray
    from ray.cluster_utils import Cluster

    # no log monitor (a Python process of ~2 s of CPU over the file): the workers' output is not checked
    slots = {"num_cpus": 1, "resources": {"surfer_slots": 3}, "include_log_monitor": False}
    # no autoscaler monitor (a Python process of ~0.8 s of CPU at start): the test cluster's nodes are fixed
    cluster = Cluster(initialize_head=True, head_node_args={**slots, "include_dashboard": False, "no_monitor": True})
    cluster.add_node(**slots)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="warning")
    yield cluster
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture(scope="module")
def oracle(centres):  # type: ignore[no-untyped-def]
    return DemoOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0))


@pytest.fixture
def server(standin, oracle):  # type: ignore[no-untyped-def]
    return standin(oracle)


def content(out: Path) -> dict[str, dict]:
    """results.jsonl by id, without what depends on timing."""
    records = ResultsIndex(out / "results.jsonl").read()
    assert len(records) == len({r["id"] for r in records}), "a task was recorded twice"
    return {r["id"]: {k: v for k, v in r.items() if k not in TIMING} for r in records}


def test_a_cluster_address_nothing_answers_at_is_refused_at_once_not_retried_for_minutes():
    import socket

    from surfer.core.errors import ConfigError
    from surfer.fleet.cluster.runner import connect

    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ConfigError, match=f"cannot join the Ray cluster at '127.0.0.1:{port}': nothing answers there"):
        connect(f"127.0.0.1:{port}")  # (Ray's own client would retry it, deaf to SIGTERM)


def test_plan_splits_sessions_by_slots_and_caps_each_node():
    nodes = [
        {"NodeID": "head", "Alive": True, "Resources": {"CPU": 8}},
        {"NodeID": "a", "Alive": True, "Resources": {"CPU": 4, "surfer_slots": 4}},
        {"NodeID": "b", "Alive": True, "Resources": {"CPU": 8, "surfer_slots": 8}},
        {"NodeID": "c", "Alive": False, "Resources": {"CPU": 8, "surfer_slots": 8}},
    ]
    assert plan(nodes, 6) == [("a", 2, True), ("b", 4, True)]
    assert plan(nodes, 100) == [("a", 4, True), ("b", 8, True)]
    plain = [{"NodeID": n, "Alive": True, "Resources": {"CPU": c}} for n, c in (("x", 2), ("y", 6))]
    assert plan(plain, 5) == [("x", 1, False), ("y", 4, False)]
    assert plan(plain, 1) == [("y", 1, False)]


async def test_inflight_gate_caps_frees_cancelled_and_dead_holders_slots():
    from surfer.fleet.cluster.gate import InflightGate

    gate = InflightGate(2)
    assert await gate.acquire("w0", "a") and await gate.acquire("w1", "b")
    waiting = [asyncio.create_task(gate.acquire("w0", t)) for t in ("c", "d", "e")]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiting) and gate.stats()["inflight"] == 2
    gate.release("d")  # its caller gave up while waiting: never granted
    gate.release("b")
    assert await waiting[0] is True and await waiting[1] is False and not waiting[2].done()
    assert gate.forget("w0") == 2  # a and c: w0 died; e (w0's too) is dropped
    assert await waiting[2] is False and gate.stats()["inflight"] == 0
    gate.release("f")  # released before its acquire arrived
    assert await gate.acquire("w1", "f") is False and gate.stats()["peak"] == 2


async def test_ray_batch_matches_the_local_runner_and_survives_a_killed_worker(cluster, demo_site, server, tmp_path):
    """12 tasks on two nodes, run directories shipped through Ray; one node's worker is
    killed mid-batch: its in-flight tasks run once more on the other, nothing twice."""
    config = config_for(server)
    tasks = demo_tasks(demo_site, IDS)
    batch = RayBatch(config, tasks, tmp_path / "ray", concurrency=6, max_inflight=4, ship="bytes")
    running = asyncio.create_task(batch.run())
    while not (batch.workers and len(ResultsIndex(tmp_path / "ray" / "results.jsonl").read()) >= 3):
        await asyncio.sleep(0.05)
    victim = batch.workers[0]
    assert victim.busy  # sessions in flight on it
    import ray

    ray.kill(victim.handle)
    summary = await running
    # steps/s and elapsed count from the first task sent out, not from the workers' start-up (Ray, Chromium)
    assert summary.stats["seconds"] <= time.monotonic() - batch.dispatch_started, summary.stats
    local = await run_batch(config, tasks, tmp_path / "local", concurrency=6, max_inflight=4)

    on_ray, here = content(tmp_path / "ray"), content(tmp_path / "local")
    assert on_ray == here and sorted(on_ray) == IDS
    assert {r["status"] for r in on_ray.values()} == {"success"}
    assert summary.statuses == local.statuses == {"success": len(IDS)} and summary.stats["steps"] == local.stats["steps"]
    assert len({w.node for w in batch.workers}) == 2 and [w.slots for w in batch.workers] == [3, 3]
    retried = [r for r in ResultsIndex(tmp_path / "ray" / "results.jsonl").read() if "retried" in r]
    assert 1 <= len(retried) <= 3 and all(victim.name in r["retried"] for r in retried)
    assert batch.gate_stats["peak"] <= 4 and batch.gate_stats["requests"] >= summary.stats["steps"]
    for record in on_ray.values():  # whole run directories on the driver
        run_dir = tmp_path / "ray" / record["run_dir"]
        assert json.loads((run_dir / "result.json").read_text())["status"] == "success"
        assert len((run_dir / "trajectory.jsonl").read_text().splitlines()) == record["steps"]
        assert sorted(p.name for p in run_dir.iterdir()) == sorted(p.name for p in (tmp_path / "local" / record["run_dir"]).iterdir())
        assert json.loads((run_dir / "result.json").read_text())["run_dir"] == str(run_dir)
    # the files the local runner writes, `surfer view`'s metrics.jsonl included, counted as the results are
    assert sorted(p.name for p in (tmp_path / "ray").iterdir()) == sorted(p.name for p in (tmp_path / "local").iterdir())
    last = json.loads((tmp_path / "ray" / "metrics.jsonl").read_text().splitlines()[-1])
    assert (last["done"], last["succeeded"], last["running"]) == (len(IDS), len(IDS), 0), last
    # the workers' step times and model latencies reach the driver: its p50 / p95 and metrics (they said "-" and {})
    assert summary.stats["step_p50"] is not None and summary.stats["step_p95"] is not None, summary.stats
    latency = [json.loads(line)["latency"] for line in (tmp_path / "ray" / "metrics.jsonl").read_text().splitlines()]
    assert {"policy", "localizer", "validator"} <= {role for line in latency for role in line}, latency
    leftovers = [p.name for p in (tmp_path / "ray").iterdir() if p.name.startswith(".")]
    assert leftovers == [] and not [p for p in (tmp_path / "ray" / "runs").iterdir() if p.name.startswith(".tmp-")]


async def test_the_driver_places_sessions_across_servers_and_a_node_keeps_its_own(cluster, demo_site, standin, oracle, tmp_path,
                                                                                   monkeypatch):
    """Several servers on Ray: the driver places each session (by room), a worker's session keeps its
    server for every role; a server named for a node is used only by that node's sessions. The driver's disk
    fills up as the last run is published: the batch stops saying so, that task has no line (it was a traceback)."""
    import ray

    from surfer.fleet.batch import runner

    published, publish = [], runner._publish

    def disk_full_at_the_last(tmp, final, result):  # type: ignore[no-untyped-def]
        if len(published) == 5:
            raise OSError(28, "No space left on device", str(final / "result.json"))
        published.append(final.name)
        publish(tmp, final, result)

    monkeypatch.setattr(runner, "_publish", disk_full_at_the_last)

    shared, local, elsewhere = (standin(oracle) for _ in range(3))
    here = ray.util.get_node_ip_address()  # both nodes of the test cluster are this machine
    config = type(config_for(shared)).model_validate({**config_for(shared).model_dump(), "servers": [
        {"base_url": shared.base_url}, {"base_url": local.base_url, "node": here},
        {"base_url": elsewhere.base_url, "node": "a-node-of-another-cluster"}]})
    ids = [f"p{n}" for n in range(6)]
    batch = RayBatch(config, demo_tasks(demo_site, ids), tmp_path / "out", concurrency=6, ship="bytes")
    summary = await batch.run()
    assert summary.stopped_kind == "storage" and "No space left on device" in summary.stopped, summary.stopped
    assert summary.statuses == {"success": 5}
    sessions = {s.base_url: {r.session for r in s.requests} for s in (shared, local, elsewhere)}
    assert not sessions[elsewhere.base_url]  # not this cluster's node: never placed
    assert sessions[shared.base_url] and sessions[local.base_url]
    assert sessions[shared.base_url].isdisjoint(sessions[local.base_url])  # each session at one server
    assert sessions[shared.base_url] | sessions[local.base_url] == set(ids)
    lines = {r["id"]: r for r in ResultsIndex(tmp_path / "out" / "results.jsonl").read()}
    assert sorted(lines) == sorted(published) and len(lines) == 5  # the sixth runs again on resume
    assert all(r["server"] in (shared.base_url, local.base_url) and r["server_moves"] == 0 for r in lines.values())
    assert {r.role for r in shared.requests + local.requests} == {"policy", "localizer", "validator"}


def test_cli_ctrl_c_keeps_finished_tasks_and_resume_runs_the_rest(cluster, demo_site, server, tmp_path):
    """`surfer batch --ray ADDRESS` as a second driver; --out is seen by the workers (shared storage)."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": t.id, "task": t.task, "url": t.url}) + "\n" for t in demo_tasks(demo_site, IDS[:6])))
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "surfer", "batch", str(tasks), "--out", str(out), "-c", "4", "--quiet",
        "--ray", cluster.address, "--base-url", server.base_url, "--model", server.model,
        "--profile", "holotron", "--viewport", "1024x700", "--max-steps", "10",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while len(ResultsIndex(out / "results.jsonl").read()) < 2 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)
    output = first.communicate(timeout=60)[0]
    assert first.returncode == 130, output
    asked = len(server.requests)
    time.sleep(1.0)
    assert len(server.requests) == asked  # no session goes on asking the model on the cluster
    kept = content(out)
    assert 2 <= len(kept) < 6 and "interrupted" in output and not (out / ".surfer-ray-marker").exists()

    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stdout + second.stderr
    records = content(out)  # asserts every id exactly once
    assert sorted(records) == IDS[:6] and {r["status"] for r in records.values()} == {"success"}
    assert all(records[i] == kept[i] for i in kept)
    assert not [p for p in (out / "runs").iterdir() if p.name.startswith(".tmp-")]  # stale ones removed on resume
