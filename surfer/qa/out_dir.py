"""A QA run's output directory: what in it a run would replace but did not write (another command's results),
refused before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from surfer.core.errors import ConfigError


def foreign_output(out_dir: Path) -> Optional[str]:
    """What in `out_dir` a QA run would replace but did not write: a results.jsonl / attempts.jsonl whose lines
    are not cases', or a cases/ folder that holds no case attempts. None when there is nothing, or a QA run's."""
    import json

    for name in ("results.jsonl", "attempts.jsonl"):
        path = out_dir / name
        if path.is_file():
            with path.open(encoding="utf-8", errors="replace") as handle:
                first = handle.readline()
            try:
                record = json.loads(first) if first.strip() else {}
            except ValueError:
                record = None
            if not isinstance(record, dict) or (record and not {"suite", "case"} <= record.keys()):
                return f"a {name} of something else"
    cases = out_dir / "cases"
    # a case of a QA run has attempt folders, or only its report.html when it could not start (its page did not open)
    if cases.is_dir() and any(cases.iterdir()) and not any(cases.glob("*/*/attempt-*")) and not any(cases.glob("*/*/report.html")):
        return "a cases/ folder of its own"
    return None


def check_out_dir(out_dir: Path) -> None:
    """ConfigError when `out_dir` holds what a QA run would replace but did not write (see foreign_output)."""
    foreign = foreign_output(out_dir)
    if foreign is not None:
        raise ConfigError(f"--out {out_dir} holds {foreign}, not a QA run's results: choose another directory")
