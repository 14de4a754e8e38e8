"""What a QA run found, case by case: the records the runner fills in and the
reports (JUnit, HTML, results.jsonl) read."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from .cache import CachedAction
from .expectations import ExpectationResult
from .suite import Case


@dataclass
class StepReport:
    index: int
    goal: str
    source: str = "model"  # model | cache | healed
    status: str = "pending"
    answer: Optional[str] = None
    reason: Optional[str] = None
    error_kind: Optional[str] = None
    run_dirs: list[str] = field(default_factory=list)
    healed: list[str] = field(default_factory=list)
    actions: list[CachedAction] = field(default_factory=list, repr=False)  # performed, with anchors: the cache entry
    end_url: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "actions"}


@dataclass
class AttemptReport:
    number: int
    dir: str
    kind: str = "try"  # try | retry | cache-dropped (re-run with the model after a failing replay)
    status: str = "running"  # passed | failed | needs_approval | needs_input | error
    steps: list[StepReport] = field(default_factory=list)
    expectations: list[ExpectationResult] = field(default_factory=list)
    failure: Optional[str] = None
    error_kind: Optional[str] = None
    seconds: float = 0.0
    model_calls: int = 0
    used_cache: bool = False

    @property
    def cached_steps(self) -> int:
        return sum(s.source in ("cache", "healed") for s in self.steps)

    @property
    def healed_steps(self) -> list[StepReport]:
        return [s for s in self.steps if s.source == "healed"]

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in vars(self).items() if k not in ("steps", "expectations")}
        data["steps"] = [s.to_dict() for s in self.steps]
        data["expectations"] = [e.to_dict() for e in self.expectations]
        return data


@dataclass
class CaseReport:
    suite: str
    case: Case
    id: str
    dir: Path
    status: str = "queued"  # queued | running | passed | flaky | failed | needs_approval | needs_input | error | unfinished
    attempts: list[AttemptReport] = field(default_factory=list)
    current_step: str = ""
    started: Optional[float] = None
    seconds: float = 0.0
    cache_written: bool = False
    cache_dropped: bool = False

    @property
    def passed(self) -> bool:
        return self.status in ("passed", "flaky")

    @property
    def last(self) -> Optional[AttemptReport]:
        return self.attempts[-1] if self.attempts else None

    @property
    def failure(self) -> Optional[str]:
        last = self.last
        return last.failure if last is not None and not self.passed else None

    @property
    def model_calls(self) -> int:
        return sum(a.model_calls for a in self.attempts)

    def elapsed(self) -> float:
        if self.started is None:
            return 0.0
        return self.seconds if self.status not in ("queued", "running") else time.monotonic() - self.started

    def to_record(self, out_dir: Path) -> dict[str, Any]:
        last = self.last
        return {
            "id": self.id, "suite": self.suite, "case": self.case.name, "tags": self.case.tags, "status": self.status,
            "failure": self.failure, "error_kind": last.error_kind if last else None,
            "seconds": round(self.seconds, 3), "attempts": len(self.attempts), "model_calls": self.model_calls,
            "cached_steps": last.cached_steps if last else 0,
            "healed_steps": [s.index for s in last.healed_steps] if last else [],
            "cache_written": self.cache_written, "cache_dropped": self.cache_dropped,
            "dir": str(self.dir.relative_to(out_dir)),
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }


@dataclass
class QaSummary:
    out_dir: Path
    cases: list[CaseReport]
    seconds: float
    stopped: Optional[str] = None  # why the run stopped early (server unreachable, bad configuration)
    stopped_kind: Optional[str] = None

    def count(self, *statuses: str) -> int:
        return sum(c.status in statuses for c in self.cases)

    @property
    def ok(self) -> bool:
        return self.stopped is None and all(c.passed for c in self.cases)

    def line(self) -> str:
        return (
            f"{self.count('passed', 'flaky')} passed ({self.count('flaky')} flaky), {self.count('failed')} failed, "
            + (f"{self.count('needs_approval')} need approval, " if self.count('needs_approval') else "")
            + (f"{self.count('needs_input')} need input, " if self.count('needs_input') else "") +
            f"{self.count('error')} error(s), "
            + (f"{self.count('unfinished')} not finished (the run stopped), " if self.count('unfinished') else "")
            + f"of {len(self.cases)} in {self.seconds:.1f} s · "
            f"{sum(c.model_calls for c in self.cases)} model call(s) · "
            f"{sum(c.last.cached_steps for c in self.cases if c.last)} step(s) from the cache"
        )


def failed_in(out_dir: Path) -> set[str]:
    """The ids of the cases that did not pass in an earlier run's output directory: its results.jsonl lines of any
    status but passed / flaky, and the cases its attempts.jsonl holds (not finished: server gone, stopped).
    ConfigError when the directory holds no QA run's results."""
    import json

    from surfer.core.errors import ConfigError

    out_dir = Path(out_dir)
    results, attempts = out_dir / "results.jsonl", out_dir / "attempts.jsonl"
    if not results.is_file() and not attempts.is_file():
        raise ConfigError(f"--rerun-failed {out_dir}: no results.jsonl or attempts.jsonl of a surfer qa run there")
    failed: set[str] = set()
    passed: set[str] = set()
    for path in (results, attempts):
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict) or not isinstance(record.get("id"), str) or "case" not in record:
                raise ConfigError(f"--rerun-failed {out_dir}: {path.name}:{number} is not a surfer qa case's line")
            if path is results and record.get("status") in ("passed", "flaky"):
                passed.add(record["id"])
            else:
                failed.add(record["id"])
    return failed - passed
