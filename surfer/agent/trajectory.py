"""The run directory, written step by step from the event stream:

    run.json           task, URL, configuration summary
    trajectory.jsonl   one JSON line per finished step
    screenshots/       the screenshot each step looked at
    result.json        the final RunResult (also after errors and Ctrl-C)
    trace.zip          the Playwright trace (browser.trace; saved by the environment)
    video.mp4          the steps' screenshots as a video (video; video.webp without an encoder)
    report.html        a self-contained page to read the run

A crash or Ctrl-C loses at most the step in progress."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Callable

from .events import Event, Finished, RunStarted, StepFinished
from .report import render_report
from .rundir import read_trajectory, write_atomic  # noqa: F401  (read_trajectory: also imported from here)


class TrajectoryWriter:
    """`scrub` (e.g. `Secrets.scrub_obj`) is applied to every record before it is written."""

    def __init__(self, run_dir: str | Path, scrub: Callable[[Any], Any] | None = None, video: str = "off") -> None:
        self.run_dir = Path(run_dir)
        self.scrub = scrub or (lambda value: value)
        self.video = video  # off, on, retain-on-failure: a video of the run from its screenshots
        self.video_error: str | None = None

    async def handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            await asyncio.to_thread(self._start, event)
        elif isinstance(event, StepFinished):
            await asyncio.to_thread(self._step, event)
        elif isinstance(event, Finished):
            await asyncio.to_thread(self._finish, event)

    def _start(self, event: RunStarted) -> None:
        (self.run_dir / "screenshots").mkdir(parents=True, exist_ok=True)
        meta = {"run_id": event.run_id, "task": event.task, "url": event.url, "config": event.config}
        write_atomic(self.run_dir / "run.json", json.dumps(self.scrub(meta), indent=2))
        (self.run_dir / "trajectory.jsonl").touch()  # present from the start, even if no step finishes

    def _step(self, event: StepFinished) -> None:
        record = event.record
        if record.screenshot:
            name = f"screenshots/step-{record.index:03d}.{record.screenshot_ext}"
            (self.run_dir / name).write_bytes(record.screenshot)
            record.screenshot_file = name
        with (self.run_dir / "trajectory.jsonl").open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(self.scrub(record.to_dict()), ensure_ascii=False) + "\n")
            handle.flush()

    def _finish(self, event: Finished) -> None:
        write_atomic(self.run_dir / "result.json", json.dumps(self.scrub(event.result.model_dump(mode="json")), indent=2))
        if self.video == "on" or (self.video == "retain-on-failure" and not event.result.ok):
            from .video import make_video

            try:
                make_video([self.run_dir], self.run_dir)
            except Exception as exc:  # noqa: BLE001 - a video is a view of the run: its failure is noted, the run stands
                self.video_error = f"no video: {exc}"
        write_atomic(self.run_dir / "report.html", render_report(self.run_dir))
