"""What a browser session does: each action (click, type, scroll, drag,
goto, tabs, uploads), the answers to native dialogs and file choosers, and
downloads. A mixin of `BrowserEnvironment` (session.py)."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any, Awaitable

from surfer.core.actions import (
    Action,
    Click,
    CloseTab,
    Dialog,
    Drag,
    Goto,
    Hover,
    PressKeys,
    Scroll,
    SwitchTab,
    TypeText,
    Upload,
)
from surfer.core.errors import ActionFailed, BrowserCrashed, SurferError
from surfer.tools import dialogs
from surfer.tools.base import ActionOutcome
from surfer.tools.browser import scrolling
from surfer.tools.dialogs import PendingDialog
from surfer.tools.keys import KEY_NAMES_HINT, browser_shortcut, playwright_keys
from surfer.tools.typing import FOCUS_MOVES, MAY_INSERT, TYPED_IN, focused_target, hide_typed
from surfer.tools.url_policy import normalize_url
from surfer.tools.widgets import PRINT_NOTE, context_menu_note, tooltip_note

WHEEL_NOTCH_PX = 100
SHORTCUT_VERBS = {"refresh": "reload the page", "back": "go back", "forward": "go forward", "close_tab": "close the tab",
                  "next_tab": "switch to the next tab", "previous_tab": "switch to the previous tab"}
FOCUS_WAIT_MS = 150  # after a click that left no field focused: how long the page may take to focus one
DATE_FIELD_PARTS = 6  # a date-and-time field's parts: month, day, year, hour, minute, AM/PM
FILE_CHOOSER_TIMEOUT_MS = 5_000
DOWNLOAD_WRAP_UP_S = 10.0


class BrowserActions:
    """Acting in the page (see the module's docstring)."""

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

    def dialog_answered_in_window(self, page: Any) -> str:
        """The dialog held for the agent in `page` was answered outside surfer (a person at the browser's window,
        whose page runs again): it is forgotten, not drawn again nor answered later. What to say ("" when none)."""
        dialog = self._dialog
        if dialog is None or getattr(dialog.handle, "page", page) is not page:
            return ""
        self._dialog, self._dialog_layout = None, None
        if self._dialog_opened is not None:
            self._dialog_opened.clear()
        return f"the page opened {dialog.describe()}, answered in the window"

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
            return playwright_keys(action.keys) in ("Enter", "Escape")
        return False

    def _on_file_chooser(self, chooser: Any) -> None:
        self._chooser_report.arrived()
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

    async def end_run(self, status: str = "") -> list[dict[str, Any]]:
        await self._downloads.wait(DOWNLOAD_WRAP_UP_S)
        await self._downloads.cancel()
        if not self._browser_gone:
            self.trace_file = await self.trace.finish(self.run_dir, status)
            await self._end_state(status)  # after the trace's chunk: reading the state may open a page
        return [record.to_dict() for record in self._downloads.records]

    def step_group(self, name: str) -> Any:
        return self.trace.group(name)

    _scrolled: tuple[Any, str, int, float, float] | None = None  # a scroll to measure once the page settled

    async def perform(self, action: Action) -> ActionOutcome:
        self._check_alive()
        self._settled_title = None
        self._scrolled = None
        self._asked_to_print = False
        self._vanished = []
        notes: list[str] = []
        self.activated(action.type)  # (the page may open a tab on a click or a key: session.may_open_tab)
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
        if self._scrolled is not None and self._dialog is None and self._scrolled[0] is self._page:
            told = await self._guard(scrolling.describe(*self._scrolled))
            outcome.detail = told or outcome.detail
        arrived = self._downloads.take_new()
        if arrived:
            await self._close_download_tab()
        await self._leave_closed_tab()
        if self._dialog is None and await self.url_policy.leave_refused(self.page):
            outcome.settle_reason += "; left a refused page"
        if self._asked_to_print:  # (the settle wait's in-page check saw it)
            outcome.detail += f"; {PRINT_NOTE}"
        if self._vanished:  # (a toast the settle wait outlasted: the screenshot does not show it)
            shown = ", ".join(f'"{text}"' for text in self._vanished)
            outcome.detail += f"; the page showed {shown} for a moment, gone before this screenshot"
        notes += [outcome.detail, *self._notices, *self.url_policy.take_notices(), *(r.describe() for r in arrived)]
        self._notices, self._start_notices = [], []
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
        return f"hover at {action.point}" + await tooltip_note(self.page, action.point.x, action.point.y)

    async def _act_type(self, action: TypeText) -> str:
        if self._dialog is not None and self._dialog.kind == "prompt":
            self._dialog.text = action.text if action.clear or self._dialog.text is None else self._dialog.text + action.text
            if action.submit:
                return await self._answer_dialog("accept")
            return f"typed {len(action.text)} characters into the prompt dialog's field"
        page = self.page
        if action.point is not None:
            await page.mouse.click(action.point.x, action.point.y)
        into_field = await self._type_text(page, action.text, clear=action.clear, clicked=action.point is not None)
        kept = ""  # what the field did not keep of the text, told (TYPED_IN)
        if into_field and action.text and not self.legacy_step:
            kept = await page.evaluate(TYPED_IN, {"text": action.text, "clear": action.clear})
        if self.hide_typed and into_field:  # a secret: the field draws dots, in the screenshots too
            await hide_typed(page)
        if action.submit:
            await page.keyboard.press("Enter")
        detail = f"typed {len(action.text)} characters" + (" and pressed Enter" if action.submit else "")
        if not into_field:
            where = f"the click at {action.point} focused no text field" if action.point else "no text field had the focus"
            detail += f"; {where}, so the keys went to the page, not into a field"
        return f"{detail}; {kept}" if kept else detail

    async def _type_text(self, page: Any, text: str, *, clear: bool, clicked: bool = False) -> bool:
        """One insert when the page listens to no key (surfer/tools/typing.py), else
        key by key; `clear` first empties the field (select-all + delete). False when
        nothing that takes text had the focus (the keys went to the page; nothing is cleared). After a
        click (`clicked`) that left no field focused, the focus the page moves a
        moment later is waited for, briefly."""
        way = "keys" if self.legacy_step or not text else await page.evaluate(MAY_INSERT, {"text": text, "clear": clear})
        if way == "nowhere" and clicked and await page.evaluate(FOCUS_MOVES, FOCUS_WAIT_MS):
            way = await page.evaluate(MAY_INSERT, {"text": text, "clear": clear})
        if self.keys_guard is not None:  # where the keys go now, not where the click aimed (the page may move the focus)
            refused = self.keys_guard(*await focused_target(page))
            if refused is not None:
                raise ActionFailed(refused)
        if way == "insert":
            await page.keyboard.insert_text(text)  # replaces the selection `clear` made
            return True
        if way == "set":  # a date or time field took the text as its value
            return True
        if way == "segments":  # a date or time field, typed as shown: from its first part (month, hour)
            for _ in range(DATE_FIELD_PARTS):
                await page.keyboard.press("ArrowLeft")
        if clear and way != "nowhere":  # (on the page itself, select-all would select the whole page's text)
            await page.keyboard.press("ControlOrMeta+A")
            await page.keyboard.press("Delete")
        await page.keyboard.type(text)
        return way != "nowhere"

    async def _act_press(self, action: PressKeys) -> str:
        keys = playwright_keys(action.keys)  # 'ctrl+a', 'esc' and the like, as models write them
        if self._dialog is not None and keys in ("Enter", "Escape"):
            return await self._answer_dialog("accept" if keys == "Enter" else "dismiss")
        shortcut = browser_shortcut(keys)
        if shortcut is not None:
            return await self._browser_shortcut(keys, shortcut)
        try:
            await self.page.keyboard.press(keys)
        except Exception as exc:  # noqa: BLE001 - Playwright: 'Unknown key: "Nope"'
            unknown = re.search(r'Unknown key: "(.*)"', str(exc))
            why = f"unknown key {unknown.group(1)!r}; {KEY_NAMES_HINT}" if unknown else str(exc).splitlines()[0]
            raise ActionFailed(f"cannot press {action.keys!r}: {why}") from None
        return f"pressed {keys}"

    async def _browser_shortcut(self, keys: str, shortcut: str) -> str:
        """A key the browser acts on, never the page (F5, Alt+ArrowLeft, Control+W): what the browser would do."""
        if shortcut in ("refresh", "back", "forward"):
            done = await self._history({"refresh": "reload", "back": "go_back", "forward": "go_forward"}[shortcut])
        elif shortcut == "close_tab":
            done = await self._act_close_tab(CloseTab())
        elif shortcut in ("next_tab", "previous_tab"):
            index = self._tabs.index(self._page) + (1 if shortcut == "next_tab" else -1)
            done = await self._act_switch_tab(SwitchTab(index=index % len(self._tabs)))
        else:
            raise ActionFailed(f"{keys} opens the browser's {shortcut}, which surfer's browser does not show: to open "
                               "an address, use the goto action")
        return f"{keys} is the browser's key to {SHORTCUT_VERBS[shortcut]}: {done}"

    async def _act_scroll(self, action: Scroll) -> str:
        page = self.page
        x, y = (action.point.x, action.point.y) if action.point else (self.viewport[0] / 2, self.viewport[1] / 2)
        await page.mouse.move(x, y)
        distance = action.amount * WHEEL_NOTCH_PX
        dx, dy = {"up": (0, -distance), "down": (0, distance), "left": (-distance, 0), "right": (distance, 0)}[action.direction]
        measured = not self.legacy_step and await scrolling.note_positions(page, x, y)
        await page.mouse.wheel(dx, dy)
        if measured:  # what moved is told once the page settled (perform)
            self._scrolled = (page, action.direction, distance, x, y)
        return f"scrolled {action.direction} {distance} px at ({x:.0f}, {y:.0f})"

    async def _act_drag(self, action: Drag) -> str:
        mouse = self.page.mouse
        await mouse.move(action.point.x, action.point.y)
        await mouse.down()
        await mouse.move(action.to_point.x, action.to_point.y, steps=12)
        await mouse.up()
        return f"dragged {action.point} → {action.to_point}"

    async def _goto(self, url: str) -> bool | str:
        """Open `url` in the tab; False when it is a file the browser downloads instead, a note when its
        document was still arriving at the navigation timeout (opened as far as it came)."""
        current = self._page.url if self._page else ""
        self.url_policy.check(url, opener=current)  # before normalising: 'javascript:x' must not become 'https://javascript:x'
        target = normalize_url(url, current)
        self.url_policy.check(target, opener=current)
        started = time.monotonic()
        try:
            await self.page.goto(target, wait_until="commit")
        except Exception as exc:  # noqa: BLE001
            self._check_alive()
            if "Download is starting" in str(exc):  # a file, not a page: the download is reported as a link's is
                return False
            hint = " (the site's certificate is not trusted: for a test server of yours, --ignore-https-errors)" \
                if "ERR_CERT_" in str(exc) and not self.ignore_https_errors else ""
            raise ActionFailed(f"could not open {target}: {str(exc).splitlines()[0]}{hint}") from None
        # The page is there (its server answered): its document may still be arriving. One that never ends (a slow
        # or held-open response) is shown as far as it came, as a browser shows it, not an error.
        left = max(0.1, self.navigation_timeout - (time.monotonic() - started))
        try:
            await self.page.wait_for_load_state("domcontentloaded", timeout=left * 1000)
        except Exception:  # noqa: BLE001
            self._check_alive()
            if self.page.url.rstrip("/") == target.rstrip("/"):
                return f"{target} was still loading after {self.navigation_timeout:g} s: what arrived of it is shown"
        return True

    async def _act_goto(self, action: Goto) -> str:
        opened = await self._goto(action.url)
        if not opened:
            return f"{action.url} is a file, not a page: it downloads (the tab stays at {self.page.url})"
        return f"opened {self.page.url}" + (f"; {opened}" if isinstance(opened, str) else "")

    async def _history(self, name: str) -> str:
        before = self.page.url
        try:
            response = await getattr(self.page, name)(wait_until="domcontentloaded")
        except Exception as exc:  # noqa: BLE001
            raise ActionFailed(f"{name.replace('_', ' ')} failed: {str(exc).splitlines()[0]}") from None
        # (no response either for an entry of the same document: a single-page app's pushState history)
        if response is None and name != "reload" and self.page.url == before:
            return f"{name.replace('_', ' ')}: no page in that direction (still at {self.page.url})"
        return f"now at {self.page.url}"

    async def _act_back(self, action: Any) -> str:
        return await self._history("go_back")

    async def _act_forward(self, action: Any) -> str:
        return await self._history("go_forward")

    async def _act_refresh(self, action: Any) -> str:
        return await self._history("reload")

    async def _act_switch_tab(self, action: SwitchTab) -> str:
        pages = self._tabs
        if action.index >= len(pages):
            raise ActionFailed(f"there is no tab {action.index}; open tabs: 0..{len(pages) - 1}")
        self._use(pages[action.index])
        await self._page.bring_to_front()
        return f"switched to tab {action.index} ({self._page.url})"

    async def _act_close_tab(self, action: CloseTab) -> str:
        pages = self._tabs
        index = pages.index(self._page) if action.index is None else action.index
        if index >= len(pages):
            raise ActionFailed(f"there is no tab {index}; open tabs: 0..{len(pages) - 1}")
        closing = pages[index]
        await closing.close()
        if closing is self._page or not self._tabs:
            await self._work_in_open_tab(index)
        return f"closed tab {index}; current tab is {self._page.url}"
