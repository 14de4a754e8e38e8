"""Replay: recorded screenshots played back as observations, no browser.

A `ReplayEnvironment` shows the screenshots of one recording in order: the
first on `start`, the next after every action. Every action is accepted and
recorded in the trajectory (its outcome says it was not performed); once the
agent has acted on the last recorded screenshot the episode ends with status
`limit`. Batches therefore run where there is no Chromium (a GPU machine) and
send session-shaped load: the same images, page titles and URLs, history
growth and prefix reuse as the sessions that were recorded.

A recording is read from a directory:

    a run directory        (trajectory.jsonl + screenshots/, as `surfer run` writes)
    a folder of images     (*.png / *.jpg / *.jpeg / *.webp, played in name order)
    a folder of either     (each subdirectory one recording, or a folder of them: a session's, a batch's
                            runs/; `load_recordings`)
"""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from surfer.core.actions import Action
from surfer.core.coordinates import Size
from surfer.core.errors import ConfigError, EnvironmentFailure
from surfer.core.observation import Observation, Screenshot

from .base import ActionOutcome, Environment, EpisodeEnd

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp"}


@dataclass(frozen=True)
class Frame:
    """One recorded screenshot and what the agent saw with it."""

    path: Path
    url: str = ""
    title: str = ""
    scale: float = 1.0
    origin: tuple[float, float] = (0.0, 0.0)
    loop: int = 0  # in a lengthened recording: which pass over the recorded frames (marked into the image)

    @property
    def mime(self) -> str:
        return IMAGE_TYPES.get(self.path.suffix.lower(), "application/octet-stream")


@dataclass(frozen=True)
class Recording:
    name: str
    frames: tuple[Frame, ...]


def recorded_steps(run_dir: Path) -> Iterator[tuple[int, dict[str, Any], Path]]:
    """(line number, step, screenshot path) for each agent step of a run directory that has a
    screenshot; a torn line and a person's step (a take-over: no model looked at it) are
    skipped, a missing screenshot is a ConfigError."""
    for number, line in enumerate((run_dir / "trajectory.jsonl").read_text(encoding="utf-8").splitlines(), 1):
        try:
            step = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line
        shot = step.get("screenshot") if isinstance(step, dict) else None
        if not isinstance(shot, str) or not shot or step.get("actor") == "human":
            continue
        path = run_dir / shot
        if not path.is_file():
            raise ConfigError(f"{run_dir}/trajectory.jsonl:{number}: screenshot {path} is missing")
        yield number, step, path


def _frames_of_run(run_dir: Path) -> list[Frame]:
    frames = []
    for _number, step, path in recorded_steps(run_dir):
        screen = step.get("screen") or {}
        origin = screen.get("origin") or (0.0, 0.0)
        frames.append(Frame(path, step.get("url", ""), step.get("title", ""), float(screen.get("scale", 1.0)),
                            (float(origin[0]), float(origin[1]))))
    return frames


def _frames_of_images(folder: Path) -> list[Frame]:
    return [Frame(p) for p in sorted(folder.iterdir()) if p.is_file() and p.suffix.lower() in IMAGE_TYPES]


def load_recording(path: str | Path) -> Recording:
    """One recording: a run directory or a folder of images."""
    folder = Path(path)
    if not folder.is_dir():
        raise ConfigError(f"replay source {folder} is not a directory")
    frames = _frames_of_run(folder) if (folder / "trajectory.jsonl").is_file() else _frames_of_images(folder)
    if not frames:
        raise ConfigError(f"{folder} holds no recorded screenshots (a run directory with trajectory.jsonl, or images)")
    return Recording(folder.name, tuple(frames))


def _is_recording(folder: Path) -> bool:
    return (folder / "trajectory.jsonl").is_file() or bool(_frames_of_images(folder))


def _recordings_below(folder: Path, root: Path, depth: int) -> list[Recording]:
    """The recordings in `folder`'s subdirectories, and in theirs down to `depth` levels (a `runs/` folder holding a
    terminal session's folder or a batch's --out, whose runs/ holds the run directories); a run that ended before its
    first screenshot (its page did not open) is passed over, as are folders with none."""
    if (folder / "results.jsonl").is_file() or (folder / "batch.json").is_file():  # a batch's --out: its runs/ only
        folder = folder / "runs"  # (not live/: the view's thumbnails)
        if not folder.is_dir():
            return []
    found = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if _is_recording(sub):
            frames = _frames_of_run(sub) if (sub / "trajectory.jsonl").is_file() else _frames_of_images(sub)
            if frames:
                found.append(Recording(sub.relative_to(root).as_posix(), tuple(frames)))
        elif depth > 1:
            found += _recordings_below(sub, root, depth - 1)
    return found


