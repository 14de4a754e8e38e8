"""A real Chromium driven through Playwright's async API.

One `BrowserEnvironment` is one isolated browser context (its own cookies and
tabs). It launches its own browser, or shares one passed in (`browser=`) so
many sessions run in one Chromium process.
"""

from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path
from urllib.parse import urljoin
from typing import Any, Awaitable, Iterable

from surfer.core.actions import (
    Action, Click, CloseTab, Dialog, Drag, Goto, Hover, PressKeys, Scroll, SwitchTab, TypeText, Upload,
)
from surfer.core.coordinates import Size
from surfer.core.errors import ActionFailed, BrowserCrashed, ConfigError, EnvironmentFailure, SurferError
from surfer.core.observation import Observation, Screenshot

from . import dialogs
from .base import ActionOutcome, Environment
from .chromium import launch_chromium, start_chromium, use_node_compile_cache  # noqa: F401 - launch_chromium, use_node_compile_cache: re-exported
from .dialogs import PendingDialog
from .settle import MUTATION_TRACKER, Mark, NetworkTracker, SettleConfig, settle_page
from .typing import KEY_LISTENERS, MAY_INSERT, STILL_CARET
from .transfers import DEFAULT_MAX_DOWNLOAD_BYTES, DEFAULT_MAX_DOWNLOADS, Downloads, UploadFiles
from .widgets import SHARE_AREA, context_menu_note, widgets_script
from .url_policy import UrlPolicy, check_start_url

WHEEL_NOTCH_PX = 100
FILE_CHOOSER_TIMEOUT_MS = 5_000
DOWNLOAD_WRAP_UP_S = 10.0
CLOSE_TIMEOUT_S = 10.0  # closing a context or browser that stopped answering must not hang the caller
CRASH_SIGNS = ("target crashed", "browser has been closed", "browser has disconnected")  # Playwright's words for a dead browser


# JPEG start-of-frame markers (they carry the size); C4, C8 and CC are other segments.
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _image_size(data: bytes) -> Size:
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


def normalize_url(url: str, current: str = "") -> str:
    """Absolute URL for `url`: relative paths resolve against `current`, a bare
    host gets https://."""
    url = url.strip()
    if url.startswith(("/", "./", "../", "?", "#")) and current.startswith(("http://", "https://", "file:")):
        return urljoin(current, url)
    if "://" not in url and not url.startswith(("about:", "data:", "file:", "chrome:")):
        url = "https://" + url
    return url


