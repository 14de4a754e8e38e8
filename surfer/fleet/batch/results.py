"""What a batch keeps: results.jsonl, one line per task holding its final outcome
(appended as tasks finish, read back on resume); attempts.jsonl, the attempts
that ended no task (the model server gone, a bad configuration, a stop signal);
and the run directories, published atomically from their temporary names.

An outcome that is never final is no result: a task whose server went away
runs again on resume, so its line would be a failure that never happened and,
once it succeeds, a second line for one task. Files written by older versions
may hold such lines; they are superseded, never counted, and the next batch
over the directory moves them to attempts.jsonl (`ResultsIndex.compact`)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterable, Optional

from pydantic import BaseModel, ConfigDict, Field

from surfer.agent.result import ErrorKind, GroupInfo, RewardSource, RunResult, Signal, Status, TokenTotals


FINAL_STATUSES = frozenset({"success", "failed", "limit", "stuck", "needs_approval", "needs_input", "error"})
# Errors that are not the task's fault: never final, and they stop the batch.
BATCH_STOPPING_ERRORS = frozenset({"unreachable", "config"})
RUNS = "runs"
TMP_PREFIX = ".tmp-"
RESULTS_FILE = "results.jsonl"
ATTEMPTS_FILE = "attempts.jsonl"


class ResultLine(BaseModel):
    """One line of results.jsonl (a task's final outcome) or of attempts.jsonl (an
    attempt that ended no task). The runner builds these lines as dicts (`Batch._line`);
    the tests check the lines a real batch writes against this model."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="The task's id (`line-<n>` when the tasks file gave none; `<id>#<k>` for samples).")
    group: GroupInfo = Field(description="The task's samples (`--samples`; a task alone is a group of one): id, "
                             "index and size; the readers add the group's statistics (see Rewards and groups).")
    sample: Optional[int] = Field(description="The sample number, 0..N-1, with `--samples N` (group.index).")
    task: str = Field(description="The task.")
    url: Optional[str] = Field(description="The start URL.")
    status: Status = Field(description="The run's status (result.json's).")
    answer: Optional[str] = Field(description="The final answer.")
    reason: Optional[str] = Field(description="Why it ended so.")
    error_kind: Optional[ErrorKind] = Field(description="For errors: which kind (see Troubleshooting).")
    question: Optional[str] = Field(default=None, description="For needs_input: the agent's question nobody answered "
                                    "(reply with --answers or the task's answers, and run the batch again).")
    steps: int = Field(description="Steps taken.")
    browser_crashes: int = Field(description="Times the browser died under this task (it then ran again).")
    seconds: float = Field(description="Wall time of the task, all its attempts.")
    usage: TokenTotals = Field(description="Tokens of the run's model calls.")
    reward: Optional[float] = Field(default=None, description="The run's reward (result.json's); null when it has "
                                    "none (reward_error says why).")
    reward_source: Optional[RewardSource] = Field(default=None, description="Where the reward came from: outcome, "
                                                  "environment, function or expectations.")
    reward_error: Optional[str] = Field(default=None, description="Why the reward function or the expectations gave "
                                        "no reward.")
    signals: list[Signal] = Field(default=[], description="Per-step reward signals: validator verdicts, expectations.")
    metadata: dict[str, Any] = Field(description="The task line's metadata, as given.")
    finished_at: str = Field(description="When the line was written (UTC, ISO 8601).")
    run_dir: Optional[str] = Field(default=None, description="The run directory, relative to the batch's --out "
                                   "(results.jsonl only).")
    artifacts: dict[str, str] = Field(default={}, description="trace / video files, relative to --out.")
    retried: Optional[str] = Field(default=None, description="--ray: the worker that died under the task's first try.")
    server: Optional[str] = Field(default=None, description="Several model servers: the one the session ended on "
                                  "(its base URL).")
    server_moves: Optional[int] = Field(default=None, description="Several model servers: times the session moved to "
                                        "another server (one that did not come back within --server-wait).")
    data_parallel_rank: Optional[int] = Field(default=None, description="A server with several data-parallel ranks "
                                              "(vLLM --data-parallel-size, SGLang --dp-size): the rank the session was "
                                              "kept on.")
    policy: Optional[str] = Field(default=None, description="The policy (`NAME@VERSION`: an adapter and its version) "
                                  "the session's calls went to, with --policy (docs: Adapters); with --policy-version alone, "
                                  "the model served and that version.")
    superseded: Optional[bool] = Field(default=None, description="attempts.jsonl: a line moved out of an older "
                                       "results.jsonl that a later line replaced.")


def is_final(record: dict[str, Any], retry_errors: bool = False) -> bool:
    """Whether a results line is a task's final outcome (with `retry_errors`, errors are not)."""
    status = record.get("status")
    if status not in FINAL_STATUSES or not record.get("id"):
        return False
    if status == "error" and (retry_errors or record.get("error_kind") in BATCH_STOPPING_ERRORS):
        return False
    return True


