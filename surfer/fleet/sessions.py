"""What a batch writes into its output directory for watchers (`surfer view`,
the terminal status line), so they need no connection to the batch process:

    batch.json            the task list (ids, tasks, URLs) and when the batch started
    metrics.jsonl         every few seconds: steps, tasks done, model-call latency per role
    live/<name>.json      one small state file per running session (step, last action, thought,
                          the role being asked and since when), replaced atomically
    live/<name>.jpg       that session's latest screen, downscaled to ~320 px wide

A session's state file is removed once its result is in results.jsonl (its
thumbnail stays: a page may still be loading it)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any, Iterable

from surfer.agent.events import Event, Finished, ModelAsked, ModelCalled, Observed, StepFinished, Waiting
from surfer.models.affinity import current_session
from surfer.models.endpoint import shown_url

LIVE = "live"
BATCH_FILE = "batch.json"
METRICS_FILE = "metrics.jsonl"
THUMB_WIDTH = 320
METRICS_EVERY_S = 2.0


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def thumbnail(image: bytes, width: int = THUMB_WIDTH) -> bytes:
    """A JPEG about `width` pixels wide (blocking: call it off the event loop)."""
    from PIL import Image

    with Image.open(io.BytesIO(image)) as img:
        # a JPEG is decoded at 1/2, 1/4 or 1/8 of its size where that is still `width` wide (a screenshot
        # 1280 px wide: ~1.5 ms instead of ~18 ms of CPU, once per step of every session of a batch)
        img.draft("RGB", (width, max(1, round(img.height * width / img.width))))
        img = img.convert("RGB")
        if img.width > width:
            img = img.resize((width, max(1, round(img.height * width / img.width))), Image.Resampling.BILINEAR)
        out = io.BytesIO()
        img.save(out, "JPEG", quality=70)
        return out.getvalue()


class SessionWatch:
    """An agent listener for one running task: keeps its state and writes
    live/<name>.json (and .jpg) atomically, the image work off the event loop
    and off the agent's path: an event returns at once, the files are written
    in the background in event order (`remove()` waits for them)."""

    def __init__(self, live_dir: Path, name: str, task: Any, stats: Any = None) -> None:
        self.dir = live_dir
        self.name = name
        self.stats = stats
        self.waiting: Waiting | None = None
        self.state: dict[str, Any] = {
            "id": task.id, "task": task.task, "url": task.url, "status": "running", "step": 0, "action": None,
            "thought": None, "asking": None, "asking_since": None, "thumb": None, "thumb_version": 0,
            "started_at": time.time(), "updated_at": time.time(), "attempt": 1,
        }
        self._lock = asyncio.Lock()
        self._pending: set[asyncio.Task[None]] = set()

    @property
    def state_path(self) -> Path:
        return self.dir / f"{self.name}.json"

    @property
    def thumb_path(self) -> Path:
        return self.dir / f"{self.name}.jpg"

    async def __call__(self, event: Event) -> None:
        state = self.state
        image = None
        if isinstance(event, Observed):
            state["step"], state["page"] = event.step, event.url
            image = event.screenshot
        elif isinstance(event, ModelAsked):
            self.waiting = Waiting(event.step, event.role)
            state["asking"], state["asking_since"] = event.role, time.time()
        elif isinstance(event, ModelCalled):
            if self.stats is not None:
                self.stats.model_latency(event.call.role, event.call.seconds)
            self.waiting = None
            state["asking"] = state["asking_since"] = None
        elif isinstance(event, StepFinished):
            record = event.record
            state["step"] = record.index
            state["action"] = record.action.describe() if record.action is not None else None
            state["thought"] = (record.thought or "").strip()[:500] or None
            state["error"] = record.error
        elif isinstance(event, Finished):
            self.waiting = None
            return
        else:
            return
        state["updated_at"] = time.time()
        session = current_session()  # with several model servers: the one this session is on
        if session is not None and session.server is not None:
            state["server"] = shown_url(session.server.base_url)
        if image:
            state["thumb_version"] += 1
            state["thumb"] = f"{LIVE}/{self.thumb_path.name}"
        text = json.dumps(state, ensure_ascii=False).encode("utf-8")
        task = asyncio.get_running_loop().create_task(self._write(text, image))  # the agent does not wait
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _write(self, text: bytes, image: bytes | None) -> None:
        async with self._lock:  # one writer at a time, in event order (asyncio.Lock is first come, first served)
            try:
                await asyncio.to_thread(self._write_files, text, image)
            except OSError:
                pass  # the live view is best effort: a full disk must not end the run

    async def flush(self) -> None:
        """Wait until every event so far is on disk."""
        while self._pending:
            # drop what was awaited here: a finished task's own discard callback may not have run yet, and on
            # Python >= 3.12 gathering finished tasks completes without yielding, so waiting for it would spin
            writes = list(self._pending)
            await asyncio.gather(*writes, return_exceptions=True)
            self._pending.difference_update(writes)

    def _write_files(self, text: bytes, image: bytes | None) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if image:
            try:
                write_atomic(self.thumb_path, thumbnail(image))
            except OSError:
                pass  # not a picture PIL reads: the card keeps its last one
        write_atomic(self.state_path, text)

    async def retry(self) -> None:
        self.state["attempt"] += 1
        self.state["step"], self.state["action"], self.state["thought"] = 0, None, None
        await self.flush()
        await self._write(json.dumps(self.state, ensure_ascii=False).encode("utf-8"), None)

    async def remove(self) -> None:
        await self.flush()
        await asyncio.to_thread(self.state_path.unlink, True)


class BatchFiles:
    """batch.json, metrics.jsonl and the live/ folder of one batch output directory."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.live_dir = out_dir / LIVE
        self.sessions: dict[str, SessionWatch] = {}
        self._claim: int | None = None  # the directory, open and locked, while this batch owns it

    def claim(self) -> None:
        """Blocking: make this batch the only one running in the output directory, or a ConfigError naming the
        one that is (two batches over one directory would run its tasks twice and remove each other's runs).
        The lock is the system's (flock, on the directory itself): a batch that dies leaves none behind."""
        import fcntl

        from surfer.core.errors import ConfigError

        try:  # a file in the way, a folder it may not write: one line before anything runs, not a traceback
            self.out_dir.mkdir(parents=True, exist_ok=True)
            probe = self.out_dir / f".write-check-{os.getpid()}"
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
            probe.unlink()
            handle = os.open(self.out_dir, os.O_RDONLY)
        except OSError as exc:
            why = "it is a file" if self.out_dir.is_file() else exc.strerror or str(exc)
            raise ConfigError(f"cannot write the batch's output directory {self.out_dir}: {why}") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(handle)
            try:
                pid = json.loads((self.out_dir / BATCH_FILE).read_text(encoding="utf-8")).get("pid")
            except (OSError, ValueError, AttributeError):
                pid = None
            by = f" (process {pid})" if pid else ""
            raise ConfigError(f"another batch is running in {self.out_dir}{by}: wait for it to end, or stop it, "
                              "before running one there (both would run the same tasks)") from None
        self._claim = handle

    def release(self) -> None:
        if self._claim is not None:
            os.close(self._claim)  # (closing it releases the lock)
            self._claim = None

    def start(self, tasks: Iterable[Any]) -> None:
        """Blocking (call off the event loop): the task list, and no stale session files."""
        self.live_dir.mkdir(parents=True, exist_ok=True)
        for stale in self.live_dir.iterdir():
            stale.unlink(missing_ok=True)
        listing = [{"id": t.id, "task": t.task, "url": t.url} for t in tasks]
        write_atomic(self.out_dir / BATCH_FILE, json.dumps(
            {"started_at": time.time(), "pid": os.getpid(), "tasks": listing}, ensure_ascii=False).encode("utf-8"))

    def session(self, name: str, task: Any, stats: Any) -> SessionWatch:
        watch = self.sessions[task.id] = SessionWatch(self.live_dir, name, task, stats)
        return watch

    async def end(self, task_id: str) -> None:
        watch = self.sessions.pop(task_id, None)
        if watch is not None:
            await watch.remove()

    def waiting(self) -> list[Waiting]:
        return [w.waiting for w in list(self.sessions.values()) if w.waiting is not None]

    async def write_metrics(self, stats: Any, refresh: Any = None) -> None:
        """Every METRICS_EVERY_S until cancelled: one line of metrics.jsonl (and a last one when cancelled);
        `refresh()` first (several model servers: their /metrics read again)."""
        try:
            while True:
                await asyncio.sleep(METRICS_EVERY_S)
                if refresh is not None:
                    await refresh()
                await self.metrics_line(stats)
        finally:
            await asyncio.shield(self.metrics_line(stats))

    async def metrics_line(self, stats: Any) -> None:
        line = json.dumps(stats.metrics()) + "\n"
        await asyncio.to_thread(_append, self.out_dir / METRICS_FILE, line)


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line)


def percentiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {"p50": round(statistics.median(ordered), 3), "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3)}
