"""Replaying a cached step without the model, healing where the page changed.

Each cached action replays at its recorded point while its anchor still
matches: the same page (URL pattern), the same element at the point (browser)
and a similar image crop around it. When it does not match, the localizer is
asked for the action's target again; its point is taken when the element
there is the same kind of control (a moved or renamed button). Otherwise the
replay stops and the step goes back to the policy (`ReplayOutcome.missed`)."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from surfer.agent.events import ModelCall, RunStarted, StepFinished, StepRecord, Finished
from surfer.agent.result import RunResult
from surfer.agent.roles import StepFailed
from surfer.agent.trajectory import TrajectoryWriter
from surfer.core.actions import CssPoint, targets_of, with_points
from surfer.core.errors import ActionFailed, ActionNotSupported, EnvironmentFailure
from surfer.models.imaging import prepare_image

from .anchors import CROP_TOLERANCE, Fingerprint, crop_distance
from .cache import CachedAction, CachedStep
from .executor import QaEnvironment


@dataclass
class ReplayOutcome:
    replayed: int = 0  # actions performed from the cache
    healed: list[str] = field(default_factory=list)  # what was healed, one line each
    missed: Optional[str] = None  # why the replay stopped (the policy takes over), None when it went through
    model_calls: int = 0


def _record_screen(record: StepRecord, env: QaEnvironment) -> None:
    observation = env.last
    if observation is None:
        return
    shot = observation.screenshot
    record.url, record.title = observation.url, observation.title
    record.screenshot, record.screenshot_ext = shot.data, shot.extension
    record.screen = {"width": shot.size.width, "height": shot.size.height, "scale": shot.scale, "origin": list(shot.origin)}


class StepReplay:
    """Replays one cached step into its own run directory (trajectory and report, like a model run)."""

    def __init__(self, env: QaEnvironment, localizer: Any, profile: Any, run_dir: Path, goal: str) -> None:
        self.env = env
        self.localizer = localizer
        self.profile = profile
        self.writer = TrajectoryWriter(run_dir, scrub=env.secrets.scrub_obj if env.secrets else None)
        self.run_dir = run_dir
        self.goal = goal
        self.outcome = ReplayOutcome()

    async def run(self, cached: CachedStep) -> ReplayOutcome:
        started = time.monotonic()
        run_id = uuid.uuid4().hex[:12]
        await self.writer.handle(RunStarted(run_id, self.goal, self.env.url, str(self.run_dir), {"replay": "action cache"}))
        for index, cached_action in enumerate(cached.actions, 1):
            if not await self._action(index, cached_action):
                break
        else:
            if cached.end_url and self.env.kind == "browser" and self.env.page_pattern() != cached.end_url:
                self.outcome.missed = f"the step ended on {self.env.page_pattern()}, the cache expected {cached.end_url}"
        status = "success" if self.outcome.missed is None else "failed"
        result = RunResult(
            status=status, task=self.goal, answer=cached.answer if status == "success" else None,
            reason=self.outcome.missed or ("replayed from the action cache" + (f"; healed: {'; '.join(self.outcome.healed)}" if self.outcome.healed else "")),
            steps=len(cached.actions), run_id=run_id, run_dir=str(self.run_dir),
        )
        result.timings.seconds = round(time.monotonic() - started, 3)
        await self.writer.handle(Finished(result))
        return self.outcome

    async def _action(self, index: int, cached: CachedAction) -> bool:
        """Replay one action; False when the replay must stop."""
        t0 = time.perf_counter()
        record = StepRecord(index)
        try:
            await self.env.observe()
            record.timings.screenshot = time.perf_counter() - t0
        except EnvironmentFailure as exc:
            self.outcome.missed = str(exc)
            return False
        _record_screen(record, self.env)
        action = cached.resolved()
        record.action = action
        record.thought = "replayed from the action cache"
        try:
            where = self.env.page_pattern()
            if self.env.kind == "browser" and cached.url and where != cached.url:
                return self._miss(record, f"action {index} was recorded on {cached.url}, the page is {where}")
            if targets_of(action):
                mismatch = await self._mismatch(cached, CssPoint(**cached.points[0]))
                if mismatch:
                    healed = await self._heal(record, action, cached, mismatch)
                    if healed is None:
                        return False
                    action = healed
            record.action, record.points = action, [p for p in (getattr(action, "point", None), getattr(action, "to_point", None)) if p]
            try:
                outcome = await self.env.perform(action)
            except (ActionFailed, ActionNotSupported, ValueError) as exc:
                return self._miss(record, f"action {index} failed: {exc}")
            record.outcome = outcome.to_dict()
            record.timings.action, record.timings.settle = outcome.action_seconds, outcome.settle_seconds
            self.outcome.replayed += 1
            return True
        finally:
            record.timings.total = time.perf_counter() - t0
            await self.writer.handle(StepFinished(record))

    def _miss(self, record: StepRecord, why: str) -> bool:
        record.error = why
        self.outcome.missed = why
        return False

    async def _mismatch(self, cached: CachedAction, point: CssPoint) -> Optional[str]:
        """Why the anchor no longer matches at `point`, or None when it does."""
        expected = Fingerprint.from_dict(cached.element)
        if expected is not None:
            found = await self.env.fingerprint(point)
            if not expected.same_element(found):
                return f"expected {_show(expected)}, found {_show(found)}"
        if cached.crop_png:
            crop = await self.env.crop(point)
            distance = await asyncio.to_thread(crop_distance, cached.crop_png, crop) if crop else 255.0
            if distance > CROP_TOLERANCE:
                return f"the image around the point changed (difference {distance:.0f}/255)"
        return None

    async def _heal(self, record: StepRecord, action: Any, cached: CachedAction, mismatch: str) -> Any:
        """Ask the localizer for the action's targets again; the healed action, or None."""
        async def sink(call: ModelCall) -> None:
            record.calls.append(call)
            record.timings.model += call.seconds
            self.outcome.model_calls += 1

        assert self.env.last is not None
        image = await prepare_image(self.env.last.screenshot, self.profile.image)
        try:
            points = [await self.localizer.locate(target, image, sink) for target in targets_of(action)]
        except StepFailed as exc:
            self._miss(record, f"{mismatch}; the localizer failed: {exc}")
            return None
        expected = Fingerprint.from_dict(cached.element)
        if expected is not None:
            found = await self.env.fingerprint(points[0])
            if not expected.same_kind(found):
                self._miss(record, f"{mismatch}; the localizer points at {_show(found)} instead")
                return None
        healed = with_points(action, points)
        target = targets_of(action)[0]
        note = f"{target!r}: {mismatch}; relocated to {points[0]}"
        record.thought = f"healed: {note}"
        self.outcome.healed.append(note)
        return healed


def _show(fingerprint: Optional[Fingerprint]) -> str:
    if fingerprint is None:
        return "nothing"
    return f"{fingerprint.role or fingerprint.tag} {fingerprint.name!r} ({fingerprint.selector})"
