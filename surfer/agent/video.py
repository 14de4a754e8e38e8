"""A short video of a run (`--video on | retain-on-failure | off`), made from
the step screenshots the run directory already holds: one frame per step
with its click point marked and a caption (step, action, target). MP4
(H.264) through the ffmpeg binary that `imageio-ffmpeg` ships
(`pip install 'surfer-agent[video]'`), else an animated WebP (Pillow). No
screen recorder, nothing recorded while the run goes on."""

from __future__ import annotations

import io
import logging
import subprocess
from pathlib import Path
from typing import Any

from surfer.core.actions import headline

from .rundir import read_trajectory

log = logging.getLogger(__name__)

SECONDS_PER_STEP = 1.0
CAPTION_HEIGHT = 36
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
    ImageDraw.Draw(out).text((10, image.height + 10), caption(step), fill=(240, 240, 240))
    return out


def make_video(run_dir: str | Path, sources: list[Path] | None = None) -> Path | None:
    """video.mp4 (or video.webp) in `run_dir` from the step screenshots of `sources` (run
    directories, in order; default `run_dir` itself); None without any. Blocking: run it off
    the event loop."""
    run_dir = Path(run_dir)
    frames = []
    for source in sources if sources is not None else [run_dir]:
        for step in read_trajectory(source) if (source / "trajectory.jsonl").exists() else []:
            if step.get("screenshot") and (source / step["screenshot"]).exists():
                frames.append(frame(source, step))
    if not frames:
        return None
    run_dir.mkdir(parents=True, exist_ok=True)
    size = frames[0].size
    frames = [f if f.size == size else f.resize(size) for f in frames]  # a resized window: one size for the video
    ffmpeg = _ffmpeg()
    if ffmpeg is not None:
        target = run_dir / "video.mp4"
        command = [
            ffmpeg, "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{size[0]}x{size[1]}",
            "-r", f"{1 / SECONDS_PER_STEP:g}", "-i", "-", "-c:v", "libx264", "-pix_fmt", "yuv420p",
            "-movflags", "+faststart", str(target),
        ]
        done = subprocess.run(command, input=b"".join(f.tobytes() for f in frames), capture_output=True, timeout=300)
        if done.returncode == 0:
            return target
        log.warning("ffmpeg could not encode the video (%s); writing WebP", done.stderr.decode(errors="replace")[-300:])
    target = run_dir / "video.webp"
    buffer = io.BytesIO()
    frames[0].save(buffer, format="WEBP", save_all=True, append_images=frames[1:],
                   duration=int(SECONDS_PER_STEP * 1000), loop=0, quality=80)
    target.write_bytes(buffer.getvalue())
    return target