class BrowserEnvironment(Environment):
    kind = "browser"

    def __init__(
        self,
        *,
        headless: bool = True,
        viewport: tuple[int, int] = (1280, 800),
        device_scale_factor: float = 1.0,
        settle: SettleConfig | None = None,
        screenshot_format: str = "jpeg",
        jpeg_quality: int = 85,
        navigation_timeout: float = 30.0,
        browser: Any = None,
        clip: tuple[float, float, float, float] | None = None,
        upload_files: Iterable[str | Path] = (),
        downloads_dir: str | Path | None = None,
        max_download_bytes: int = DEFAULT_MAX_DOWNLOAD_BYTES,
        max_downloads: int = DEFAULT_MAX_DOWNLOADS,
        allow_file_urls: bool = False,
        allowed_domains: tuple[str, ...] | list[str] = (),
        blocked_domains: tuple[str, ...] | list[str] = (),
        legacy_step: bool = False,
        early: Any = None,
    ) -> None:
        if viewport[0] <= 0 or viewport[1] <= 0:
            raise ConfigError(f"viewport must be positive, got {viewport[0]}x{viewport[1]}")
        if device_scale_factor <= 0:
            raise ConfigError("device scale factor must be positive")
        if screenshot_format not in ("jpeg", "png"):
            raise ConfigError("screenshot format must be 'jpeg' or 'png'")
        self.headless = headless
        self.viewport = viewport
        self.device_scale_factor = device_scale_factor
        self.settle_config = settle or SettleConfig()
        self.screenshot_format = screenshot_format
        self.jpeg_quality = jpeg_quality
        # The step path before issue 14 (Playwright's screenshot, key-by-key typing everywhere), kept so
        # `surfer bench throughput --compare-legacy` can measure both side by side in one run.
        self.legacy_step = legacy_step
        self.navigation_timeout = navigation_timeout
        self._shared_browser = browser
        # An EarlyBrowser (surfer/tools/early_browser.py): a launch begun at process start, taken when it fits.
        self._early = early
        self._early_taken = False
        # Capture only this CSS rectangle (x, y, width, height); points map back through the origin.
        self.clip = clip
        self.url_policy = UrlPolicy(
            allow_file_urls=allow_file_urls, allowed_domains=allowed_domains, blocked_domains=blocked_domains,
        )
        self._proxy: Any = None
        self._playwright: Any = None
        self._browser: Any = None
        self._context: Any = None
        self._page: Any = None
        self._tracker = NetworkTracker()
        self._navigations = 0
        self._crashed: str | None = None
        self._browser_gone = False
        self._died: asyncio.Event | None = None  # set when the browser or the current page dies
        self._hooked: set[int] = set()
        # Files the agent may hand to a page's file chooser; downloads go to `downloads_dir`, else <run dir>/downloads.
        self.uploads = UploadFiles(upload_files)
        self.downloads_dir = Path(downloads_dir) if downloads_dir else None
        self._downloads = Downloads(
            self._downloads_folder, max_bytes=max_download_bytes, max_count=max_downloads, approve=self._approve_download,
        )
        self._uploading = False
        # A JavaScript dialog freezes the page until answered (surfer/tools/dialogs.py).
        self._dialog: PendingDialog | None = None
        self._dialog_layout: dialogs.DialogLayout | None = None
        self._dialog_opened: asyncio.Event | None = None
        self._last_capture: tuple[bytes, str] | None = None
        self._area_shared: Any = None
        self._settled_title: tuple[Any, int, str] | None = None  # (page, navigations, title) the last settle saw
        self._notices: list[str] = []

    # -- lifecycle ---------------------------------------------------------

    async def start(self, url: str | None = None) -> None:
        if self._dialog_opened is None:
            self._dialog_opened = asyncio.Event()
            self._died = asyncio.Event()
        if self._context is None:
            if self._shared_browser is not None:
                self._browser = self._shared_browser
            else:
                self._playwright, self._browser = await self._launch()
            self._browser.on("disconnected", lambda *_: self._on_browser_gone())
            if not self._browser.is_connected():
                self._on_browser_gone()
            await self._guard(self._open_context())
        if url:
            check_start_url(url, self.url_policy)
            await self._guard(self._run_action(lambda _: self._goto(url), None))
            await self._guard(self.settle(await self.mark()))

    async def _launch(self) -> tuple[Any, Any]:
        """(playwright, browser) of this session's own: the early launch when it
        fits and succeeded, else a new one (whose error, if any, is the one reported)."""
        launch = self._early.take(headless=self.headless) if self._early is not None else None
        if launch is not None:
            try:
                launched = await launch
            except Exception:  # noqa: BLE001 - launched again below, which reports the error
                pass
            else:
                self._early_taken = True
                return launched
        return await start_chromium(headless=self.headless)

    async def _open_context(self) -> None:
        options: dict[str, Any] = {}
        if self.url_policy.has_domain_rules:
            # Every request of the context, loopback included, passes the domain check.
            from .guard_proxy import GuardProxy

            self._proxy = await GuardProxy(self.url_policy.host_refusal, self.url_policy.on_refused_request).start()
            options = {"proxy": {"server": self._proxy.url, "bypass": "<-loopback>"}, "service_workers": "block"}
        page = None
        early = self._early.take_page(viewport=self.viewport, scale=self.device_scale_factor, plain=not options) if self._early_taken else None
        if early is not None:
            try:
                self._context, page = await early
            except Exception:  # noqa: BLE001 - opened again below, which reports the error
                pass
        if page is None:
            self._context = await self._browser.new_context(
                viewport={"width": self.viewport[0], "height": self.viewport[1]},
                device_scale_factor=self.device_scale_factor, **options,
            )
        self._context.set_default_navigation_timeout(self.navigation_timeout * 1000)
        if self.legacy_step:
            await self._context.add_init_script(MUTATION_TRACKER)
            await self._context.add_init_script(widgets_script())
        else:  # one round trip; the key-listener tracker after widgets.js, whose key handling is ours
            await self._context.add_init_script(
                "\n;\n".join((MUTATION_TRACKER, widgets_script(), KEY_LISTENERS, STILL_CARET))
            )
        self._tracker.attach(self._context)
        self._context.on("page", self._on_new_page)
        self._use(page or await self._context.new_page())

    async def _guard(self, awaitable: Awaitable[Any]) -> Any:
        """Await a call into the browser; when Chromium or the page dies under it
        (a killed browser never answers), raise BrowserCrashed at once instead."""
        self._check_alive()
        if self._died is None:
            return await awaitable
        task = asyncio.ensure_future(awaitable)
        waiter = asyncio.ensure_future(self._died.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            waiter.cancel()
        if not task.done():
            task.cancel()
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            self._check_alive()
        try:
            return task.result()
        except BrowserCrashed:
            raise
        except Exception as exc:
            self._check_alive()  # a Playwright error because the browser died is a crash, not the step's error
            first = str(exc).splitlines()[0] if str(exc) else repr(exc)
            if any(sign in first.lower() for sign in CRASH_SIGNS):  # before the disconnect event arrives
                raise BrowserCrashed(f"the browser crashed ({first})") from None
            raise

    async def close(self) -> None:
        await self._downloads.cancel()
        try:
            if self._context is not None and not self._browser_gone:
                await asyncio.wait_for(self._context.close(), CLOSE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - closing a crashed context can fail (or hang); nothing to save
            pass
        finally:
            self._context = self._page = None
            if self._shared_browser is None and self._browser is not None:
                try:
                    await asyncio.wait_for(self._browser.close(), CLOSE_TIMEOUT_S)
                except Exception:  # noqa: BLE001
                    pass
            self._browser = None
            if self._playwright is not None:
                await self._playwright.stop()
                self._playwright = None
            if self._proxy is not None:
                await self._proxy.close()
                self._proxy = None

    @property
    def context(self) -> Any:
        """The Playwright BrowserContext (cookies, routes, storage) of this session."""
        if self._context is None:
            raise EnvironmentFailure("the browser is not started")
        return self._context

    async def element_at(self, point: Any) -> Any:
        if self._page is None:
            return None
        from .element_facts import element_at

        return await element_at(self._page, point.x, point.y)

    @property
    def page(self) -> Any:
        if self._page is None:
            raise EnvironmentFailure("the browser is not started")
        return self._page

    def _use(self, page: Any) -> None:
        self._page = page
        if id(page) not in self._hooked:
            self._hooked.add(id(page))
            page.on("crash", lambda *_: self._on_crash(page))
            page.on("framenavigated", lambda frame: self._on_navigated(page, frame))
            page.on("dialog", lambda dialog: self._on_dialog(page, dialog))
            page.on("filechooser", self._on_file_chooser)
            page.on("download", self._downloads.on_download)
            self.url_policy.watch(page)

    def _on_crash(self, page: Any) -> None:
        if page is self._page:
            self._crashed = page.url
            if self._died is not None:
                self._died.set()

    def _on_browser_gone(self) -> None:
        self._browser_gone = True
        if self._died is not None:
            self._died.set()

    def _on_navigated(self, page: Any, frame: Any) -> None:
        if page is self._page and frame == page.main_frame:
            self._navigations += 1

    def _on_new_page(self, page: Any) -> None:
        # A click that opens a tab makes that tab current.
        self._use(page)

    def _check_alive(self) -> None:
        if self._browser_gone:
            raise BrowserCrashed("the browser crashed (the Chromium process died)")
        if self._crashed is not None:
            raise BrowserCrashed(f"the page crashed (at {self._crashed or 'about:blank'})")

    # -- observe / settle ----------------------------------------------------

    async def observe(self) -> Observation:
        return await self._guard(self._observe())

    async def _observe(self) -> Observation:
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
        pages = self._context.pages
        notices = []
        if self._dialog is not None:
            notices.append(f"Open dialog: {self._dialog.describe()} — {self._dialog.how_to_answer()}.")
        if self.uploads:
            notices.append(f"Files you may upload (upload action): {self.uploads.listing()}")
        return Observation(
            screenshot=Screenshot(data, f"image/{self.screenshot_format}", _image_size(data), self.device_scale_factor, origin),
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
        return Mark(time.time() * 1000, self._tracker.seq, self._navigations, self._page.url if self._page else "", len(self._context.pages))

    async def settle(self, mark: Mark) -> str:
        self._check_alive()
        if self._dialog is not None:
            return "dialog"
        seen: dict[str, Any] = {}
        finished, reason = await self._until_dialog(
            settle_page(lambda: (self.page, self._navigations), mark, self._tracker, self.settle_config, seen)
        )
        if finished and "title" in seen and reason.endswith("quiet"):  # the page was quiet when its title was read
            self._settled_title = (self._page, self._navigations, seen["title"])
        await self._downloads.wait(self.settle_config.timeout)
        return reason if finished else "dialog"

    # -- dialogs, file choosers, downloads -----------------------------------

    def _on_dialog(self, page: Any, dialog: Any) -> None:
        if dialog.type == "beforeunload":  # never lets a page hold the run
            self._answer_later(dialog.accept())
            self._notices.append("the page asked to confirm leaving it (beforeunload); surfer left it")
            return
        if self._dialog is not None or page is not self._page:
            self._answer_later(dialog.dismiss())
            self._notices.append(f"dismissed a {dialog.type} dialog from another tab: {dialog.message!r}")
            return
        self._dialog = PendingDialog(dialog, dialog.type, dialog.message, dialog.default_value or "", page.url)
        self._dialog_layout = None
        if self._dialog_opened is not None:
            self._dialog_opened.set()
        self._notices.append(
            f"the page opened {self._dialog.describe()}; the page waits for an answer: {self._dialog.how_to_answer()} "
            "(if the next action does not answer it, it is dismissed)"
        )

    @staticmethod
    def _answer_later(answer: Awaitable[None]) -> None:
        task = asyncio.ensure_future(answer)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _until_dialog(self, awaitable: Awaitable[Any]) -> tuple[bool, Any]:
        """(True, result) when `awaitable` finished; (False, None) when a dialog
        opened first (the page is frozen; the work resumes once it is answered)."""
        task = asyncio.ensure_future(awaitable)
        if self._dialog_opened is None:
            return True, await task
        waiter = asyncio.ensure_future(self._dialog_opened.wait())
        try:
            done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            waiter.cancel()
        if task in done:
            return True, task.result()
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return False, None

    async def _run_action(self, handler: Any, action: Any) -> str:
        finished, detail = await self._until_dialog(handler(action))
        if finished:
            return detail
        return f"{action.describe() if action is not None else 'loading the page'}: held up by a dialog"

    async def _answer_dialog(self, response: str, text: str | None = None, why: str = "") -> str:
        dialog = self._dialog
        assert dialog is not None and self._dialog_opened is not None
        self._dialog, self._dialog_layout = None, None
        self._dialog_opened.clear()
        answer = text if text is not None else dialog.field_text
        try:
            if response == "accept":
                await (dialog.handle.accept(answer) if dialog.kind == "prompt" else dialog.handle.accept())
            else:
                await dialog.handle.dismiss()
        except Exception as exc:  # noqa: BLE001 - the page closed meanwhile
            return f"the {dialog.kind} dialog was already gone ({str(exc).splitlines()[0]})"
        verb = "accepted (OK)" if response == "accept" else "dismissed (Cancel)"
        with_text = f" with {answer!r}" if response == "accept" and dialog.kind == "prompt" else ""
        return f"{verb} the {dialog.kind} dialog {dialog.message!r}{with_text}{why}"

    def _dialog_part(self, point: Any) -> str | None:
        if self._dialog_layout is None or point is None:
            return None
        origin = (float(self.clip[0]), float(self.clip[1])) if self.clip is not None else (0.0, 0.0)
        return dialogs.button_at(self._dialog_layout, point, origin)

    def _answers_dialog(self, action: Action) -> bool:
        if isinstance(action, Dialog):
            return True
        if isinstance(action, Click):
            return action.button == "left" and self._dialog_part(action.point) is not None
        if isinstance(action, TypeText):
            return self._dialog is not None and self._dialog.kind == "prompt" and (
                action.point is None or self._dialog_part(action.point) == "field"
            )
        if isinstance(action, PressKeys):
            return action.keys in ("Enter", "Escape")
        return False

    def _on_file_chooser(self, chooser: Any) -> None:
        if self._uploading:
            return
        if self.uploads:
            self._notices.append(
                "error: the page opened a file chooser and nothing was chosen; to upload, use the upload action "
                f"on that control with one of: {self.uploads.listing()}"
            )
        else:
            self._notices.append(
                "error: the page opened a file chooser, but no file is allowed for upload in this run "
                "(start it with --upload-file PATH or files=[...]); nothing was chosen"
            )

    async def _approve_download(self, name: str, url: str) -> bool:
        return True if self.confirm_download is None else await self.confirm_download(name, url)

    def _downloads_folder(self) -> tuple[Path, str] | None:
        if self.downloads_dir is not None:
            return self.downloads_dir, str(self.downloads_dir.resolve())
        return (self.run_dir / "downloads", "downloads") if self.run_dir is not None else None

    def begin_run(self, run_dir: Path | None) -> None:
        super().begin_run(run_dir)
        self._downloads.reset()

    async def end_run(self) -> list[dict[str, Any]]:
        await self._downloads.wait(DOWNLOAD_WRAP_UP_S)
        await self._downloads.cancel()
        return [record.to_dict() for record in self._downloads.records]

    async def perform(self, action: Action) -> ActionOutcome:
        self._check_alive()
        self._settled_title = None
        notes: list[str] = []
        if self._dialog is not None and not self._answers_dialog(action):
            notes.append(await self._answer_dialog("dismiss", why=" by default (the step did not answer it)"))
        try:
            outcome = await self._guard(super().perform(action))
        except (SurferError, ValueError):
            raise
        except Exception as exc:  # noqa: BLE001 - Playwright's plain Error: a crash, or an action the page refused
            message = str(exc).splitlines()[0] if str(exc) else repr(exc)
            self._check_alive()
            if "crashed" in message.lower():
                raise BrowserCrashed(f"the page crashed (at {self._page.url if self._page else 'about:blank'})") from None
            raise ActionFailed(f"{action.type} failed: {message}") from None
        if self._dialog is None and await self.url_policy.leave_refused(self.page):
            outcome.settle_reason += "; left a refused page"
        arrived = self._downloads.take_new()
        notes += [outcome.detail, *self._notices, *self.url_policy.take_notices(), *(r.describe() for r in arrived)]
        self._notices = []
        outcome.detail = "; ".join(part for part in notes if part)
        outcome.downloads = [record.to_dict() for record in arrived]
        return outcome

    # -- actions -------------------------------------------------------------

    async def _act_click(self, action: Click) -> str:
        p = action.point
        part = self._dialog_part(p) if self._dialog is not None else None
        if part in ("ok", "cancel"):
            return await self._answer_dialog("accept" if part == "ok" else "dismiss")
        if part is not None:
            return f"clicked the {self._dialog.kind} dialog ({'its text field' if part == 'field' else 'not a button'})"  # type: ignore[union-attr]
        since = time.time() * 1000 - 50
        keyboard = self.page.keyboard
        for key in action.modifiers:
            await keyboard.down(key)
        try:
            await self.page.mouse.click(p.x, p.y, button=action.button, click_count=2 if action.double else 1)
        finally:
            for key in reversed(action.modifiers):
                await keyboard.up(key)
        held = "+".join(action.modifiers)
        detail = f"{held + '+' if held else ''}{'double-' if action.double else ''}{action.button} click at {p}"
        if action.button == "right" and self._dialog is None:
            detail += await context_menu_note(self.page, since)
        return detail

    async def _act_dialog(self, action: Dialog) -> str:
        if self._dialog is None:
            raise ActionFailed("no dialog is open")
        return await self._answer_dialog(action.response, action.text)

    async def _act_upload(self, action: Upload) -> str:
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        path = self.uploads.resolve(action.path)  # a name outside the allowed list fails here, unread
        page, p = self.page, action.point
        self._uploading = True
        try:
            async with page.expect_file_chooser(timeout=FILE_CHOOSER_TIMEOUT_MS) as chooser_info:
                await page.mouse.click(p.x, p.y)
            chooser = await chooser_info.value
        except PlaywrightTimeout:
            raise ActionFailed(
                f"clicking {action.target!r} opened no file chooser within {FILE_CHOOSER_TIMEOUT_MS // 1000} s: "
                "target the file field or the page's upload button"
            ) from None
        finally:
            self._uploading = False
        await chooser.set_files(str(path))
        return f"uploaded {path.name} ({path.stat().st_size} bytes) through the page's file chooser"

    async def _act_hover(self, action: Hover) -> str:
        await self.page.mouse.move(action.point.x, action.point.y)
        return f"hover at {action.point}"

    async def _act_type(self, action: TypeText) -> str:
        if self._dialog is not None and self._dialog.kind == "prompt":
            self._dialog.text = action.text if action.clear or self._dialog.text is None else self._dialog.text + action.text
            if action.submit:
                return await self._answer_dialog("accept")
            return f"typed {len(action.text)} characters into the prompt dialog's field"
        page = self.page
        if action.point is not None:
            await page.mouse.click(action.point.x, action.point.y)
        await self._type_text(page, action.text, clear=action.clear)
        if action.submit:
            await page.keyboard.press("Enter")
        return f"typed {len(action.text)} characters" + (" and pressed Enter" if action.submit else "")

    async def _type_text(self, page: Any, text: str, *, clear: bool) -> None:
        """One insert when the page listens to no key (surfer/tools/typing.py), else
        key by key; `clear` first empties the field (select-all + delete)."""
        if not self.legacy_step and text and await page.evaluate(MAY_INSERT, {"text": text, "clear": clear}):
            await page.keyboard.insert_text(text)  # replaces the selection `clear` made
            return
        if clear:
            await page.keyboard.press("ControlOrMeta+A")
            await page.keyboard.press("Delete")
        await page.keyboard.type(text)

    async def _act_press(self, action: PressKeys) -> str:
        if self._dialog is not None and action.keys in ("Enter", "Escape"):
            return await self._answer_dialog("accept" if action.keys == "Enter" else "dismiss")
        try:
            await self.page.keyboard.press(action.keys)
        except Exception as exc:  # noqa: BLE001 - Playwright: 'Unknown key: ...'
            raise ActionFailed(f"cannot press {action.keys!r}: {str(exc).splitlines()[0]}") from None
        return f"pressed {action.keys}"

    async def _act_scroll(self, action: Scroll) -> str:
        page = self.page
        x, y = (action.point.x, action.point.y) if action.point else (self.viewport[0] / 2, self.viewport[1] / 2)
        await page.mouse.move(x, y)
        distance = action.amount * WHEEL_NOTCH_PX
        dx, dy = {"up": (0, -distance), "down": (0, distance), "left": (-distance, 0), "right": (distance, 0)}[action.direction]
        await page.mouse.wheel(dx, dy)
        return f"scrolled {action.direction} {distance} px at ({x:.0f}, {y:.0f})"

    async def _act_drag(self, action: Drag) -> str:
        mouse = self.page.mouse
        await mouse.move(action.point.x, action.point.y)
        await mouse.down()
        await mouse.move(action.to_point.x, action.to_point.y, steps=12)
        await mouse.up()
        return f"dragged {action.point} → {action.to_point}"

    async def _goto(self, url: str) -> None:
        current = self._page.url if self._page else ""
        self.url_policy.check(url, opener=current)  # before normalising: 'javascript:x' must not become 'https://javascript:x'
        target = normalize_url(url, current)
        self.url_policy.check(target, opener=current)
        try:
            await self.page.goto(target, wait_until="domcontentloaded")
        except Exception as exc:  # noqa: BLE001
            self._check_alive()
            raise ActionFailed(f"could not open {target}: {str(exc).splitlines()[0]}") from None

    async def _act_goto(self, action: Goto) -> str:
        await self._goto(action.url)
        return f"opened {self.page.url}"

    async def _history(self, name: str) -> str:
        try:
            response = await getattr(self.page, name)(wait_until="domcontentloaded")
        except Exception as exc:  # noqa: BLE001
            raise ActionFailed(f"{name.replace('_', ' ')} failed: {str(exc).splitlines()[0]}") from None
        if response is None and name != "reload":
            return f"{name.replace('_', ' ')}: no page in that direction (still at {self.page.url})"
        return f"now at {self.page.url}"

    async def _act_back(self, action: Any) -> str:
        return await self._history("go_back")

    async def _act_forward(self, action: Any) -> str:
        return await self._history("go_forward")

    async def _act_refresh(self, action: Any) -> str:
        return await self._history("reload")

    async def _act_switch_tab(self, action: SwitchTab) -> str:
        pages = self._context.pages
        if action.index >= len(pages):
            raise ActionFailed(f"there is no tab {action.index}; open tabs: 0..{len(pages) - 1}")
        self._use(pages[action.index])
        await self._page.bring_to_front()
        return f"switched to tab {action.index} ({self._page.url})"

    async def _act_close_tab(self, action: CloseTab) -> str:
        pages = self._context.pages
        index = pages.index(self._page) if action.index is None else action.index
        if index >= len(pages):
            raise ActionFailed(f"there is no tab {index}; open tabs: 0..{len(pages) - 1}")
        closing = pages[index]
        await closing.close()
        remaining = self._context.pages
        if not remaining:
            self._use(await self._context.new_page())
        elif closing is self._page:
            self._use(remaining[min(index, len(remaining) - 1)])
            await self._page.bring_to_front()
        return f"closed tab {index}; current tab is {self._page.url}"