def load_recordings(path: str | Path) -> list[Recording]:
    """Every recording under `path`: itself when it is one, else those below it (`_recordings_below`, name order)."""
    folder = Path(path)
    if not folder.is_dir():
        raise ConfigError(f"replay source {folder} is not a directory")
    if _is_recording(folder):
        return [load_recording(folder)]
    found = _recordings_below(folder, folder, depth=3)
    if not found:
        raise ConfigError(f"{folder} holds no recordings (run directories or folders of images, or folders of them)")
    return found


def lengthened(recording: Recording, steps: int) -> Recording:
    """`recording` as a session of `steps` screenshots: its frames in order, then again from
    the first, each pass marked differently (`Frame.loop`) so that no image repeats: long
    sessions from short recordings, as the image caches of a server see real ones."""
    frames = recording.frames
    if steps <= len(frames):
        return recording
    played = tuple(
        Frame(f.path, f.url, f.title, f.scale, f.origin, loop=k // len(frames))
        for k, f in ((k, frames[k % len(frames)]) for k in range(steps))
    )
    return Recording(recording.name, played)


def _read_screenshot(frame: Frame, variant: int | None = None) -> Screenshot:
    """The recorded screenshot; with a `variant`, its top-left pixels are set to a
    colour code of that number and the image re-encoded, so that sessions
    replaying one recording send different images (as different real sessions would)."""
    from PIL import Image, UnidentifiedImageError

    data, mime = frame.path.read_bytes(), frame.mime
    try:
        with Image.open(io.BytesIO(data)) as image:  # reads the header only
            size = Size(*image.size)
            if variant is not None or frame.loop:
                marked = image.convert("RGB")
                for k in range(8):
                    if variant is not None:
                        marked.putpixel((k, 0), ((variant >> (3 * k)) % 8 * 32, 255 - k * 16, 0))
                    if frame.loop:
                        marked.putpixel((k, 1), ((frame.loop >> (3 * k)) % 8 * 32, 0, 255 - k * 16))
                out = io.BytesIO()
                if mime != "image/jpeg":
                    mime = "image/png"
                marked.save(out, format="JPEG", quality=90) if mime == "image/jpeg" else marked.save(out, format="PNG")
                data = out.getvalue()
    except Exception as exc:  # noqa: BLE001 - PIL raises several kinds
        # (PIL's "cannot identify image file <_io.BytesIO object at 0x...>" names the buffer, not the file)
        why = "not an image format PIL reads" if isinstance(exc, UnidentifiedImageError) else str(exc)
        raise EnvironmentFailure(f"recorded screenshot {frame.path} is not a readable image: {why}") from None
    return Screenshot(data, mime, size, scale=frame.scale, origin=frame.origin)


def read_screenshots(recording: Recording, variant: int | None = None) -> list[Screenshot]:
    """Every screenshot of `recording`, marked with `variant` (blocking)."""
    return [_read_screenshot(frame, variant) for frame in recording.frames]


class ReplayEnvironment(Environment):
    """Plays back one `Recording`; see the module docstring."""

    kind = "replay"

    def __init__(self, recording: Recording | str | Path, *, variant: int | None = None,
                 screenshots: list[Screenshot] | None = None) -> None:
        """`variant`: mark this session's screenshots with a number (see `_read_screenshot`);
        `screenshots`: those already read (`read_screenshots`), in the recording's order."""
        self.recording = recording if isinstance(recording, Recording) else load_recording(recording)
        self.variant = variant
        self.position = 0
        self._cache: dict[int, Screenshot] = dict(enumerate(screenshots or []))

    @property
    def supported_actions(self) -> frozenset[str]:
        return frozenset({"any (recorded, not performed)"})

    async def start(self, url: str | None = None) -> None:
        self.position = 0
        if not self._cache:  # read (and mark) every screenshot before the first step
            shots = await asyncio.to_thread(read_screenshots, self.recording, self.variant)
            self._cache = dict(enumerate(shots))

    async def observe(self) -> Observation:
        index = min(self.position, len(self.recording.frames) - 1)
        frame = self.recording.frames[index]
        if index not in self._cache:
            self._cache[index] = await asyncio.to_thread(_read_screenshot, frame, self.variant)
        return Observation(screenshot=self._cache[index], url=frame.url, title=frame.title)

    async def perform(self, action: Action) -> ActionOutcome:
        self.position += 1
        total = len(self.recording.frames)
        shown = min(self.position + 1, total)
        return ActionOutcome(
            f"replayed, not performed: {action.describe()} (screenshot {shown}/{total} of {self.recording.name})",
            settle_reason="replay",
        )

    async def settle(self, mark: Any) -> str:
        return "replay"

    async def episode_end(self) -> EpisodeEnd | None:
        total = len(self.recording.frames)
        if self.position >= total:
            return EpisodeEnd("limit", f"the recording {self.recording.name} ended after {total} screenshots")
        return None

    async def close(self) -> None:
        self._cache.clear()
