"""A video of a run made from the step screenshots its run directory already
holds (no screen recorder): one frame per step, the click point marked, a
caption with the step's action and target.

MP4 (H.264) through the ffmpeg binary bundled with `imageio-ffmpeg` (the
`video` extra), else an animated WebP through Pillow. Blocking: callers run
it in a thread (the trajectory writer's `_finish` already does)."""

from __future__ import annotations

import io
import itertools
import subprocess
from pathlib import Path
from typing import Any, Iterable

from surfer.core.actions import action_label

from .rundir import VIDEO_FILES, read_trajectory

SECONDS_PER_STEP = 1.0
CAPTION_COLOUR, MARK_COLOUR, TO_COLOUR = (255, 255, 255), (255, 45, 85), (10, 132, 255)


def video_encoder() -> str:
    """"mp4" when imageio-ffmpeg (and its bundled ffmpeg) is installed, else "webp"."""
    try:
        import imageio_ffmpeg

        imageio_ffmpeg.get_ffmpeg_exe()
    except Exception:  # noqa: BLE001 - not installed, or no binary for this platform
        return "webp"
    return "mp4"


def step_frames(run_dirs: Iterable[str | Path]) -> list[tuple[Path, dict[str, Any]]]:
    """(screenshot, step) for every step with a screenshot, run directory by run directory."""
    frames = []
    for run_dir in map(Path, run_dirs):
        for step in read_trajectory(run_dir):
            name = step.get("screenshot")
            if name and (run_dir / name).is_file():
                frames.append((run_dir / name, step))
    return frames


def caption(step: dict[str, Any], number: int) -> str:
    action = step.get("action")
    text = f"step {number}: {action_label(action)}" if action else f"step {number}: (no action)"
    if step.get("error"):
        text += " — error"
    return text


def render_frame(shot: Path, step: dict[str, Any], number: int, size: tuple[int, int] | None = None) -> Any:
    """The screenshot with the step's points marked and its caption along the bottom (a PIL image, RGB)."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.open(io.BytesIO(shot.read_bytes())).convert("RGB")
    screen = step.get("screen") or {}
    scale = screen.get("scale") or 1
    ox, oy = (screen.get("origin") or [0, 0])[:2]
    draw = ImageDraw.Draw(image)
    radius = max(8, image.width // 100)
    for i, point in enumerate(step.get("points") or []):
        x, y = (point["x"] - ox) * scale, (point["y"] - oy) * scale
        colour = TO_COLOUR if i else MARK_COLOUR
        draw.ellipse((x - radius, y - radius, x + radius, y + radius), outline=colour, width=max(3, radius // 3))
        draw.ellipse((x - 2, y - 2, x + 2, y + 2), fill=colour)
    font_size = max(12, image.height // 32)
    font = ImageFont.load_default(size=font_size)
    band = font_size + font_size // 2 * 2
    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    ImageDraw.Draw(overlay).rectangle((0, image.height - band, image.width, image.height), fill=(0, 0, 0, 170))
    image = Image.alpha_composite(image.convert("RGBA"), overlay).convert("RGB")
    ImageDraw.Draw(image).text((font_size // 2, image.height - band + font_size // 2), caption(step, number),
                               fill=CAPTION_COLOUR, font=font)
    if size is not None and image.size != size:
        image = image.resize(size)
    return image


def make_video(run_dirs: Iterable[str | Path], out_dir: str | Path, encoder: str | None = None) -> Path | None:
    """Write out_dir/video.mp4 (or video.webp) from the runs' step screenshots, in order;
    None when there is no screenshot. `encoder`: "mp4" or "webp" (default: the best installed)."""
    frames = step_frames(run_dirs)
    if not frames:
        return None
    encoder = encoder or video_encoder()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in VIDEO_FILES:  # a video of an earlier attempt at this directory
        (out_dir / name).unlink(missing_ok=True)
    first = render_frame(*frames[0], 1)
    size = (first.width + first.width % 2, first.height + first.height % 2)  # H.264 wants even sides
    images = itertools.chain(  # rendered one by one as the encoder takes them
        [first if first.size == size else first.resize(size)],
        (render_frame(shot, step, n, size) for n, (shot, step) in enumerate(frames[1:], 2)),
    )
    return _mp4(images, size, out_dir / "video.mp4") if encoder == "mp4" else _webp(images, out_dir / "video.webp")


def _mp4(images: Iterable[Any], size: tuple[int, int], path: Path) -> Path:
    import imageio_ffmpeg

    fps = 1 / SECONDS_PER_STEP
    command = [
        imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
        "-s", f"{size[0]}x{size[1]}", "-r", f"{fps:g}", "-i", "-", "-an", "-c:v", "libx264", "-preset", "veryfast",
        "-pix_fmt", "yuv420p", "-movflags", "+faststart", "-r", f"{fps:g}", str(path),
    ]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None
    try:
        for image in images:
            process.stdin.write(image.tobytes())
    finally:
        process.stdin.close()
        error = process.stderr.read().decode(errors="replace") if process.stderr else ""
        process.wait()
    if process.returncode != 0:
        path.unlink(missing_ok=True)
        raise RuntimeError(f"ffmpeg could not encode the video: {error.strip() or process.returncode}")
    return path


def _webp(images: Iterable[Any], path: Path) -> Path:
    first, *rest = list(images)
    first.save(path, format="WEBP", save_all=True, append_images=rest, duration=int(SECONDS_PER_STEP * 1000),
               loop=0, quality=80)
    return path
