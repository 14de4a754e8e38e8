"""Where a batch's sessions run: the local runner (runner.py) in this
process, or with `ray_address` the Ray runner (surfer/fleet/cluster/), which
takes the same tasks and options. The one module that knows both, so neither
runner imports the other's package."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from surfer.agent.config import AgentConfig
from surfer.core.errors import ConfigError
from surfer.models.backend import ModelBackend

from .runner import Batch, BatchSummary
from .tasks import BatchTask, load_tasks


async def run_batch(
    config: AgentConfig,
    tasks: str | Path | Iterable[BatchTask],
    out_dir: str | Path,
    *,
    concurrency: int | str = 4,
    max_inflight: int | None = None,
    samples: int = 1,
    backend: ModelBackend | None = None,
    retry_errors: bool = False,
    listeners: list[Any] | None = None,
    replay: list[Any] | None = None,
    secrets: Any = None,
    ray_address: str | None = None,
) -> BatchSummary:
    """Run (or resume) a batch; `tasks` is a tasks file or BatchTask objects;
    `ray_address` (`auto`, an address, `local`) runs the sessions on a Ray cluster."""
    items = load_tasks(tasks, samples) if isinstance(tasks, (str, Path)) else list(tasks)
    return await make_batch(
        config, items, out_dir, concurrency=concurrency, max_inflight=max_inflight, backend=backend,
        retry_errors=retry_errors, listeners=listeners, replay=replay, secrets=secrets, ray_address=ray_address,
    ).run()


def make_batch(
    config: AgentConfig,
    tasks: Iterable[BatchTask],
    out_dir: str | Path,
    *,
    ray_address: str | None = None,
    backend: ModelBackend | None = None,
    listeners: list[Any] | None = None,
    **options: Any,
) -> Batch:
    """The local runner, or with `ray_address` the Ray runner (same options)."""
    if ray_address is None:
        return Batch(config, tasks, out_dir, backend=backend, listeners=listeners, **options)
    if backend is not None or listeners:
        raise ConfigError("a batch on Ray talks to the configured endpoints: no backend= or listeners= objects")
    if options.pop("answers", None) is not None:
        raise ConfigError("--answers with --ray: give each task line its own answers")
    if options.pop("replay", None):
        raise ConfigError("--env replay runs on one machine: leave out --ray")
    from surfer.fleet.concurrency import AUTO, parse_concurrency

    if parse_concurrency(options.get("concurrency", 4)) == AUTO:
        raise ConfigError("--concurrency auto runs on one machine: give --ray a number of sessions")
    options["concurrency"] = int(options.get("concurrency", 4))
    options.pop("say", None)
    from surfer.fleet.cluster import RayBatch

    return RayBatch(config, tasks, out_dir, address=ray_address, **options)
