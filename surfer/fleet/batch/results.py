"""What a batch keeps: results.jsonl (appended as tasks finish, read back on resume)
and the run directories, published atomically from their temporary names."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any



from surfer.agent.result import RunResult


FINAL_STATUSES = frozenset({"success", "failed", "limit", "stuck", "needs_approval", "error"})
# Errors that are not the task's fault: never final, and they stop the batch.
BATCH_STOPPING_ERRORS = frozenset({"unreachable", "config"})
RUNS = "runs"
TMP_PREFIX = ".tmp-"


class ResultsIndex:
    """results.jsonl: appended one whole line at a time; a torn last line
    (crash mid-write) is ignored when read back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = asyncio.Lock()

    def read(self) -> list[dict[str, Any]]:
        records = []
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return records

    def finished(self, retry_errors: bool = False) -> dict[str, dict[str, Any]]:
        done: dict[str, dict[str, Any]] = {}
        for record in self.read():
            if is_final(record, retry_errors):
                done[record["id"]] = record
        return done

    def _append(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a+b") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell():  # a torn last line must not swallow this one
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")
            handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())

    async def append(self, record: dict[str, Any]) -> None:
        async with self._lock:
            await asyncio.to_thread(self._append, record)


def is_final(record: dict[str, Any], retry_errors: bool = False) -> bool:
    status = record.get("status")
    if status not in FINAL_STATUSES or not record.get("id"):
        return False
    if status == "error" and (retry_errors or record.get("error_kind") in BATCH_STOPPING_ERRORS):
        return False
    return True



def _publish(tmp: Path, final: Path, result: RunResult) -> None:
    """Move a finished run directory into place (replacing leftovers of an
    earlier attempt that never reached results.jsonl)."""
    if (
        not (tmp / "result.json").exists()
        or json.loads((tmp / "result.json").read_text()).get("status") != result.status
    ):
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "result.json").write_text(result.model_copy(update={"run_dir": str(final)}).model_dump_json(indent=2))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
