"""The run directory, written step by step from the event stream:

    run.json           task, URL, configuration summary
    trajectory.jsonl   one JSON line per finished step; a person's actions after a take-over as
                       `actor: "human"` lines (agent/handover.py)
    tokens.jsonl       with record_tokens: one line per model call, token for token (tokens_record.py)
    screenshots/       the screenshot each step looked at (human-NNN-before / -after: a human step's)
    result.json        the final RunResult (also after errors and Ctrl-C)
    report.html        a self-contained page to read the run

A crash or Ctrl-C loses at most the step in progress. The directory appears
when the first step starts (or when the run ends before it, with its result);
a run that never reached its model server leaves none (rundir.leaves_record):
its `Finished` result carries no `run_dir`."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any, Callable

from surfer.core.retention import keeps

from .events import Event, Finished, ModelCalled, RunStarted, StepFinished, StepStarted
from .handover import HumanActed
from .report import render_report
from .rundir import RunDirLost, open_run_dir, read_trajectory, write_atomic  # noqa: F401  (read_trajectory: also imported from here)
from .video import make_video

log = logging.getLogger(__name__)


class TrajectoryWriter:
    """`scrub` (e.g. `Secrets.scrub_obj`) is applied to every record before it is written."""

    def __init__(self, run_dir: str | Path, scrub: Callable[[Any], Any] | None = None, video: str = "off") -> None:
        self.run_dir = Path(run_dir)
        self.scrub = scrub or (lambda value: value)
        self.video = video  # `--video`: video.mp4 / video.webp from the step screenshots (video.py)
        self._meta: dict[str, Any] | None = None  # run.json, written with the directory
        self._made = False
        self._tokens: Any = None  # the run's TokenLog, from its first call with token ids
        self._opening: asyncio.Future[None] | None = None
        self._lost = False  # the directory could not be written (deleted, disk full): the run ended on it

    async def handle(self, event: Event) -> None:
        """Writes what `event` adds; a directory deleted or moved during the run ends it (RunDirLost), and its
        result, written last, is then given up quietly. Other write errors (a full disk) are raised as they are."""
        try:
            await self._handle(event)
        except OSError as exc:
            if not self._made or self.run_dir.is_dir():  # (not lost: a full disk, a read-only file system)
                if exc.filename is None:  # (a write cut short names no file: the run directory is what filled up)
                    exc.filename = str(self.run_dir)
                raise
            if isinstance(event, Finished):  # (the run has ended: its result is the caller's, the record lost)
                if not self._lost:  # (else the run's reason says so already)
                    log.warning("%s", RunDirLost(self.run_dir, exc))
                return
            self._lost = True
            raise RunDirLost(self.run_dir, exc) from None

    async def _handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._meta = {"run_id": event.run_id, "task": event.task, "url": event.url, "config": event.config}
        elif isinstance(event, StepStarted) and not self._made:
            # The directory opens whole even when the run is stopped meanwhile: Finished then waits for it.
            self._opening = asyncio.ensure_future(asyncio.to_thread(self._start))
            await asyncio.shield(self._opening)
        elif isinstance(event, ModelCalled) and event.call.tokens is not None:
            await asyncio.to_thread(self._call_tokens, event)
        elif isinstance(event, StepFinished):
            await asyncio.to_thread(self._step, event)
        elif isinstance(event, HumanActed):
            await asyncio.to_thread(self._human_step, event)
        elif isinstance(event, Finished):
            if self._opening is not None:
                await asyncio.wait([self._opening])
                if self._opening.cancelled() or self._opening.exception() is not None:
                    return  # the directory could not be opened: its error is the run's (raised where it happened)
            await asyncio.to_thread(self._finish, event)

    def _start(self) -> None:
        """The directory, with run.json and an empty trajectory.jsonl (present even if no step finishes)."""
        if self._made:
            return
        open_run_dir(self.run_dir, json.dumps(self.scrub(self._meta or {}), indent=2))
        (self.run_dir / "trajectory.jsonl").touch()
        self._made = True

    def _call_tokens(self, event: ModelCalled) -> None:
        from .tokens_record import TokenLog

        self._start()
        if self._tokens is None:
            self._tokens = TokenLog(self.run_dir)
        call = event.call
        self._tokens.add(call.seq if call.seq is not None else -1, event.step, call.role, call.error is None, call.tokens)

    def _step(self, event: StepFinished) -> None:
        self._start()
        record = event.record
        if record.screenshot:
            name = f"screenshots/step-{record.index:03d}.{record.screenshot_ext}"
            (self.run_dir / name).write_bytes(record.screenshot)
            record.screenshot_file = name
        with (self.run_dir / "trajectory.jsonl").open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(self.scrub(record.to_dict()), ensure_ascii=False) + "\n")
            handle.flush()

    def _human_step(self, event: HumanActed) -> None:
        self._start()
        step = event.step
        for shot, side in ((step.taken.before, "before"), (step.taken.after, "after")):
            if shot is None:
                continue
            name = f"screenshots/human-{step.number:03d}-{side}.{shot.screenshot.extension}"
            (self.run_dir / name).write_bytes(shot.screenshot.data)
            if side == "before":
                step.screenshot_file = name
            else:
                step.screenshot_after_file = name
        with (self.run_dir / "trajectory.jsonl").open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(self.scrub(step.to_dict()), ensure_ascii=False) + "\n")
            handle.flush()

    def _finish(self, event: Finished) -> None:
        if event.result.run_dir is None:  # a run that leaves no record
            return
        self._start()
        if keeps(self.video, event.result.status):
            try:
                made = make_video(self.run_dir)
            except Exception as exc:  # noqa: BLE001 - a video that cannot be made must not lose the run's result
                log.warning("no video for %s: %r", self.run_dir, exc)
                made = None
            if made is not None:
                event.result.artifacts["video"] = made.name
        write_atomic(self.run_dir / "result.json", json.dumps(self.scrub(event.result.model_dump(mode="json")), indent=2))
        write_atomic(self.run_dir / "report.html", render_report(self.run_dir))
