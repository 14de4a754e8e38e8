"""`surfer.rollouts`: a batch as an async stream of results, for RL loops.

    async for record in surfer.rollouts(config, tasks, samples=8, ray_address="auto", out_dir="rollouts/"):
        reward = record["status"] == "success"      # record["run_dir"] holds the trajectory

Every model call is recorded token for token (`record_tokens`, on by default here:
the run directory's tokens.jsonl, read back with `surfer.agent.tokens_record`).

Each item is the task's results.jsonl line, yielded as soon as the task
finishes (in finishing order); the run directories are under `out_dir` (a new
temporary directory when not given). Running the same call with the same
`out_dir` resumes, like `surfer batch`. Closing the stream stops the batch
(`async with contextlib.aclosing(surfer.rollouts(...)) as stream:` to stop at once on `break`).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path
from typing import Any, AsyncIterator, Iterable

from surfer.agent.config import AgentConfig
from surfer.fleet.batch import BatchTask, expand_samples, load_tasks, make_batch


def _tasks(tasks: str | Path | Iterable[BatchTask | dict[str, Any] | str], samples: int) -> list[BatchTask]:
    if isinstance(tasks, (str, Path)):
        return load_tasks(tasks, samples)
    items = []
    for n, task in enumerate(tasks, 1):
        if isinstance(task, str):
            task = BatchTask(task=task)
        elif isinstance(task, dict):
            task = BatchTask.model_validate(task)
        task = task.model_copy(update={"id": task.id or f"task-{n}"})
        items.extend(expand_samples(task, samples))
    return items


async def rollouts(
    config: AgentConfig,
    tasks: str | Path | Iterable[BatchTask | dict[str, Any] | str],
    *,
    samples: int = 1,
    out_dir: str | Path | None = None,
    ray_address: str | None = None,
    concurrency: int = 8,
    max_inflight: int | None = None,
    record_tokens: bool = True,
    **options: Any,
) -> AsyncIterator[dict[str, Any]]:
    """Run `tasks` (`samples` rollouts each) and yield each result as it finishes. `record_tokens`
    (on unless turned off here): every model call token for token in its run's tokens.jsonl."""
    out = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="surfer-rollouts-"))
    if record_tokens != config.record_tokens:
        config = config.model_copy(update={"record_tokens": record_tokens})
    batch = make_batch(
        config, _tasks(tasks, samples), out, concurrency=concurrency, max_inflight=max_inflight,
        ray_address=ray_address, **options,
    )
    finished: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    batch.on_record = finished.put_nowait
    running = asyncio.create_task(batch.run())
    try:
        while True:
            waiter = asyncio.create_task(finished.get())
            await asyncio.wait({waiter, running}, return_when=asyncio.FIRST_COMPLETED)
            if waiter.done():
                yield waiter.result()
                continue
            waiter.cancel()
            while not finished.empty():
                yield finished.get_nowait()
            running.result()  # raises what the batch raised
            return
    finally:
        if not running.done():
            running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
