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
`out_dir` resumes, like `surfer batch`, and first yields the lines of tasks that finished there but were
never yielded (a stream closed or stopped while they finished, a `surfer batch` run): `out_dir`'s
delivered.jsonl holds the ids of those yielded, so each line is yielded once. A batch that stops early — its model server gone past `server_wait`,
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
import json
import tempfile
from pathlib import Path
from typing import Any, AsyncGenerator, Iterable

from surfer.agent.config import AgentConfig
from surfer.core.errors import ConfigError, ModelServerUnreachable
from surfer.fleet.batch import BatchTask, ResultsIndex, load_tasks, make_batch
from surfer.fleet.batch.tasks import tasks_of
from surfer.fleet.batch.groups import check_advantages, fill_groups, group_of
from surfer.fleet.batch.results import RESULTS_FILE, read_lines

DELIVERED_FILE = "delivered.jsonl"  # {"id": ...} per results line a stream yielded, appended before it is yielded


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
) -> AsyncGenerator[Any, None]:
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
    stream = _groups(batch, items, out, advantages) if groups else _records(batch, out)
    async with contextlib.aclosing(stream):  # closing this stream stops the batch at once
        async for item in stream:
            await asyncio.to_thread(_deliver, out, [line["id"] for line in item] if groups else [item["id"]])
            yield item


def _deliver(out: Path, ids: list[str]) -> None:
    """Blocking: note that these lines are yielded (before they are), so a resumed stream does not yield them again."""
    with open(out / DELIVERED_FILE, "a", encoding="utf-8") as file:
        file.write("".join(json.dumps({"id": i}) + "\n" for i in ids))


def _undelivered(batch: Any, out: Path, todo: list[BatchTask]) -> list[dict[str, Any]]:
    """Blocking: the final lines of the batch's tasks that will not run again and were never yielded."""
    delivered = {line.get("id") for line in read_lines(out / DELIVERED_FILE)}
    ids, running = {t.id for t in batch.tasks}, {t.id for t in todo}
    return [line for line in ResultsIndex(out / RESULTS_FILE).finished(batch.retry_errors).values()
            if line["id"] in ids and line["id"] not in running and line["id"] not in delivered]


async def _groups(batch: Any, items: list[BatchTask], out: Path, advantages: str | None) -> AsyncGenerator[list[dict[str, Any]], None]:
    """Whole groups, each once its last sample's line is written (earlier runs' lines included)."""
    ids = {task.id for task in items}
    earlier = await asyncio.to_thread(ResultsIndex(out / RESULTS_FILE).finished)
    members: dict[str, dict[str, dict[str, Any]]] = {}  # group id -> task id -> its final line
    yielded: set[Any] = set()
    for record in earlier.values():
        if record["id"] in ids:
            members.setdefault(str(group_of(record)["id"]), {})[record["id"]] = record
    async with contextlib.aclosing(_records(batch, out)) as stream:
        async for record in stream:
            group = group_of(record)
            lines = members.setdefault(str(group["id"]), {})
            lines[record["id"]] = record
            if len(lines) == group.get("size") and group["id"] not in yielded:  # (resumed: all its lines may come)
                yielded.add(group["id"])
                yield fill_groups(sorted(lines.values(), key=lambda line: group_of(line)["index"]), advantages)


async def _records(batch: Any, out: Path) -> AsyncGenerator[dict[str, Any], None]:
    """The lines of the tasks that finish, after those that finished before and were never yielded."""
    finished: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def resumed(todo: list[BatchTask]) -> None:  # (the batch holds the directory by then)
        for line in await asyncio.to_thread(_undelivered, batch, out, todo):
            finished.put_nowait(line)

    batch.on_record, batch.on_resumed = finished.put_nowait, resumed
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
