"""What `surfer view` shows, read from files only (no connection to the batch):
a batch output directory (batch.json, results.jsonl, metrics.jsonl, live/),
a `runs/` folder of run directories, or a single run directory.

`OutDir.snapshot(since)` is the page's whole state: totals, running sessions,
the finished tasks from row `since` on, failures by reason and chart series.
results.jsonl and metrics.jsonl are read incrementally (only appended bytes)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surfer.fleet.batch.results import final_results
from surfer.fleet.sessions import BATCH_FILE, LIVE, METRICS_FILE

# A batch whose metrics.jsonl has not grown for this long is not running (it writes a line every 2 s).
STALE_METRICS_S = 30.0

# The page's statuses: queued, running, success, failure, needs_approval (a person must allow an action),
# needs_input (the agent asked a question nobody answered), error,
# and interrupted (a run directory of `surfer run` stopped by a signal; a batch's results hold no such line).
SHOWN = {"success": "success", "failed": "failure", "limit": "failure", "stuck": "failure", "needs_approval": "needs_approval",
         "needs_input": "needs_input",
         "error": "error", "interrupted": "interrupted"}


@dataclass
class JsonLines:
    """A JSON-lines file read incrementally; a torn last line waits for its end."""

    path: Path
    rows: list[dict[str, Any]] = field(default_factory=list)
    _offset: int = 0
    _size_key: tuple[int, int] | None = None
    _inode: int | None = None

    def read(self) -> list[dict[str, Any]]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return self.rows
        if stat.st_size < self._offset or stat.st_ino != self._inode:  # replaced or truncated: start over
            self.rows, self._offset, self._inode = [], 0, stat.st_ino
        if stat.st_size == self._offset:
            return self.rows
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1
        for line in data[:end].splitlines():
            try:
                self.rows.append(json.loads(line))
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
        self._offset += end
        return self.rows


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _described(action: Any) -> str | None:
    """A step's action as the batch's live state and the terminal show it: `click(target='...')`."""
    if not isinstance(action, dict):
        return None
    from pydantic import ValidationError

    from surfer.core.actions import ACTION_ADAPTER, headline

    try:
        return ACTION_ADAPTER.validate_python(action).describe()
    except ValidationError:  # an action of another version: as a person reads it
        return headline(action)


def failure_reason(reason: str | None) -> str:
    """A group key for failures: the reason with numbers, URLs and quoted text blanked."""
    text = (reason or "no reason given").splitlines()[0]
    text = re.sub(r"https?://\S+", "<url>", text)
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    return re.sub(r"\d+(\.\d+)?", "#", text)[:160]


class OutDir:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            from surfer.core.errors import ConfigError

            raise ConfigError(f"{root} is not a directory (give a batch --out directory, a runs/ folder or a run directory)")
        if (self.root / "junit.xml").exists() and (self.root / "cases").is_dir():
            from surfer.core.errors import ConfigError

            raise ConfigError(f"{root} is the output of `surfer qa`: open its index.html (each case's report is linked "
                              "there), or give `surfer view` one of its cases/<suite>/<case>/attempt-<n> folders")
        self.results = JsonLines(self.root / "results.jsonl")
        self.metrics = JsonLines(self.root / METRICS_FILE)
        self._runs: dict[str, dict[str, Any]] = {}  # finished run directories (runs/ folder, single run)
        self._steps: dict[str, JsonLines] = {}  # running run directories' trajectory.jsonl
        self._derived: dict[str, tuple[Any, Any]] = {}  # what is computed from a file, by its row count

    def _cached(self, name: str, key: Any, compute: Any) -> Any:
        """`compute()` again only when `key` (e.g. the rows read so far) changed: polls of an unchanged file cost nothing."""
        cached = self._derived.get(name)
        if cached is None or cached[0] != key:
            cached = self._derived[name] = (key, compute())
        return cached[1]

    @property
    def kind(self) -> str:
        if (self.root / "results.jsonl").exists() or (self.root / BATCH_FILE).exists():
            return "batch"
        if (self.root / "run.json").exists():
            return "run"
        return "runs"

    # -- reading -----------------------------------------------------------------

    def _batch_finished(self) -> list[dict[str, Any]]:
        rows = []
        # one row per task, its final outcome (an older version's file may hold attempts that were not)
        for record in final_results(self.results.read()).values():
            run_dir = record.get("run_dir") or ""
            rows.append({
                "id": record["id"], "status": SHOWN[record["status"]], "result": record["status"],
                "task": record.get("task"), "answer": record.get("answer"), "reason": record.get("reason"),
                "steps": record.get("steps"), "seconds": record.get("seconds"), "error_kind": record.get("error_kind"),
                "browser_crashes": record.get("browser_crashes") or 0, "finished_at": record.get("finished_at"),
                "report": f"{run_dir}/report.html" if run_dir else None,
                "artifacts": record.get("artifacts") or {},  # trace / video, relative to the batch's directory
            })
        return rows

    def _running_sessions(self) -> list[dict[str, Any]]:
        live = self.root / LIVE
        sessions = []
        if live.is_dir():
            for path in sorted(live.glob("*.json")):
                state = _read_json(path)
                if isinstance(state, dict) and state.get("id"):
                    sessions.append(state)
        return sessions

    def _run_dirs(self) -> list[Path]:
        if self.kind == "run":
            return [self.root]
        found = []
        for path in sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if (path / "run.json").exists():
                found.append(path)
            elif (path / "session.json").exists():  # a session of `surfer run` at a terminal: a run directory per task
                found += sorted(p for p in path.iterdir() if p.is_dir() and (p / "run.json").exists())
        return found

    def _from_run_dirs(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        finished, running = [], []
        for run_dir in self._run_dirs():
            rel = run_dir.relative_to(self.root).as_posix() if run_dir != self.root else ""
            prefix = f"{rel}/" if rel else ""
            key = rel or run_dir.name
            if key in self._runs:
                finished.append(self._runs[key])
                continue
            meta = _read_json(run_dir / "run.json") or {}
            result = _read_json(run_dir / "result.json")
            if isinstance(result, dict) and result.get("status") in SHOWN:  # ended (a stopped run too): not running
                row = {
                    "id": key, "status": SHOWN[result["status"]], "result": result["status"], "task": result.get("task"),
                    "answer": result.get("answer"), "reason": result.get("reason"), "steps": result.get("steps"),
                    "seconds": (result.get("timings") or {}).get("seconds"), "error_kind": result.get("error_kind"),
                    "browser_crashes": 0, "finished_at": None, "report": f"{prefix}report.html",
                    "artifacts": {k: f"{prefix}{v}" for k, v in (result.get("artifacts") or {}).items()},
                }
                self._runs[key] = row
                finished.append(row)
                continue
            shots = sorted((run_dir / "screenshots").glob("step-*")) if (run_dir / "screenshots").is_dir() else []
            # read incrementally: a long run's steps are not parsed again every second
            steps = [s for s in self._steps.setdefault(key, JsonLines(run_dir / "trajectory.jsonl")).read() if isinstance(s, dict)]
            last = steps[-1] if steps else {}
            human = sum(step.get("actor") == "human" for step in steps)  # a person's steps after a take-over
            action = _described(last.get("action"))
            if last.get("actor") == "human":
                from surfer.core.actions import headline

                action = f"[person] {headline(last.get('action'))}"
            running.append({
                "id": key, "task": meta.get("task"), "url": meta.get("url"), "status": "running", "step": len(steps) - human,
                "action": action,
                "thought": last.get("thought"), "asking": None, "asking_since": None,
                "thumb": f"{prefix}{shots[-1].relative_to(run_dir).as_posix()}" if shots else None,
                "thumb_version": len(shots), "updated_at": time.time(),
            })
        return finished, running

    # -- the snapshot ---------------------------------------------------------------

    def snapshot(self, since: int = 0) -> dict[str, Any]:
        batch = _read_json(self.root / BATCH_FILE) if self.kind == "batch" else None
        if self.kind == "batch":
            finished = self._cached("finished", len(self.results.read()), self._batch_finished)
            running = self._running_sessions()
        else:
            finished, running = self._from_run_dirs()
        finished_ids = {row["id"] for row in finished}
        running = [s for s in running if s["id"] not in finished_ids]
        running_ids = {s["id"] for s in running}
        tasks = (batch or {}).get("tasks") or []
        queued = [{"id": t["id"], "task": t.get("task"), "status": "queued"} for t in tasks
                  if t.get("id") not in finished_ids and t.get("id") not in running_ids]
        total = max(len(tasks), len(finished) + len(running))
        metrics = self.metrics.read()
        totals = self._totals(batch, finished, running, total, metrics)
        if totals["stopped"] and running:  # a killed batch left its sessions' live files: none runs (they run on resume)
            queued = [{"id": s["id"], "task": s.get("task"), "status": "queued"} for s in running] + queued
            running, totals["running"] = [], 0
        return {
            "kind": self.kind, "root": self.root.name, "now": time.time(),
            "totals": totals,
            "running": running,
            "queued": queued[:200], "queued_count": len(queued),
            "finished": finished[since:], "finished_count": len(finished),
            "failures": self._cached("failures", (len(finished), len(self.results.rows)), lambda: self._failures(finished)),
            "charts": self._cached("charts", len(metrics), lambda: self._charts(metrics)),
        }

    def _totals(self, batch: Any, finished: list[dict[str, Any]], running: list[Any], total: int, metrics: list[Any]) -> dict[str, Any]:
        count = self._cached("counts", len(finished), lambda: {
            s: sum(1 for r in finished if r["status"] == s) for s in ("success", "failure", "needs_approval", "needs_input", "error", "interrupted")})
        done = len(finished)
        started = (batch or {}).get("started_at")
        elapsed = None
        # a batch writes metrics every few seconds while it runs: none for a while, it has ended or was stopped
        last_written = (metrics[-1].get("t") if metrics else None) or None
        ended = last_written is not None and (time.time() - last_written > STALE_METRICS_S or (not running and done >= total))
        if started:
            elapsed = max(0.0, (last_written if ended else time.time()) - started)
        last = metrics[-1] if metrics else {}
        steps = self._cached("steps", len(finished), lambda: sum(r.get("steps") or 0 for r in finished))
        steps_per_s = (last.get("steps", 0) / last["elapsed"]) if last.get("elapsed") else None
        ran = done - (last.get("skipped") or 0)  # finished in this run: a resumed batch's earlier tasks took no time of it
        eta = (total - done) * elapsed / ran if elapsed and ran > 0 and done < total else None
        return {
            "done": done, "total": total, "running": len(running), **count,
            "browser_crashes": self._cached("crashes", len(finished), lambda: sum(r.get("browser_crashes") or 0 for r in finished)),
            "steps": steps, "steps_per_s": steps_per_s, "elapsed": elapsed, "eta": None if ended else eta,
            # a batch that stopped before its tasks were done (Ctrl-C, a server gone, a killed process): they run on resume
            "stopped": bool(batch) and ended and done < total,
            # "waiting for the model server at URL since HH:MM:SS" while the batch holds for it
            "server": last.get("server") if done < total else None,
            # several model servers: each one's state, sessions, steps/s and waiting requests (metrics.jsonl)
            "servers": last.get("servers") or [],
        }

    @staticmethod
    def _failures(finished: list[dict[str, Any]]) -> list[dict[str, Any]]:
        groups: dict[str, dict[str, Any]] = {}
        for row in finished:
            if row["status"] == "success":
                continue
            key = failure_reason(row.get("reason"))
            group = groups.setdefault(key, {"reason": key, "count": 0, "ids": [], "status": row["result"]})
            group["count"] += 1
            if len(group["ids"]) < 5:
                group["ids"].append(row["id"])
        return sorted(groups.values(), key=lambda g: -g["count"])

    @staticmethod
    def _charts(metrics: list[dict[str, Any]]) -> dict[str, Any]:
        series: dict[str, Any] = {"t": [], "done": [], "success_rate": [], "steps_per_s": [], "latency": {}}
        previous = None
        start = None  # a resumed batch's lines go on from its first run's: the clock and the tasks its earlier runs ended
        for line in metrics[-600:]:
            elapsed = line.get("elapsed")
            if elapsed is None:
                continue
            if start is None and isinstance(line.get("t"), (int, float)):
                start = line["t"] - elapsed
            t = line["t"] - start if start is not None and isinstance(line.get("t"), (int, float)) else elapsed
            series["t"].append(round(t, 1))
            done = line.get("done", 0) + line.get("skipped", 0)
            series["done"].append(done)
            succeeded = line.get("succeeded", 0) + line.get("skipped_succeeded", 0)
            series["success_rate"].append(round(succeeded / done, 3) if done else None)
            if previous is not None and elapsed > previous["elapsed"]:  # (within one run of the batch)
                series["steps_per_s"].append(round((line.get("steps", 0) - previous.get("steps", 0)) / (elapsed - previous["elapsed"]), 3))
            else:
                series["steps_per_s"].append(None)
            for role, value in (line.get("latency") or {}).items():
                if value:
                    per = series["latency"].setdefault(role, {"t": [], "p50": [], "p95": []})
                    per["t"].append(round(t, 1))
                    per["p50"].append(value["p50"])
                    per["p95"].append(value["p95"])
            previous = line
        return series
