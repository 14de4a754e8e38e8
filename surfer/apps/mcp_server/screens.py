"""The final screen of an MCP run, as an image content item beside the tool's
text: what a client (Claude Desktop, an IDE) shows its user. A run the agent
ended itself (an answer, giving up, a question, a refused action) ended on the
screen of its last step, whose screenshot is on disk already; one a limit,
a repeated action or an error ended is captured from the session's browser
(the screen after the last action). A JPEG within `MAX_SIDE` and `MAX_BYTES`
(the default viewport's) is returned as it is; anything else is scaled and
re-encoded, so that the tool result stays small whatever the viewport."""

from __future__ import annotations

import asyncio
import io
import logging
from pathlib import Path
from typing import Any, Optional

log = logging.getLogger("surfer.mcp")

MAX_SIDE = 1280  # px: the longer side of the image returned
MAX_BYTES = 300_000  # a screenshot larger than this is re-encoded
QUALITY = 70  # JPEG quality of a re-encoded one
LAST_STEP_SHOWS = ("success", "failed", "needs_input", "needs_approval")  # the agent ended it: the screen is its last step's
CAPTURE_S = 5.0  # how long the screen of a run that ended may take to capture


async def final_screen(environment: Any, run_dir: Path, status: str = "error") -> Optional[bytes]:
    """The screen a run that ended with `status` ended on as a small JPEG, or None (nothing was ever shown: the
    browser never started)."""
    data: Optional[bytes] = None
    if environment is not None and status not in LAST_STEP_SHOWS:
        try:
            observation = await asyncio.wait_for(environment.observe(), CAPTURE_S)
            data = observation.screenshot.data
        except Exception as exc:  # noqa: BLE001 - a browser gone, a page that hangs: the last step's screenshot
            log.info("the final screen could not be captured (%r); the last step's screenshot is returned", exc)
    return await asyncio.to_thread(_bounded, data, run_dir)


def _last_shot(run_dir: Path) -> Optional[bytes]:
    shots = sorted((run_dir / "screenshots").glob("step-*.*")) if (run_dir / "screenshots").is_dir() else []
    return shots[-1].read_bytes() if shots else None


def _bounded(data: Optional[bytes], run_dir: Path) -> Optional[bytes]:
    from PIL import Image

    data = data if data is not None else _last_shot(run_dir)
    if data is None:
        return None
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format == "JPEG" and max(image.size) <= MAX_SIDE and len(data) <= MAX_BYTES:
                return data
            image = image.convert("RGB")
            image.thumbnail((MAX_SIDE, MAX_SIDE))
            out = io.BytesIO()
            image.save(out, "JPEG", quality=QUALITY)
    except (OSError, ValueError) as exc:
        log.info("the final screen could not be encoded: %r", exc)
        return None
    return out.getvalue()
