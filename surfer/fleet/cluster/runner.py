"""The driver of `surfer batch --ray`: placement, backpressure and faults.

Workers: one actor per alive node that has the custom resource
`surfer_slots` (`ray start --resources '{"surfer_slots": 16}'`), or, when no
node has it, one per alive node weighted by its CPUs. `--concurrency` (the
total number of sessions) is split over them by weight, capped by each node's
`surfer_slots`. A task is sent only to a worker with a free slot, so nothing
queues on the cluster. Everything the driver writes (results.jsonl, published
run directories) is written by the inherited `Batch.record`, exactly as locally.

A worker that dies mid-task (node lost, actor killed): its in-flight tasks go
once more to another worker and their results.jsonl lines say `retried`; a
second loss records the task as an error (`worker_lost`). Cancelling `run`
(Ctrl-C) cancels the sessions on the workers, closes them and keeps every task
already recorded.
"""

from __future__ import annotations

import asyncio
import secrets as random_tokens
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from surfer.agent.config import AgentConfig
from surfer.agent.result import RunResult
from surfer.fleet.batch.results import TMP_PREFIX
from surfer.fleet.batch.runner import Batch, BatchSummary
from surfer.fleet.batch.tasks import BatchTask, run_dir_name
from surfer.fleet.cluster.worker import MARKER, unpack
from surfer.core.errors import ConfigError, ModelServerUnreachable

