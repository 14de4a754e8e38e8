"""What a batch reports when it ends (`surfer batch`'s summary, batch.json)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class BatchSummary:
    out_dir: Path
    total: int
    skipped: int
    finished: int
    statuses: dict[str, int]  # the tasks' final outcomes in results.jsonl (earlier runs' too), by status
    stopped: str | None  # why the batch stopped early (server unreachable, bad configuration)
    stats: dict[str, Any]
    stopped_kind: str | None = None  # "unreachable" or "config"
    relaunches: int = 0
    concurrency: dict[str, Any] | None = None  # with --concurrency auto: what the controller did
    unfinished: dict[str, int] | None = None  # attempts that ended no task, by kind (attempts.jsonl); run again on resume

    def to_dict(self) -> dict[str, Any]:
        return {
            "out_dir": str(self.out_dir),
            "total": self.total,
            "skipped": self.skipped,
            "finished": self.finished,
            "statuses": self.statuses,
            "stopped": self.stopped,
            "stopped_kind": self.stopped_kind,
            "browser_relaunches": self.relaunches,
            "unfinished": self.unfinished or {},
            **({"concurrency": self.concurrency} if self.concurrency else {}),
            **self.stats,
        }
