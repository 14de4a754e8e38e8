"""`surfer.rollouts`: a batch as an async stream of results, for RL loops.

    async for record in surfer.rollouts(config, tasks, samples=8, ray_address="auto", out_dir="rollouts/"):
        reward = record["status"] == "success"      # record["run_dir"] holds the trajectory

With `policy="name@version"` (an adapter loaded on the servers, surfer.policy) every
session's calls go to that adapter, and each line and call records it; pass a
`surfer.policy.PolicySwitch` instead to switch while the stream runs
(`await switch.to("name@next")`: sessions started after it use the new one).
Every model call is recorded token for token (`record_tokens`, on by default here:
the run directory's tokens.jsonl, read back with `surfer.agent.tokens_record`).

Each item is the task's results.jsonl line, yielded as soon as the task
finishes (in finishing order), with its `reward`; the run directories are under `out_dir` (a new
temporary directory when not given). Running the same call with the same
`out_dir` resumes, like `surfer batch`. A batch that stops early — its model server gone past `server_wait`,
or refusing the configuration — raises ModelServerUnreachable / ConfigError once the tasks finished before it
are yielded (the others run when the same call runs again). Closing the stream stops the batch
(`async with contextlib.aclosing(surfer.rollouts(...)) as stream:` to stop at once on `break`).

With `groups=True` each item is a whole group instead (the `samples` rollouts of one task, a list,
yielded once its last sample is final; samples finished before a resume included), every line's
`group` holding the group's mean and std — and the GRPO advantage with `advantages="grpo"`:

    async for group in surfer.rollouts(config, tasks, samples=8, groups=True, advantages="grpo"):
        advantages = [line["group"]["advantage"] for line in group]
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path
from typing import Any, AsyncIterator, Iterable

from surfer.agent.config import AgentConfig
from surfer.core.errors import ConfigError, ModelServerUnreachable
from surfer.fleet.batch import BatchTask, ResultsIndex, load_tasks, make_batch
from surfer.fleet.batch.tasks import tasks_of
from surfer.fleet.batch.groups import check_advantages, fill_groups, group_of
from surfer.fleet.batch.results import RESULTS_FILE


def _tasks(tasks: str | Path | Iterable[BatchTask | dict[str, Any] | str], samples: int) -> list[BatchTask]:
    return load_tasks(tasks, samples) if isinstance(tasks, (str, Path)) else tasks_of(tasks, samples)


async def rollouts(
    config: AgentConfig,
    tasks: str | Path | Iterable[BatchTask | dict[str, Any] | str],
    *,
    samples: int = 1,
    out_dir: str | Path | None = None,
    ray_address: str | None = None,
    concurrency: int = 8,
    max_inflight: int | None = None,
    policy: Any = None,
    groups: bool = False,
    advantages: str | None = None,
    record_tokens: bool = True,
    **options: Any,
) -> AsyncIterator[Any]:
    """Run `tasks` (`samples` rollouts each) and yield each result as it finishes (each group, with `groups`);
    `policy`: the adapter (`name@version`, or a surfer.policy.PolicySwitch) the sessions use; `record_tokens`
    (on unless turned off here): every model call token for token in its run's tokens.jsonl."""
    check_advantages(advantages)
    out = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="surfer-rollouts-"))
    if record_tokens != config.record_tokens:
        config = config.model_copy(update={"record_tokens": record_tokens})
    items = _tasks(tasks, samples)
    batch = make_batch(
        config, items, out, concurrency=concurrency, max_inflight=max_inflight, ray_address=ray_address,
        policy=policy, **options,
    )
    stream = _groups(batch, items, out, advantages) if groups else _records(batch)
    async with contextlib.aclosing(stream):  # closing this stream stops the batch at once
        async for item in stream:
            yield item


async def _groups(batch: Any, items: list[BatchTask], out: Path, advantages: str | None) -> AsyncIterator[list[dict[str, Any]]]:
    """Whole groups, each once its last sample's line is written (earlier runs' lines included)."""
    ids = {task.id for task in items}
    earlier = await asyncio.to_thread(ResultsIndex(out / RESULTS_FILE).finished)
    members: dict[str, dict[str, dict[str, Any]]] = {}  # group id -> task id -> its final line
    for record in earlier.values():
        if record["id"] in ids:
            members.setdefault(str(group_of(record)["id"]), {})[record["id"]] = record
    async with contextlib.aclosing(_records(batch)) as stream:
        async for record in stream:
            group = group_of(record)
            lines = members.setdefault(str(group["id"]), {})
            lines[record["id"]] = record
            if len(lines) == group.get("size"):
                yield fill_groups(sorted(lines.values(), key=lambda line: group_of(line)["index"]), advantages)


async def _records(batch: Any) -> AsyncIterator[dict[str, Any]]:
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
            summary = running.result()  # raises what the batch raised
            if summary.stopped:  # the server gone past server_wait, or refusing the configuration: not a short stream
                raise (ModelServerUnreachable if summary.stopped_kind == "unreachable" else ConfigError)(summary.stopped)
            return
    finally:
        if not running.done():
            running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