def final_results(records: Iterable[dict[str, Any]], retry_errors: bool = False) -> dict[str, dict[str, Any]]:
    """Each task's final outcome by id: the last final line of the task (an older
    version's file may hold several, or lines that were never final)."""
    done: dict[str, dict[str, Any]] = {}
    for record in records:
        if is_final(record, retry_errors):
            done.pop(record["id"], None)  # keep the order in which outcomes became final
            done[record["id"]] = record
    return done


def check_same_tasks(path: Path, finished: dict[str, dict[str, Any]], tasks: Iterable[Any]) -> None:
    """A results line is a task's outcome only if it is the same task: another batch's line under the same id
    (`line-<n>` of another tasks file, a task edited since) would have it skipped and counted as done. A
    ConfigError naming the first such id."""
    from surfer.core.errors import ConfigError

    other = [(task, finished[task.id]) for task in tasks if task.id in finished and any(
        key in finished[task.id] and finished[task.id][key] != value for key, value in (("task", task.task), ("url", task.url)))]
    if other:
        task, line = other[0]
        more = f" (and {len(other) - 1} more)" if len(other) > 1 else ""
        raise ConfigError(
            f"{path} holds another task under id {task.id!r}{more}: {line.get('task')!r} at {line.get('url')}, not "
            f"{task.task!r} at {task.url}; give this batch another --out (or its tasks ids of their own)")


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file; a torn last line (crash mid-write) is skipped, and a byte order mark
    (an editor's save) is not part of the first line."""
    records = []
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def read_results(path: str | Path, advantages: str | None = None) -> list[dict[str, Any]]:
    """results.jsonl (or the batch directory holding it) as its readers should count it: one final line per
    task, each `group` with its statistics once the group is complete (and its GRPO advantage with
    `advantages="grpo"`, groups.py)."""
    from .groups import fill_groups

    path = Path(path)
    return fill_groups(final_results(read_lines(path / RESULTS_FILE if path.is_dir() else path)).values(), advantages)


def append_line(path: Path, record: dict[str, Any]) -> None:
    """Append one whole line, durably; a torn last line left by a crash does not swallow it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell():
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                handle.write(b"\n")
        handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())


class ResultsIndex:
    """results.jsonl (one final line per task) and, beside it, attempts.jsonl
    (attempts that ended no task). Lines are appended whole, one at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.attempts_path = path.with_name(ATTEMPTS_FILE)
        self._lock = asyncio.Lock()

    def read(self) -> list[dict[str, Any]]:
        return read_lines(self.path)

    def finished(self, retry_errors: bool = False) -> dict[str, dict[str, Any]]:
        return final_results(self.read(), retry_errors)

    def compact(self, retry_errors: bool = False) -> int:
        """Make results.jsonl hold exactly one final line per task before a batch
        runs over it: lines that are not final (an older version's), lines a later
        line of the same task superseded and, with `retry_errors`, the errors about
        to run again move to attempts.jsonl. The file is replaced atomically (only
        when something moves); returns how many lines moved."""
        records = self.read()
        keep = final_results(records, retry_errors)
        kept = {id(record) for record in keep.values()}
        moved = [record for record in records if id(record) not in kept]
        if not moved:
            return 0
        for record in moved:
            append_line(self.attempts_path, {**record, "superseded": True})
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with tmp.open("wb") as handle:
            for record in keep.values():
                handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
        return len(moved)

    async def append(self, record: dict[str, Any]) -> None:
        """A task's final outcome."""
        async with self._lock:
            await asyncio.to_thread(append_line, self.path, record)

    async def append_attempt(self, record: dict[str, Any]) -> None:
        """An attempt that ended no task: the task runs again on resume."""
        async with self._lock:
            await asyncio.to_thread(append_line, self.attempts_path, record)


def spent(run_dir: Path) -> dict[str, Any]:
    """The steps and tokens a run had spent, from the result it wrote into its directory (a stopped
    run's too); empty if it got not that far."""
    try:
        result = RunResult.model_validate_json((run_dir / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {"steps": result.steps, "usage": result.usage}


def _publish(tmp: Path, final: Path, result: RunResult) -> None:
    """Move a finished run directory into place (replacing leftovers of an
    earlier attempt that never reached results.jsonl)."""
    if (
        not (tmp / "result.json").exists()
        or json.loads((tmp / "result.json").read_text()).get("status") != result.status
    ):
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "result.json").write_text(
            result.model_copy(update={"run_dir": str(final), "group": None}).model_dump_json(indent=2))
    # the run wrote it (scrubbed), naming its temporary directory: it names the directory it is published as,
    # and its group, as the results line holds it
    written = json.loads((tmp / "result.json").read_text())
    written["run_dir"] = str(final)
    if result.group is not None:
        written["group"] = result.group.model_dump(mode="json", exclude_none=True)
    (tmp / "result.json").write_text(json.dumps(written, indent=2))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
