"""A QA case's recordings: one Playwright trace and one video per attempt,
covering the whole case (its cached steps, its agent runs, its expectations),
in the attempt's directory beside its step run directories:

    cases/<suite>/<case>/attempt-1/trace.zip   (browser.trace)
    cases/<suite>/<case>/attempt-1/video.mp4   (video; from every step's screenshots, in order)

The case claims the trace before its browser context opens, so the agent runs
inside it add their step groups to the case's trace instead of saving their
own; their own videos are off (the case's covers them)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from surfer.agent.rundir import TRACE_FILE, artifacts
from surfer.tools.base import Environment

from .outcomes import AttemptReport


async def begin_recording(env: Environment, attempt: AttemptReport) -> bool:
    """Claim the attempt's trace (True when the environment records one)."""
    return await env.begin_trace(Path(attempt.dir) / TRACE_FILE)


async def finish_recording(env: Environment, traced: bool, attempt: AttemptReport, video: str, failed: bool) -> None:
    """Save the trace and make the video as the modes say (retain-on-failure: only when `failed`);
    before the environment closes."""
    if traced:
        await env.end_trace(failed)
    if video == "on" or (video == "retain-on-failure" and failed):
        from surfer.agent.video import make_video

        run_dirs = [d for step in attempt.steps for d in step.run_dirs]
        try:
            await asyncio.to_thread(make_video, run_dirs, attempt.dir)
        except Exception:  # noqa: BLE001 - a video is a view of the case, never a reason for it to fail
            pass


def attempt_recordings(attempt: AttemptReport | None) -> dict[str, Path]:
    """The attempt's trace and video, by kind, where they were written."""
    if attempt is None:
        return {}
    return {kind: Path(attempt.dir) / name for kind, name in artifacts(attempt.dir).items()}


def without_video(config: Any) -> Any:
    """The configuration for the agent runs inside a case: the case makes the one video."""
    return config.model_copy(update={"video": "off"}) if getattr(config, "video", "off") != "off" else config
