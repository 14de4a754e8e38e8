"""The node side: one `SessionWorker` actor per node runs its sessions in one
Chromium with the local runner's own code (`Batch.execute`), and hands each
finished run back to the driver — as a tar archive of the run directory, or,
when the driver's `--out` is on storage this node sees too (the driver's
marker file is there), as the name of the directory it wrote in place.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

MARKER = ".surfer-ray-marker"


def sees_marker(out_dir: str | Path, token: str) -> bool:
    """True when `out_dir` holds the driver's marker with this token: the same storage."""
    try:
        return (Path(out_dir) / MARKER).read_text(encoding="utf-8").strip() == token
    except OSError:
        return False


def pack(run_dir: Path) -> bytes:
    """A run directory as an uncompressed tar (screenshots are compressed already)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(run_dir, arcname=".")
    return buffer.getvalue()


def unpack(data: bytes, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as archive:
        archive.extractall(target, filter="data")


def node_names() -> set[str]:
    """This node's names, as a server's `node` may give them: its IP address (Ray's) and hostname."""
    import socket

    names = {socket.gethostname()}
    try:
        import ray

        names.add(ray.util.get_node_ip_address())
    except Exception:  # noqa: BLE001 - outside Ray: the hostname alone
        pass
    return names


class SessionWorker:
    """A Ray actor (async; `max_concurrency` = its sessions + a few): a Chromium
    on this node and the sessions the driver sends it."""

    def __init__(
        self, config: Any, out_dir: str, token: str, ship: str, gate: Any, name: str, secrets: Any = None
    ) -> None:
        from surfer.fleet.batch.runner import Batch
        from surfer.core.errors import ConfigError

        self.name = name
        self.shared = ship != "bytes" and sees_marker(out_dir, token)
        if ship == "shared" and not self.shared:
            raise ConfigError(f"--out {out_dir} is not shared storage on worker {name} (no driver marker there)")
        staging = Path(out_dir) if self.shared else Path(tempfile.gettempdir()) / "surfer-ray" / f"{name}-{os.getpid()}"
        self.batch = Batch(config, [], staging, concurrency=1, secrets=secrets)
        if len(config.servers) > 1:  # several servers: those of other nodes are left out here
            from surfer.fleet.batch.servers import BatchServers, shared_backends

            self.batch.backends = shared_backends(config, None, local_node=node_names())
            self.batch.servers = BatchServers(self.batch.backends)
        if gate is not None:
            from surfer.fleet.cluster.gate import gated

            self.batch.backends = gated(self.batch.backends, gate, name)

    async def start(self) -> dict[str, Any]:
        import ray

        from surfer.models.outage import vouch

        config = self.batch.config
        for url in {*(config.endpoint(role).base_url for role in ("policy", "localizer", "validator")),
                    *(spec.endpoint.base_url for spec in config.server_specs())}:
            # the driver checked the server before it started the workers: a worker (re)started during an
            # outage holds its sessions like the others, instead of failing its first task at once
            vouch(url)
        await self.batch._browser.start()
        return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid(), "shared": self.shared}

    async def run(self, task: dict[str, Any], server: int | None = None, policy: str | None = None) -> dict[str, Any] | None:
        """Run one task (on model server number `server`, where the driver placed it, with the driver's
        `policy`); None when it did not end with a final status."""
        from surfer.fleet.batch.tasks import BatchTask

        executed = await self.batch.execute(BatchTask.model_validate(task), server, policy)
        self.batch.policy.used.pop(task.get("id") or "", None)  # the driver writes the line
        if executed is None:
            return None
        result, tmp, seconds = executed
        finished: dict[str, Any] = {"result": result.model_dump(mode="json"), "seconds": seconds, **self._timings()}
        if task.get("id") in self.batch._server_of:
            finished["server"] = self.batch._server_of.pop(task["id"])
        if self.shared:
            finished["tmp"] = tmp.name
        else:
            try:
                finished["archive"] = await asyncio.to_thread(pack, tmp) if tmp.exists() else b""
            finally:
                await asyncio.to_thread(shutil.rmtree, tmp, True)
        return finished

    def _timings(self) -> dict[str, Any]:
        """The step times and model-call latencies this worker's sessions measured since the last finished task
        said theirs: the driver's live p50 / p95 and metrics.jsonl latencies count them."""
        stats = self.batch.stats
        steps = list(stats.step_seconds)
        stats.step_seconds.clear()
        latency, stats.latencies = stats.latencies, {}
        return {"step_seconds": steps, "latency": latency}

    async def status(self) -> dict[str, Any]:
        """Browser relaunches, and the memory of this actor with its Chromium (when psutil is installed)."""
        status: dict[str, Any] = {"name": self.name, "relaunches": self.batch._browser.relaunches, "pid": os.getpid()}
        try:
            from surfer.fleet.resources import process_tree_memory

            status["rss"], status["pss"] = process_tree_memory()
        except Exception:  # noqa: BLE001 - psutil missing: no figures
            pass
        return status

    async def close(self) -> None:
        await self.batch._browser.close()
        for backend in {id(b): b for b in self.batch.backends.values()}.values():
            await backend.aclose()
        if not self.shared:
            await asyncio.to_thread(shutil.rmtree, self.batch.out_dir, True)