SHIP_MODES = ("auto", "bytes", "shared")
SLOTS = "surfer_slots"
CLOSE_TIMEOUT = 20.0
START_TIMEOUT = 180.0  # a worker starts a Python process and a Chromium; actors wait for free surfer_slots


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray needs Ray on every node: pip install 'surfer-agent[ray]'") from None
    return ray


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """ConfigError when nothing accepts a connection at a HOST:PORT `address` (Ray's own client retries for
    minutes, deaf to SIGTERM, where a head is down or the address mistyped); `auto` and `local` are not checked."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConfigError(f"cannot join the Ray cluster at {address!r}: nothing answers there ({exc}). Is its head "
                          "running (`ray start --head`)? Give its address as HOST:PORT (6379 by default)") from None


def connect(address: str) -> bool:
    """Join the cluster at `address` (`auto`: the one this machine belongs to;
    `local`: start one in this process). False when Ray was connected already."""
    ray = _ray()
    if ray.is_initialized():
        return False
    _check_reachable(address)
    options: dict[str, Any] = {"include_dashboard": False} if address == "local" else {"address": address}
    try:
        ray.init(**options, logging_level="warning", configure_logging=True)
    except ConnectionError as exc:
        raise ConfigError(f"cannot join the Ray cluster at {address!r}: {exc}") from None
    return True


def plan(nodes: list[dict[str, Any]], concurrency: int) -> list[tuple[str, int, bool]]:
    """(node id, sessions, uses surfer_slots) per worker: `concurrency` split by
    weight (surfer_slots, else CPUs), each node's surfer_slots a cap."""
    alive = [n for n in nodes if n.get("Alive")]
    slotted = [n for n in alive if n.get("Resources", {}).get(SLOTS, 0) >= 1]
    chosen = slotted or alive
    weights = [int(n["Resources"][SLOTS]) if slotted else max(1, int(n["Resources"].get("CPU", 1))) for n in chosen]
    if not chosen:
        raise ConfigError("the Ray cluster has no alive node")
    total = sum(weights)
    shares = [concurrency * w // total for w in weights]
    for i in sorted(range(len(chosen)), key=lambda i: -(concurrency * weights[i] % total)):
        if sum(shares) >= concurrency:
            break
        shares[i] += 1
    if slotted:
        shares = [min(s, w) for s, w in zip(shares, weights)]
    return [(n["NodeID"], s, bool(slotted)) for n, s in zip(chosen, shares) if s > 0]


@dataclass
class Worker:
    name: str
    handle: Any
    node: str
    slots: int
    busy: dict[Any, asyncio.Future[Any]] = field(default_factory=dict)  # ref -> its future on this loop
    alive: bool = True
    names: set[str] = field(default_factory=set)  # its node's IP address and hostname (servers' `node`)

    @property
    def free(self) -> int:
        return self.slots - len(self.busy) if self.alive else 0


class RayBatch(Batch):
    """`Batch` with the sessions on a Ray cluster; see the module docstring.
    `ship`: `auto` (shared storage when the workers see the driver's marker in
    `out_dir`, else archives through Ray), `bytes` or `shared` (required)."""

    def __init__(
        self,
        config: AgentConfig,
        tasks: Iterable[BatchTask],
        out_dir: str | Path,
        *,
        address: str = "auto",
        concurrency: int = 4,
        max_inflight: int | None = None,
        retry_errors: bool = False,
        secrets: Any = None,
        ship: str = "auto",
        crash_retries: int = 1,
        policy: Any = None,
    ) -> None:
        super().__init__(config, tasks, out_dir, concurrency=concurrency, retry_errors=retry_errors, secrets=secrets,
                         crash_retries=crash_retries, policy=policy)
        if max_inflight is not None and max_inflight < 1:
            raise ConfigError(f"--max-inflight must be at least 1, got {max_inflight}")
        if ship not in SHIP_MODES:
            raise ConfigError(f"ship must be one of {', '.join(SHIP_MODES)}, got {ship!r}")
        self.max_inflight = max_inflight
        self.address = address
        self.ship = ship
        self.workers: list[Worker] = []
        self.gate: Any = None
        self.gate_stats: Any = None  # the cluster-wide cap's peak and request count, after the run
        self.retried: list[dict[str, Any]] = []
        self.relaunches = 0
        self.dispatch_started: float | None = None  # when the workers were up and the first task went out
        self.worker_status: list[dict[str, Any]] = []

    async def _run(self) -> BatchSummary:
        todo = await self.prepare()
        await self.policy.start()  # its adapter is on every server, or nothing runs
        owns_ray = False
        switches = asyncio.create_task(self.policy.watch())  # `surfer policy switch`: the driver chooses each session's
        # metrics.jsonl, as the local runner writes it (`surfer view`, --dashboard): the driver's count of the cluster
        metrics = asyncio.create_task(self.files.write_metrics(self.stats, self.servers.refresh))
        try:
            if todo:
                owns_ray = connect(self.address)
                await self._start_workers()
                # the batch's clock (steps/s, elapsed) starts with the sessions, not with the cluster's start-up
                self.dispatch_started = self.stats.started = time.monotonic()
                await self._dispatch(deque(todo))
        finally:
            switches.cancel()
            metrics.cancel()
            await asyncio.gather(switches, metrics, return_exceptions=True)
            await asyncio.shield(self._stop_workers(owns_ray))
            self.stats.running = 0  # (a stopped batch's sessions were cancelled with their workers)
            for backend in {id(b): b for b in self.backends.values()}.values():
                await asyncio.shield(backend.aclose())
        return await asyncio.to_thread(self.summary, self.relaunches)

    # -- workers -------------------------------------------------------------------

    async def _start_workers(self) -> None:
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from surfer.fleet.cluster.gate import InflightGate
        from surfer.fleet.cluster.worker import SessionWorker

        token = random_tokens.token_hex(8)
        await asyncio.to_thread((self.out_dir / MARKER).write_text, token)
        if self.max_inflight:
            self.gate = ray.remote(InflightGate).options(num_cpus=0, max_concurrency=100_000).remote(self.max_inflight)
        remote_worker = ray.remote(SessionWorker)
        nodes = ray.nodes()
        names = {n["NodeID"]: {n.get("NodeManagerAddress"), n.get("NodeManagerHostname")} - {None} for n in nodes}
        for n, (node, slots, slotted) in enumerate(plan(nodes, self.concurrency)):
            name = f"w{n}-{uuid.uuid4().hex[:4]}"
            handle = remote_worker.options(
                num_cpus=0,
                resources={SLOTS: slots} if slotted else {},
                max_concurrency=slots + 4,
                max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote(self.config, str(self.out_dir.resolve()), token, self.ship, self.gate, name, self.secrets)
            self.workers.append(Worker(name, handle, node, slots, names=names.get(node, set())))
        try:
            await asyncio.wait_for(asyncio.gather(*(w.handle.start.remote() for w in self.workers)), START_TIMEOUT)
        except TimeoutError:
            raise ConfigError(
                f"the Ray workers did not start within {START_TIMEOUT:g} s (is another batch holding the nodes' {SLOTS}?)"
            ) from None
        except ray.exceptions.RayError as exc:
            raise ConfigError(f"a Ray worker could not start: {exc}") from None

    async def _stop_workers(self, owns_ray: bool) -> None:
        if not self.workers and self.gate is None:
            return
        ray = _ray()
        inflight = {ref: future for w in self.workers for ref, future in w.busy.items()}
        for ref in inflight:
            ray.cancel(ref)  # the session stops; its temporary run directory is removed on the worker
        if inflight:
            done, _ = await asyncio.wait(inflight.values(), timeout=CLOSE_TIMEOUT)
            for future in done:
                future.exception()  # cancelled on purpose
        alive = [w for w in self.workers if w.alive]
        statuses = [w.handle.status.remote() for w in alive]
        closes = [w.handle.close.remote() for w in alive]
        done = await asyncio.gather(*(_within(r, CLOSE_TIMEOUT) for r in statuses + closes))
        self.worker_status = [s for s in done[: len(statuses)] if isinstance(s, dict)]
        self.relaunches = sum(s["relaunches"] for s in self.worker_status)
        for w in self.workers:
            ray.kill(w.handle)
        if self.gate is not None:
            self.gate_stats = await _within(self.gate.stats.remote(), CLOSE_TIMEOUT)
            ray.kill(self.gate)
        await asyncio.to_thread((self.out_dir / MARKER).unlink, True)
        if owns_ray:
            ray.shutdown()

    # -- dispatch ------------------------------------------------------------------

    async def _dispatch(self, queue: deque[BatchTask]) -> None:
        ray = _ray()
        owner: dict[Any, tuple[BatchTask, Worker]] = {}
        futures: dict[asyncio.Future[Any], Any] = {}  # what dispatch waits on -> the ref
        retried: dict[str, str] = {}
        leases: dict[Any, Any] = {}  # ref -> the server its session was placed on (several servers)
        policies: dict[Any, Any] = {}  # ref -> the policy its session uses
        pool = self.servers.pool
        while (queue or owner) and self._stopped is None:
            for worker in self.workers:
                while queue and worker.free > 0 and self._stopped is None:
                    task = queue.popleft()
                    # several servers: the driver places the session (a worker may use any server, or its node's own)
                    try:
                        lease = await pool.place(None, task.id or "", node=worker.names) if pool is not None else None
                    except ModelServerUnreachable as exc:
                        queue.appendleft(task)
                        self._stopped, self._stopped_kind = str(exc), "unreachable"
                        break
                    chosen = self.policy.begin(task.id or "")  # the driver's policy now: the session keeps it
                    ref = worker.handle.run.remote(task.model_dump(mode="json"), lease.server.index if lease else None,
                                                   str(chosen) if chosen else None)
                    policies[ref] = chosen
                    future = asyncio.wrap_future(ref.future())
                    worker.busy[ref] = future
                    owner[ref] = (task, worker)
                    futures[future] = ref
                    if lease is not None:
                        leases[ref] = lease
            self.stats.running = len(owner)
            if not owner:
                self._stopped = self._stopped or "every Ray worker died; run the same command again to resume"
                break
            done, _ = await asyncio.wait(list(futures), return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                ref = futures.pop(future)
                task, worker = owner.pop(ref)
                await self.policy.end(policies.pop(ref, None))
                worker.busy.pop(ref, None)
                if ref in leases:
                    lease = leases.pop(ref)
                    pool.release(lease)  # type: ignore[union-attr]
                    moved = future.exception() is None and (future.result() or {}).get("server")
                    if moved and moved[1] and lease.server.spec.node is None:  # its session left the server
                        pool.lose(lease.server, RuntimeError(f"a session of {task.id} moved away from it"))  # type: ignore[union-attr]
                try:
                    finished = future.result()
                except ray.exceptions.RayActorError as exc:
                    await self._worker_lost(worker, exc)
                    assert task.id is not None
                    if task.id in retried:
                        try:
                            await self._record_lost(task, f"{retried[task.id]}; then {worker.name} died too")
                        except OSError as lost:
                            self.stop_for_storage(lost)
                    else:
                        retried[task.id] = f"worker {worker.name} on node {worker.node[:12]} died"
                        queue.appendleft(task)
                    continue
                except ray.exceptions.RayTaskError as exc:
                    if isinstance(exc.cause, OSError):  # the run's files could not be written there (a full disk)
                        self.stop_for_storage(exc.cause, f" on {worker.name}")
                        continue
                    finished = {"result": RunResult(
                        status="error", task=task.task, url=task.url, reason=f"internal error on {worker.name}: {exc}",
                        error_kind="internal",
                    ).model_dump(mode="json"), "seconds": 0.0, "archive": b""}
                if finished is not None:
                    try:
                        await self._record_finished(task, finished, retried.get(task.id or ""))
                    except OSError as exc:  # the driver's --out takes no more (a full disk): the batch stops
                        self.stop_for_storage(exc)
        self.stats.running = len(owner)

    async def _worker_lost(self, worker: Worker, exc: Exception) -> None:
        if not worker.alive:
            return
        worker.alive = False
        if self.gate is not None:
            await _within(self.gate.forget.remote(worker.name), CLOSE_TIMEOUT)

    async def _record_finished(self, task: BatchTask, finished: dict[str, Any], retried: str | None) -> None:
        result = RunResult.model_validate(finished["result"])
        assert task.id is not None
        if "tmp" in finished:
            tmp = self.runs_dir / finished["tmp"]
        else:
            tmp = self.runs_dir / f"{TMP_PREFIX}{run_dir_name(task.id)}-{uuid.uuid4().hex[:6]}"
            if finished.get("archive"):
                await asyncio.to_thread(unpack, finished["archive"], tmp)
        self.stats.steps += result.steps
        self.stats.tokens += result.usage.prompt_tokens + result.usage.completion_tokens
        self.stats.step_seconds.extend(finished.get("step_seconds") or ())  # (the worker's, since its last task)
        for role, seconds in (finished.get("latency") or {}).items():
            self.stats.latencies.setdefault(role, []).extend(seconds)
        if finished.get("server"):  # the server the session ended on, and its moves (on the worker)
            self._server_of[task.id] = tuple(finished["server"])  # type: ignore[assignment]
            number = next((s.index for s in self.servers.pool.servers if s.base_url == finished["server"][0]), 0) \
                if self.servers.pool is not None else 0
            self.stats.server_steps[number] = self.stats.server_steps.get(number, 0) + result.steps
        await self.record(task, result, tmp, finished["seconds"], **({"retried": retried} if retried else {}))

    async def _record_lost(self, task: BatchTask, reason: str) -> None:
        result = RunResult(status="error", task=task.task, url=task.url, reason=reason, error_kind="worker_lost")
        tmp = self.runs_dir / f"{TMP_PREFIX}{run_dir_name(task.id or 'task')}-{uuid.uuid4().hex[:6]}"
        await self.record(task, result, tmp, 0.0, retried=reason)


async def _within(ref: Any, seconds: float) -> Any:
    try:
        return await asyncio.wait_for(asyncio.wrap_future(ref.future()), seconds)
    except Exception as exc:  # noqa: BLE001 - a worker already gone is fine when stopping
        return exc


__all__ = ["RayBatch", "connect", "plan"]
