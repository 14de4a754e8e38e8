"""What a browser session sees: the screenshot (its size read from the
image header), the page's title and URL, tabs and notices, a native dialog
drawn over the page, and the settle wait after an action. A mixin of
`BrowserEnvironment` (session.py)."""

from __future__ import annotations

import io
import time
from typing import Any

from surfer.core.coordinates import Size
from surfer.core.errors import EnvironmentFailure
from surfer.core.observation import Observation, Screenshot
from surfer.tools import dialogs
from surfer.tools.settle import Mark, settle_page
from surfer.tools.widgets import SHARE_AREA

REPORT_WAIT_S = 2.0  # the longest a step waits for the chooser (or download) an action started

# JPEG start-of-frame markers (they carry the size); C4, C8 and CC are other segments.
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def image_size(data: bytes) -> Size:
    """A screenshot's size from its header: PNG's IHDR, JPEG's start of frame
    (no PIL to import on the way to the first request, ~10 ms); PIL otherwise."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        return Size(int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big"))
    at = 2 if data[:2] == b"\xff\xd8" else len(data)
    while at + 9 <= len(data) and data[at] == 0xFF:
        marker = data[at + 1]
        if marker in _JPEG_FRAMES:
            return Size(int.from_bytes(data[at + 7:at + 9], "big"), int.from_bytes(data[at + 5:at + 7], "big"))
        at += 2 + int.from_bytes(data[at + 2:at + 4], "big")
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:  # reads the header only
        return Size(*image.size)



class BrowserCapture:
    """Observing and settling (see the module's docstring)."""

    # -- observe / settle ----------------------------------------------------

    async def observe(self) -> Observation:
        return await self._guard(self._observe())

    async def _observe(self) -> Observation:
        await self._leave_closed_tab()  # (one that closed itself between steps)
        page = self.page
        if self._dialog is None:  # (a page frozen by a dialog cannot be left)
            await self.url_policy.leave_refused(page)  # a refused page is never captured
        origin = (float(self.clip[0]), float(self.clip[1])) if self.clip is not None else (0.0, 0.0)
        captured = None
        if self._dialog is None:
            _, captured = await self._until_dialog(self._capture())
        if captured is None:  # the page is frozen by a dialog: draw it over the last screenshot
            data, title = self._draw_dialog()
        else:
            data, title = self._last_capture = captured
        pages = self._tabs
        notices = list(self._start_notices)
        if self._dialog is not None:
            notices.append(f"Open dialog: {self._dialog.describe()} — {self._dialog.how_to_answer()}.")
        if self.uploads:
            notices.append(f"Files you may upload (upload action): {self.uploads.listing()}")
        return Observation(
            screenshot=Screenshot(data, f"image/{self.screenshot_format}", image_size(data), self.device_scale_factor, origin),
            url=page.url, title=title, tabs=tuple(p.url for p in pages),
            active_tab=pages.index(page) if page in pages else 0, notices=tuple(notices),
        )

    async def _capture(self) -> tuple[bytes, str]:
        options: dict[str, Any] = {"type": self.screenshot_format, "timeout": 15_000}
        if self.screenshot_format == "jpeg":
            options["quality"] = self.jpeg_quality
        if self.clip is not None:
            x, y, width, height = self.clip
            options["clip"] = {"x": x, "y": y, "width": width, "height": height}
        if not self.legacy_step:
            # The caret does not blink (STILL_CARET), so Playwright need not hide it: no style injected
            # into and removed from every frame around each capture (~4 ms of Chromium's CPU).
            options["caret"] = "initial"
        try:
            await self._share_visible_area()
            data = await self.page.screenshot(**options)
            return data, await (self.page.title() if self.legacy_step else self._title())
        except Exception as exc:  # noqa: BLE001
            self._check_alive()
            raise EnvironmentFailure(f"screenshot failed: {str(exc).splitlines()[0]}") from None

    async def _title(self) -> str:
        """The page's title: as the settle wait that just ended read it (same page, no
        navigation since, no action since), else asked for."""
        settled, self._settled_title = self._settled_title, None
        if settled is not None and settled[0] is self._page and settled[1] == self._navigations:
            return settled[2]
        return await self.page.title()

    async def _share_visible_area(self) -> None:
        """Tell the page's popups (widgets.js) which part of it the screenshots show, so they open inside it."""
        key = (self.clip, self._navigations, id(self._page))
        if self.clip is None or key == self._area_shared:
            return
        x, y, width, height = self.clip
        await self.page.evaluate(SHARE_AREA, {"x": x, "y": y, "width": width, "height": height})
        self._area_shared = key

    def _draw_dialog(self) -> tuple[bytes, str]:
        assert self._dialog is not None
        if self._last_capture is not None:
            base, title = self._last_capture
        else:  # the page opened the dialog before it was ever drawn
            from PIL import Image

            width, height = (self.clip[2], self.clip[3]) if self.clip is not None else self.viewport
            blank = io.BytesIO()
            scale = self.device_scale_factor
            Image.new("RGB", (round(width * scale), round(height * scale)), "white").save(blank, format="PNG")
            base, title = blank.getvalue(), ""
        data, self._dialog_layout = dialogs.draw(
            base, self.screenshot_format, self._dialog, self.device_scale_factor, quality=self.jpeg_quality,
        )
        return data, title

    async def mark(self) -> Mark:
        return Mark(time.time() * 1000, self._tracker.seq, self._navigations, self._page.url if self._page else "", len(self._tabs))

    async def settle(self, mark: Mark) -> str:
        self._check_alive()
        if self._dialog is not None:
            return "dialog"
        seen: dict[str, Any] = {}
        finished, reason = await self._until_dialog(
            settle_page(lambda: (self.page, self._navigations), mark, self._tracker, self.settle_config, seen)
        )
        if finished and seen.get("popup") and len(self._tabs) <= mark.page_count:
            # the page opened a tab the browser has not reported yet: wait (bounded) for it, then for it to settle
            if await self._tab_report.since(mark.wall_ms, REPORT_WAIT_S):
                seen.pop("popup")
                finished, more = await self._until_dialog(
                    settle_page(lambda: (self.page, self._navigations), mark, self._tracker, self.settle_config, seen)
                )
                reason = f"{reason}; new tab: {more}"
        self._asked_to_print = bool(seen.get("printed"))
        self._vanished = seen.get("vanished", [])
        if finished and "title" in seen and reason.endswith("quiet"):  # the page was quiet when its title was read
            self._settled_title = (self._page, self._navigations, seen["title"])
        # the page said the action opened a file chooser / started a download: the browser's report of it
        # (another channel, late on a loaded machine) belongs to this step, not to the next one
        for started, report in (("file_chooser", self._chooser_report), ("download", self._downloads.report)):
            if finished and seen.get(started):
                await report.since(mark.wall_ms, REPORT_WAIT_S)
        await self._downloads.wait(self.settle_config.timeout)
        return reason if finished else "dialog"
