"""A short video of a run (`--video on | retain-on-failure | off`), made from
the step screenshots the run directory already holds: one frame per step
with its click point marked and a caption (step, action, target). MP4
(H.264) through the ffmpeg binary that `imageio-ffmpeg` ships
(`pip install 'surfer-agent[video]'`), else an animated WebP (Pillow). No
screen recorder, nothing recorded while the run goes on."""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import logging
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator

from surfer.core.actions import headline

from .rundir import read_trajectory

log = logging.getLogger(__name__)

SECONDS_PER_STEP = 1.0
CAPTION_HEIGHT = 36
ENCODE_TIMEOUT_S = 300
MARK = (255, 64, 32)


def _ffmpeg() -> str | None:
    try:
        import imageio_ffmpeg
    except ImportError:
        return None
    try:
        return imageio_ffmpeg.get_ffmpeg_exe()
    except RuntimeError:
        return None


# Fonts tried for a caption, in order: the first with a glyph for each of its letters draws it (Pillow's own
# font has ASCII only: 'Crème brûlée' was drawn 'Cr□me br□l□e'); the one missing fewest else.
CAPTION_FONTS = ("DejaVuSans.ttf", "NotoSans-Regular.ttf", "LiberationSans-Regular.ttf", "Arial.ttf", "arial.ttf",
                 "Arial Unicode.ttf", "segoeui.ttf", "Helvetica.ttc", "NotoSansCJK-Regular.ttc", "msyh.ttc")
CAPTION_SIZE = 14


@functools.lru_cache(maxsize=1)
def _caption_fonts() -> tuple[Any, ...]:
    from PIL import ImageFont

    fonts = []
    for name in CAPTION_FONTS:
        with contextlib.suppress(OSError):  # not on this system
            fonts.append(ImageFont.truetype(name, CAPTION_SIZE))
    return (*fonts, ImageFont.load_default())


@functools.lru_cache(maxsize=4096)
def _lacks(font_index: int, letter: str) -> bool:
    """Whether the font draws `letter` as its missing-glyph box."""
    font = _caption_fonts()[font_index]
    drawn, missing = font.getmask(letter), font.getmask("\U0010fffd")
    return drawn.size == missing.size and all(
        drawn.getpixel((x, y)) == missing.getpixel((x, y)) for x in range(drawn.size[0]) for y in range(drawn.size[1]))


def caption_font(text: str) -> Any:
    """The font a caption is drawn in: one that has all its letters where the system has one."""
    letters = {c for c in text if not c.isspace()}
    fonts = _caption_fonts()
    lacking = [sum(_lacks(i, c) for c in letters) for i in range(len(fonts))]
    return fonts[lacking.index(min(lacking))]


def caption(step: dict[str, Any]) -> str:
    text = f"step {step.get('index')}: {headline(step.get('action') or {}, limit=60)}"
    if step.get("error"):
        text += f" (error: {step['error']})"
    return text[:160]


def frame(run_dir: Path, step: dict[str, Any]) -> Any:
    """The step's screenshot with its points marked and its caption underneath (RGB, even size)."""
    from PIL import Image, ImageDraw

    with Image.open(run_dir / step["screenshot"]) as shot:
        image = shot.convert("RGB")
    screen = step.get("screen") or {}
    scale = screen.get("scale") or 1
    ox, oy = (screen.get("origin") or [0, 0])[:2]
    draw = ImageDraw.Draw(image)
    for point in step.get("points") or []:
        x, y = (point["x"] - ox) * scale, (point["y"] - oy) * scale
        r = max(6, image.width // 120)
        draw.ellipse((x - r, y - r, x + r, y + r), outline=MARK, width=max(2, r // 3))
        draw.line((x - 2 * r, y, x + 2 * r, y), fill=MARK, width=2)
        draw.line((x, y - 2 * r, x, y + 2 * r), fill=MARK, width=2)
    width, height = image.width + image.width % 2, image.height + CAPTION_HEIGHT
    height += height % 2
    out = Image.new("RGB", (width, height), (20, 20, 20))
    out.paste(image, (0, 0))
    text = caption(step)
    ImageDraw.Draw(out).text((10, image.height + 9), text, fill=(240, 240, 240), font=caption_font(text))
    return out


def _frames(sources: list[Path]) -> Iterator[Any]:
    """Each step's frame, in order, all at the first one's size (a resized window: one size
    for the video). One at a time: a long run's frames are never all in memory."""
    size = None
    for source in sources:
        for step in read_trajectory(source) if (source / "trajectory.jsonl").exists() else []:
            if step.get("screenshot") and (source / step["screenshot"]).exists():
                image = frame(source, step)
                size = size or image.size
                yield image if image.size == size else image.resize(size)


def _encode_mp4(ffmpeg: str, frames: Iterator[Any], target: Path) -> tuple[int, str]:
    """Frames piped to ffmpeg as raw RGB, one by one; (frames written, ffmpeg's error or "")."""
    first = next(frames)
    command = [
        ffmpeg, "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{first.width}x{first.height}",
        "-r", f"{1 / SECONDS_PER_STEP:g}", "-i", "-", "-c:v", "libx264", "-pix_fmt", "yuv420p",
        "-movflags", "+faststart", str(target),
    ]
    written = 0
    with tempfile.TemporaryFile() as errors:  # a file, not a pipe: ffmpeg never blocks on what it says
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            assert process.stdin is not None
            for image in itertools.chain([first], frames):
                process.stdin.write(image.tobytes())
                written += 1
            process.stdin.close()
            process.wait(ENCODE_TIMEOUT_S)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            pass  # ffmpeg stopped (its error says why) or hung
        finally:  # also when a frame could not be made: no ffmpeg left behind
            with contextlib.suppress(OSError):
                process.stdin.close()  # type: ignore[union-attr]
            if process.poll() is None:
                process.kill()
            process.wait()
        errors.seek(0)
        said = errors.read().decode(errors="replace")[-300:]
    return written, "" if process.returncode == 0 else (said or f"exit status {process.returncode}")


def make_video(run_dir: str | Path, sources: list[Path] | None = None) -> Path | None:
    """video.mp4 (or video.webp) in `run_dir` from the step screenshots of `sources` (run
    directories, in order; default `run_dir` itself); None without any. Blocking: run it off
    the event loop."""
    run_dir = Path(run_dir)
    sources = sources if sources is not None else [run_dir]
    frames = _frames(sources)
    first = next(frames, None)
    if first is None:
        return None
    run_dir.mkdir(parents=True, exist_ok=True)
    ffmpeg = _ffmpeg()
    if ffmpeg is not None:
        target = run_dir / "video.mp4"
        _, error = _encode_mp4(ffmpeg, itertools.chain([first], frames), target)
        if not error:
            return target
        target.unlink(missing_ok=True)
        log.warning("ffmpeg could not encode the video (%s); writing WebP", error)
        frames = _frames(sources)  # again from the start
        first = next(frames)
    target = run_dir / "video.webp"
    buffer = io.BytesIO()
    first.save(buffer, format="WEBP", save_all=True, append_images=list(frames),
               duration=int(SECONDS_PER_STEP * 1000), loop=0, quality=80)
    target.write_bytes(buffer.getvalue())
    return target
