"""JavaScript dialogs (alert / confirm / prompt) as a vision agent meets them.

While a dialog is open the page is frozen: Chromium takes no screenshot and
runs no script until it is answered. So the screenshot the model sees is the
last one taken, with the dialog drawn over it the way Chromium draws its own
(a box at the top centre: "<host> says", the message, a text field for a
prompt, OK / Cancel). `DialogLayout` says where those parts are drawn, so a
click on the drawn OK or Cancel answers the dialog.
"""

from __future__ import annotations

import io
import textwrap
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from surfer.core.actions import CssPoint

BOX_WIDTH = 448
MARGIN_TOP = 10
PAD = 20
LINE = 20
FIELD_HEIGHT = 32
BUTTON = (72, 32)
BLUE = (11, 87, 208)
CHARS_PER_LINE = 52
MAX_LINES = 12


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    width: float
    height: float

    def contains(self, x: float, y: float) -> bool:
        return self.x <= x <= self.x + self.width and self.y <= y <= self.y + self.height

    def scaled(self, scale: float) -> tuple[float, float, float, float]:
        return (self.x * scale, self.y * scale, (self.x + self.width) * scale, (self.y + self.height) * scale)


@dataclass
class PendingDialog:
    """An open dialog waiting for an answer."""

    handle: Any  # playwright Dialog
    kind: str  # alert, confirm or prompt
    message: str
    default: str = ""
    url: str = ""
    text: str | None = None  # typed into a prompt's field so far
    answered: str = field(default="", init=False)

    @property
    def origin(self) -> str:
        return urlsplit(self.url).netloc or "This page"

    def describe(self) -> str:
        what = f"{'an' if self.kind == 'alert' else 'a'} {self.kind} dialog from {self.origin}: {self.message!r}"
        if self.kind == "prompt":
            what += f" (text field: {self.field_text!r})"
        return what

    @property
    def field_text(self) -> str:
        return self.default if self.text is None else self.text

    def how_to_answer(self) -> str:
        if self.kind == "alert":
            return "click its OK, or use the dialog action"
        extra = ", type into its field" if self.kind == "prompt" else ""
        return f"click its OK or Cancel{extra}, or use the dialog action (accept / dismiss{', text' if extra else ''})"


@dataclass(frozen=True)
class DialogLayout:
    """Where the parts of the drawn dialog are, in CSS pixels of the screenshot."""

    box: Rect
    lines: tuple[str, ...]
    field: Rect | None
    ok: Rect
    cancel: Rect | None


def layout(dialog: PendingDialog, width: float) -> DialogLayout:
    """The dialog's parts for a screenshot `width` CSS pixels wide."""
    box_width = min(BOX_WIDTH, max(200.0, width - 16))
    chars = max(16, int(CHARS_PER_LINE * box_width / BOX_WIDTH))
    lines = [part for paragraph in (dialog.message or " ").splitlines() for part in (textwrap.wrap(paragraph, chars) or [""])]
    if len(lines) > MAX_LINES:
        lines = lines[: MAX_LINES - 1] + ["…"]
    x = max(0.0, (width - box_width) / 2)
    y = float(MARGIN_TOP)
    cursor = y + PAD + LINE + 8 + len(lines) * LINE + 12
    field_rect = None
    if dialog.kind == "prompt":
        field_rect = Rect(x + PAD, cursor, box_width - 2 * PAD, FIELD_HEIGHT)
        cursor += FIELD_HEIGHT + 12
    ok = Rect(x + box_width - PAD - BUTTON[0], cursor + 4, *BUTTON)
    cancel = Rect(ok.x - 8 - BUTTON[0], ok.y, *BUTTON) if dialog.kind != "alert" else None
    box = Rect(x, y, box_width, ok.y + BUTTON[1] + PAD - y)
    return DialogLayout(box, tuple(lines), field_rect, ok, cancel)


@lru_cache(maxsize=8)
def _font(size: int, bold: bool = False) -> Any:
    from PIL import ImageFont

    for name in (("DejaVuSans-Bold.ttf", "LiberationSans-Bold.ttf") if bold else ("DejaVuSans.ttf", "LiberationSans-Regular.ttf")):
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    return ImageFont.load_default(size)


def draw(image: bytes, fmt: str, dialog: PendingDialog, scale: float, *, quality: int = 85) -> tuple[bytes, DialogLayout]:
    """`image` (a screenshot, `scale` device pixels per CSS pixel) with the
    dialog drawn over it, re-encoded as `fmt` ("png" or "jpeg")."""
    from PIL import Image, ImageDraw

    with Image.open(io.BytesIO(image)) as source:
        canvas = source.convert("RGB")
    parts = layout(dialog, canvas.width / scale)
    pen = ImageDraw.Draw(canvas)
    s = scale
    x0, y0, x1, y1 = parts.box.scaled(s)
    pen.rounded_rectangle((x0 + 2 * s, y0 + 3 * s, x1 + 2 * s, y1 + 3 * s), radius=8 * s, fill=(170, 170, 170))
    pen.rounded_rectangle((x0, y0, x1, y1), radius=8 * s, fill=(255, 255, 255), outline=(200, 200, 200), width=max(1, round(s)))
    text_x = x0 + PAD * s
    cursor = y0 + PAD * s
    pen.text((text_x, cursor), f"{dialog.origin} says", fill=(31, 31, 31), font=_font(round(15 * s), bold=True))
    cursor += (LINE + 8) * s
    for line in parts.lines:
        pen.text((text_x, cursor), line, fill=(31, 31, 31), font=_font(round(13 * s)))
        cursor += LINE * s
    if parts.field is not None:
        fx0, fy0, fx1, fy1 = parts.field.scaled(s)
        pen.rounded_rectangle((fx0, fy0, fx1, fy1), radius=4 * s, outline=BLUE, width=max(1, round(2 * s)))
        pen.text((fx0 + 8 * s, fy0 + 8 * s), dialog.field_text, fill=(31, 31, 31), font=_font(round(13 * s)))
    for rect, label, filled in ((parts.ok, "OK", True), (parts.cancel, "Cancel", False)):
        if rect is None:
            continue
        bx0, by0, bx1, by1 = rect.scaled(s)
        pen.rounded_rectangle(
            (bx0, by0, bx1, by1), radius=16 * s, fill=BLUE if filled else (255, 255, 255),
            outline=BLUE if filled else (116, 119, 117), width=max(1, round(s)),
        )
        font = _font(round(13 * s), bold=True)
        w = pen.textlength(label, font=font)
        pen.text(((bx0 + bx1 - w) / 2, by0 + 8 * s), label, fill=(255, 255, 255) if filled else BLUE, font=font)
    out = io.BytesIO()
    if fmt == "png":
        canvas.save(out, format="PNG")
    else:
        canvas.save(out, format="JPEG", quality=quality)
    return out.getvalue(), parts


def button_at(parts: DialogLayout, point: CssPoint, origin: tuple[float, float]) -> str | None:
    """'ok', 'cancel', 'field', 'box' (elsewhere on the dialog) or None for a
    click at `point` (CSS pixels of the page; the screenshot starts at `origin`)."""
    x, y = point.x - origin[0], point.y - origin[1]
    if parts.ok.contains(x, y):
        return "ok"
    if parts.cancel is not None and parts.cancel.contains(x, y):
        return "cancel"
    if parts.field is not None and parts.field.contains(x, y):
        return "field"
    return "box" if parts.box.contains(x, y) else None
