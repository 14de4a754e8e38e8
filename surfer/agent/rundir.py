"""Reading and writing a run directory's files: an atomic write (a reader
never sees half a file) and the steps of trajectory.jsonl. Shared by the
writer (trajectory.py), the report (report.py), QA and export."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def read_trajectory(run_dir: str | Path) -> list[dict[str, Any]]:
    """The steps of a run directory; a torn last line (crash mid-write) is skipped."""
    path = Path(run_dir) / "trajectory.jsonl"
    steps = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                steps.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return steps
