"""A run directory: where it is (`runs/<timestamp>-<slug>/` unless the caller
names one), whether a new run may write into it, whether a run leaves one at
all, and reading and writing its files (an atomic write, the steps of
trajectory.jsonl). Shared by the SDK and the CLI (`surfer run`, `surfer
demo`), the writer (trajectory.py), the report (report.py), QA and export."""

from __future__ import annotations

import json
import os
import re
import unicodedata
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from surfer.core.errors import ConfigError, RunError

# Where a run that is given no directory of its own is recorded: `surfer run`,
# `surfer demo` and the SDK alike (relative to the working directory).
RUNS_ROOT = Path("runs")
RUN_FILES = ("run.json", "trajectory.jsonl", "result.json")


def slugify(text: str, limit: int = 40, distinct: bool = False) -> str:
    """A file name from `text`: its letters and digits (in any script: 'Café' -> 'café', '検索' stays),
    lower case, the rest turned into dashes; at most `limit` characters and twice that in UTF-8 bytes.
    `distinct`: a slug that had to be cut ends in 6 hex digits of the whole one, so that two long texts that differ
    only past the cut (QA cases, pytest parameters) get names of their own; a short one is as without it."""
    whole = re.sub(r"[\W_]+", "-", unicodedata.normalize("NFKC", text).lower()).strip("-")
    fits = len(whole) <= limit and len(whole.encode()) <= 2 * limit
    if distinct and not fits:
        import hashlib

        return f"{slugify(whole, limit - 7)}-{hashlib.sha1(whole.encode()).hexdigest()[:6]}"
    slug = whole[:limit]
    while len(slug.encode()) > 2 * limit:
        slug = slug[:-1]
    return slug.strip("-") or "run"


def default_run_dir(task: str, root: str | Path | None = None) -> Path:
    """`<root>/<timestamp>-<4 hex>-<slug of the task>`, under `RUNS_ROOT` by default."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(RUNS_ROOT if root is None else root) / f"{stamp}-{uuid.uuid4().hex[:4]}-{slugify(task)}"


def check_out_dir(value: Any, where: str = "out_dir=") -> Any:
    """`value`, where it names a directory (a str or a path) or is False (record nothing) or None; else
    ConfigError (out_dir=True, a number: it failed inside pathlib)."""
    if value is None or value is False or isinstance(value, (str, os.PathLike)):
        return value
    raise ConfigError(f"{where} takes a directory (a str or a Path), or False to record nothing; not {value!r}")


def claim_run_dir(path: str | Path, what: str = "run") -> Path:
    """`path` if a new run may write into it: a directory that does not exist
    yet, or an empty one. Anything else is refused (ConfigError naming it):
    a second run written over a first would mix their steps, screenshots and
    results. `what`: what the directory is for ("session": a session's, one
    run directory per task and session.json)."""
    path = Path(check_out_dir(path))
    if not path.exists():
        if path.is_symlink():
            raise ConfigError(f"{what} directory {path} is a broken symbolic link: give a new directory")
        _check_can_make(path, what)
        return path
    if not path.is_dir():
        raise ConfigError(f"{what} directory {path} is a file: give a new or empty directory")
    held = sorted(p.name for p in path.iterdir())
    if held:
        holds = ("it holds a run" if any(name in held for name in RUN_FILES)
                 else "it holds a session" if "session.json" in held else f"it holds {held[0]!r}")
        raise ConfigError(
            f"{what} directory {path} is not empty ({holds}): a {what} is written into a new or empty directory, "
            f"so that two {what}s never mix — give another directory, or remove this one"
        )
    return path


def _check_can_make(path: Path, what: str = "run") -> None:
    """ConfigError when the directory `path` cannot be made (a file where a folder of it should be, a
    read-only file system, no permission), found before the run starts rather than at its first step (an
    internal error, a traceback). Its missing parents are made and removed again; `path` itself is judged
    from its parent without being made: a run that never starts leaves nothing, and the run's directory
    appears only when the run opens it."""
    missing: list[Path] = []
    existing = path.parent
    while not os.path.lexists(existing) and existing.parent != existing:
        missing.append(existing)
        existing = existing.parent
    if os.path.lexists(existing) and not existing.is_dir():
        raise ConfigError(f"{what} directory {path} cannot be made: {existing} is a file, not a directory")
    made: list[Path] = []
    try:
        for directory in reversed(missing):
            try:
                directory.mkdir()
            except FileExistsError:  # another run, started at the same time, made it first
                continue
            made.append(directory)
        parent = path.parent
        if os.statvfs(parent).f_flag & os.ST_RDONLY:
            raise ConfigError(f"{what} directory {path} cannot be made: {parent} is on a read-only file system")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise ConfigError(f"{what} directory {path} cannot be made: {parent} is not writable by this user")
    except OSError as exc:
        raise ConfigError(f"{what} directory {path} cannot be made: {exc.strerror or exc}") from None
    finally:
        for directory in reversed(made):
            try:
                directory.rmdir()
            except OSError:  # (another run wrote into it meanwhile: it is that run's now)
                pass


class RunDirLost(RunError):
    """The run directory was deleted or moved during the run: the run ends `error` (`environment`) with this
    reason, where the writer's OSError was a traceback. (A full disk is still raised as its OSError: a batch
    stops on it and runs the task again on resume.)"""

    def __init__(self, path: Path, exc: OSError) -> None:
        super().__init__(f"the run directory {path} was deleted or moved during the run: "
                         f"{exc.filename or path} could not be written ({exc.strerror or exc})")


class RunDirTaken(ConfigError):
    """Another run opened this run's directory first: this run writes nothing into it."""


def open_run_dir(path: Path, run_json: str) -> None:
    """Make `path` a run's directory by writing its `run.json`, atomically and only if no other run
    wrote one meanwhile: two runs started at once with the same directory both pass
    `claim_run_dir`, and the second to open it is refused (ConfigError) rather than mixing its
    steps into the first one's."""
    (path / "screenshots").mkdir(parents=True, exist_ok=True)
    tmp = path / f".run.json.{uuid.uuid4().hex[:8]}.tmp"
    tmp.write_text(run_json, encoding="utf-8")
    try:
        try:
            os.link(tmp, path / "run.json")  # fails if run.json exists: the directory is another run's
        except FileExistsError:
            raise
        except OSError:  # a file system without hard links: created exclusively, then written
            with open(path / "run.json", "x", encoding="utf-8") as handle:
                handle.write(run_json)
    except FileExistsError:
        raise RunDirTaken(
            f"run directory {path} was taken by another run started at the same time: "
            "a run is written into a new or empty directory, so that two runs never mix — give another directory"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)


def leaves_record(status: str, error_kind: str | None, reached_server: bool) -> bool:
    """Whether a run leaves its directory behind: every run does, except one
    that ended for want of its model server before that server was ever
    reached (no step, nothing seen: the one-line error says it all)."""
    return reached_server or not (status == "error" and error_kind == "unreachable")


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # (a full disk: no half-written .tmp left beside the files)
        tmp.unlink(missing_ok=True)
        raise


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
