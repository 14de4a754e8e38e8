"""The desktop: any application, seen with mss and driven with OS input
(pyautogui). Install with `pip install 'surfer-agent[desktop]'`.

One `DesktopEnvironment` watches one monitor (or a region of the screen) of
one X display. Screenshots carry their geometry (`scale` = screenshot pixels
per input pixel, for HiDPI; `origin` = the monitor's or region's top-left in
input coordinates), so `surfer.core.coordinates` maps model answers to the
points pyautogui takes. Every blocking call (grab, encode, input) runs in a
worker thread.

pyautogui reads DISPLAY once, when it is first imported, so a process drives
one X display: `display=` binds it on first use, and a later environment
asking for another display gets a `ConfigError`. pyautogui's fail-safe stays
on by default: moving the mouse into a corner of the screen stops the run. The
agent's own points never end in a corner (a model's answer there is moved one
pixel in), so a pointer in a corner is always a person's brake; an action that
fails half-way releases the keys and mouse buttons it held.
"""

from __future__ import annotations

import asyncio
import io
import logging
import sys
import threading
import zlib
from typing import Any

from surfer.core.actions import Action, Click, Drag, Hover, PressKeys, Scroll, TypeText
from surfer.core.coordinates import Size
from surfer.core.errors import ActionFailed, ActionNotSupported, ConfigError, EnvironmentFailure, SurferError
from surfer.core.observation import Observation, Screenshot

from .base import ActionOutcome, Environment
from .desktop_display import _display_answers, _linux, _load_pyautogui, _open_screen, pick_monitor, resolve_display
from .keys import KEY_NAMES_HINT, key_name, split_keys
from .screen_settle import ScreenHabits, ScreenSettleConfig, settle_screen, tile_digests
from .x11_keys import X11Keyboard, keysym_of

log = logging.getLogger("surfer.desktop")

BROWSER_ONLY = frozenset({"goto", "back", "forward", "refresh", "switch_tab", "close_tab", "upload", "dialog"})

_MAC = sys.platform == "darwin"
_PRIMARY_MODIFIER = "command" if _MAC else "ctrl"
# Playwright's key names (keys.key_name: what models write) → pyautogui's; the other names are lowercased.
PYAUTOGUI_KEYS = {
    "Control": "ctrl", "ControlOrMeta": _PRIMARY_MODIFIER, "Meta": "command" if _MAC else "win",
    "Alt": "option" if _MAC else "alt", "Escape": "esc", "ArrowUp": "up", "ArrowDown": "down", "ArrowLeft": "left",
    "ArrowRight": "right", "ContextMenu": "apps",
}


FAILSAFE_STOP = (
    "pyautogui fail-safe: the mouse pointer is in a corner of the screen{where}, a person's sign to stop the agent, "
    "so the run {what}. Move the pointer away from the corners before running again; "
    "on a display nobody uses (Xvfb) the fail-safe can be turned off: `failsafe = false` in the [desktop] section "
    "of the configuration, DesktopEnvironment(failsafe=False) in Python"
)


def pyautogui_key(part: str, mapping: dict[str, Any] | None) -> str | None:
    """The pyautogui name for one key, or None when this platform cannot press it."""
    name = key_name(part)
    if len(name) > 1:
        name = PYAUTOGUI_KEYS.get(name, name.lower())
    elif name.isalpha():
        name = name.lower()
    if mapping is None:
        return name
    return name if mapping.get(name) else None


def _describe_call(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """'click(214, 118, button='left')': the pyautogui call, for dry-run details."""
    return f"{name}({', '.join([*map(repr, args), *(f'{k}={v!r}' for k, v in kwargs.items())])})"


class _Stopped(BaseException):
    """The action was cancelled while its input was being sent (raised in its worker thread)."""


class DesktopEnvironment(Environment):
    """The screen of one monitor (or region) of a desktop, driven with OS input.

    display:   X display such as ':99' (default: $DISPLAY; Linux only)
    monitor:   mss monitor index: 1 = the first monitor, 0 = all monitors together
    region:    (left, top, width, height) in input coordinates, instead of a monitor
    failsafe:  keep pyautogui's fail-safe (mouse in a screen corner stops the run);
               turn off only on a headless display nobody can reach, e.g. Xvfb
    dry_run:   log every action (in the outcome detail) without performing it
    """

    unsupported_actions = BROWSER_ONLY

    kind = "desktop"

    def __init__(
        self,
        *,
        display: str | None = None,
        monitor: int = 1,
        region: tuple[int, int, int, int] | None = None,
        failsafe: bool = True,
        dry_run: bool = False,
        settle: ScreenSettleConfig | None = None,
        screenshot_format: str = "jpeg",
        jpeg_quality: int = 85,
        drag_seconds: float = 0.25,
    ) -> None:
        if monitor < 0:
            raise ConfigError(f"monitor must be 0 (all monitors) or a monitor number from 1, got {monitor}")
        if region is not None and (
            len(region) != 4 or not all(isinstance(v, int) for v in region) or region[2] <= 0 or region[3] <= 0
        ):
            raise ConfigError(f"region must be (left, top, width, height) in whole pixels with a positive size, got {region}")
        if screenshot_format not in ("jpeg", "png"):
            raise ConfigError("screenshot format must be 'jpeg' or 'png'")
        self.display = display
        self.monitor = monitor
        self.region = region
        self.failsafe = failsafe
        self.dry_run = dry_run
        self.settle_config = settle or ScreenSettleConfig()
        self.screenshot_format = screenshot_format
        self.jpeg_quality = jpeg_quality
        self.drag_seconds = drag_seconds
        self._screen: Any = None  # mss.MSS (thread-safe, one lock per instance)
        self._gui: Any = None  # the pyautogui module
        self._keys: dict[str, Any] | None = None
        self._area: dict[str, int] = {}
        self._gone = False  # the X display went away under a run
        self._last_digest: tuple[tuple[int, int, int], tuple[int, ...]] | None = None  # (whole frame, its tiles)
        self._habits = ScreenHabits()  # what the screen changes on its own (a spinner, a clock), for the settle wait
        self._keyboard: X11Keyboard | None = None
        self._several_screens = False  # an X display of several screens (':0.1' names the second)
        self._stop = threading.Event()  # set: the action in progress was cancelled

    # -- lifecycle ---------------------------------------------------------

    def _resolve_display(self) -> str | None:
        return resolve_display(self.display)

    async def start(self, url: str | None = None) -> None:
        if url:
            raise ConfigError(
                "the desktop environment does not open URLs; start the application first and describe it in the task"
            )
        if self._screen is not None:
            return
        display = self._resolve_display()
        screen = await asyncio.to_thread(_open_screen, display)
        try:
            self._area = self._pick_area(screen.monitors)
            self._gui = await asyncio.to_thread(_load_pyautogui, display)
            pointer = tuple(await asyncio.to_thread(self._gui.position))
            if self.failsafe and not self.dry_run and pointer in self._gui.FAILSAFE_POINTS:
                # (the brake pulled before the run began, or during the last one: its first action would stop it)
                raise ConfigError(FAILSAFE_STOP.format(where=f" at {pointer}", what="cannot start"))
        except BaseException:
            screen.close()
            raise
        self._keys = getattr(self._gui.platformModule, "keyboardMapping", None)
        if _linux():  # text typed by the X server's own keymap, any character (x11_keys.py)
            self._keyboard = X11Keyboard(self._gui.platformModule._display)
            self._several_screens = self._gui.platformModule._display.screen_count() > 1
        self._screen, self.display = screen, display

    def _pick_area(self, monitors: list[dict[str, int]]) -> dict[str, int]:
        if self.region is not None:  # within the screen: mss cannot grab what is beyond it (an X protocol error)
            left, top, width, height = self.region
            screen = monitors[0]
            if left < screen["left"] or top < screen["top"] or left + width > screen["left"] + screen["width"] \
                    or top + height > screen["top"] + screen["height"]:
                raise ConfigError(
                    f"region {width}x{height}{left:+d}{top:+d} reaches beyond the screen, "
                    f"{screen['width']}x{screen['height']}{screen['left']:+d}{screen['top']:+d}: it must lie within it"
                )
            return {"left": left, "top": top, "width": width, "height": height}
        return pick_monitor(monitors, self.monitor)

    async def close(self) -> None:
        keyboard, self._keyboard = self._keyboard, None
        if keyboard is not None and not self._gone:
            try:
                await asyncio.to_thread(keyboard.release)
            except Exception as exc:  # noqa: BLE001 - the display went away: its keymap with it
                log.debug("giving back the spare keys of display %s: %r", self.display, exc)
        screen, self._screen = self._screen, None
        if screen is not None:
            try:
                await asyncio.to_thread(screen.close)
            except Exception as exc:  # noqa: BLE001 - an X server already gone cannot be said goodbye to
                log.debug("closing the screen of display %s: %r", self.display, exc)

    @property
    def alive(self) -> bool:
        return not self._gone

    def _failure(self, doing: str, exc: Exception) -> EnvironmentFailure:
        """What an X call that raised means: the display went away (its X server stopped), or the call failed."""
        if not _display_answers(self.display):
            self._gone = True
            return EnvironmentFailure(
                f"{doing} failed: the X display {self.display} went away (its X server stopped or was killed); "
                "the applications on it are gone with it"
            )
        return EnvironmentFailure(f"{doing} failed: {type(exc).__name__}{f': {exc}' if str(exc) else ''}")

    @property
    def screen(self) -> Any:
        if self._screen is None:
            raise EnvironmentFailure("the desktop environment is not started (call start() first)")
        return self._screen

    # -- observe / settle ----------------------------------------------------

    def _capture(self) -> Screenshot:
        from PIL import Image

        shot = self.screen.grab(self._area)
        image = Image.frombytes("RGB", shot.size, shot.bgra, "raw", "BGRX")
        out = io.BytesIO()
        if self.screenshot_format == "jpeg":
            image.save(out, format="JPEG", quality=self.jpeg_quality)
        else:
            image.save(out, format="PNG", compress_level=1)
        area = self._area
        return Screenshot(
            out.getvalue(), f"image/{self.screenshot_format}", Size(*shot.size),
            scale=shot.size[0] / area["width"], origin=(float(area["left"]), float(area["top"])),
        )

    def _grab_digest(self) -> tuple[int, ...]:
        shot = self.screen.grab(self._area)
        whole = (zlib.crc32(shot.raw), shot.width, shot.height)  # (the tiles of an unchanged frame are not hashed again)
        if self._last_digest is None or self._last_digest[0] != whole:
            self._last_digest = (whole, tile_digests(shot.raw, shot.width, shot.height))
        return self._last_digest[1]

    async def _digest(self) -> tuple[int, ...]:
        try:
            return await asyncio.to_thread(self._grab_digest)
        except EnvironmentFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - mss raises ScreenShotError, AssertionError, X errors, ...
            raise await asyncio.to_thread(self._failure, "watching the screen", exc) from None

    async def observe(self) -> Observation:
        try:
            screenshot = await asyncio.to_thread(self._capture)
        except EnvironmentFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - mss raises ScreenShotError, AssertionError, X errors, ...
            raise await asyncio.to_thread(self._failure, "the screenshot of the desktop", exc) from None
        a = self._area
        where = f"region {a['width']}x{a['height']}+{a['left']}+{a['top']}" if self.region else f"monitor {self.monitor}"
        title = f"Desktop (display {self.display}, {where})" if self.display else f"Desktop ({where})"
        return Observation(screenshot=screenshot, title=title)

    async def mark(self) -> tuple[int, ...] | None:
        return None if self.dry_run else await self._digest()

    async def settle(self, mark: tuple[int, ...] | None) -> str:
        if self.dry_run:
            return "dry-run"
        seen: dict[str, Any] = {}
        reason = await settle_screen(self._digest, mark, self.settle_config, self._habits.of(mark), seen)
        self._habits.learn(seen)
        return reason

    # -- performing ----------------------------------------------------------

    async def perform(self, action: Action) -> ActionOutcome:
        if action.type in BROWSER_ONLY:
            raise ActionNotSupported(
                f"'{action.type}' is a browser action: the desktop has no pages, URLs or tabs, and its dialogs and "
                "file choosers are windows on screen (click their buttons, type into their fields). "
                "Work through the applications on screen instead "
                f"(it supports: {', '.join(sorted(self.supported_actions))})"
            )
        return await super().perform(action)

    def _run(self, steps: list[tuple[str, tuple[Any, ...], dict[str, Any]]], stop: threading.Event) -> None:
        """The steps, in a worker thread; `stop` set (the action was cancelled): no further step or character."""
        gui = self._gui
        gui.FAILSAFE = self.failsafe
        held: list[str] = []  # keys pressed down by these steps and not released yet
        self._stop = stop
        try:
            if self._several_screens:
                self._pointer_onto_screen()
            for name, args, kwargs in steps:
                if stop.is_set():
                    raise _Stopped
                if name == "dragTo":
                    held.append("mouse")
                if name == "write" and self._keyboard is not None:
                    self._write(args[0])
                else:
                    getattr(gui, name)(*args, _pause=False, **kwargs)
                if name == "keyDown":
                    held.append(args[0])
                elif name == "keyUp" and args[0] in held:
                    held.remove(args[0])
                elif name == "dragTo":
                    held.remove("mouse")
        except BaseException as exc:
            self._release(held)
            if isinstance(exc, gui.FailSafeException):
                raise EnvironmentFailure(FAILSAFE_STOP.format(
                    where=self._pointer(), what="was stopped before its next action")) from None
            if isinstance(exc, gui.PyAutoGUIException):
                raise ActionFailed(f"desktop input failed: {exc}") from None
            if isinstance(exc, Exception) and not isinstance(exc, SurferError):
                raise self._failure("desktop input", exc) from None
            raise

    def _pointer(self) -> str:
        """Where the mouse pointer is, ' at (x, y)', for a message ('' when it cannot be read)."""
        try:
            x, y = self._gui.position()
        except Exception:  # noqa: BLE001 - the display went away meanwhile
            return ""
        return f" at ({x}, {y})"

    def _pointer_onto_screen(self) -> None:
        """On a display of several X screens, bring the pointer onto the watched one (to the middle of the watched
        area): XTest moves it within the screen it is on, so the input went to another screen than the one seen.
        The fail-safe is checked first: a pointer a person put in a corner of the other screen stays there."""
        display = self._gui.platformModule._display
        root = display.screen().root
        if root.query_pointer().same_screen:
            return
        self._gui.failSafeCheck()
        area = self._area
        root.warp_pointer(area["left"] + area["width"] // 2, area["top"] + area["height"] // 2)  # (XTest stays on its screen)
        display.sync()

    def _write(self, text: str) -> None:
        """Type `text` by the X server's keymap (a spare key for a character on none); the fail-safe is checked
        before each character, as pyautogui's write does."""
        assert self._keyboard is not None
        for keycode, shift in self._keyboard.plan(text):
            if self._stop.is_set():
                raise _Stopped
            self._gui.failSafeCheck()
            self._keyboard.press(keycode, shift)

    def _release(self, held: list[str]) -> None:
        """Release what a failed action held down (a modifier of a Shift+click, the button of a drag), past the
        fail-safe's check: a Shift left pressed would stay pressed on the user's desktop after the run."""
        platform = self._gui.platformModule
        for key in reversed(held):
            try:
                if key == "mouse":
                    x, y = platform._position()
                    platform._mouseUp(x, y, "left")
                else:
                    platform._keyUp(key)
            except Exception as exc:  # noqa: BLE001 - a display gone meanwhile: nothing is held any more
                log.debug("releasing %s after a failed action: %r", key, exc)

    async def _input(self, detail: str, *steps: tuple[str, tuple[Any, ...], dict[str, Any]]) -> str:
        """Perform pyautogui calls (name, args, kwargs) in a worker thread, or only log them in dry-run mode."""
        if self._gui is None:
            raise EnvironmentFailure("the desktop environment is not started (call start() first)")
        if self.dry_run:
            calls = "; ".join(_describe_call(*step) for step in steps)
            # The log line leaves the text out: it may hold a secret's value (the outcome's is masked by the agent).
            logged = "; ".join(f"write(<{len(args[0])} characters>)" if name == "write"
                               else _describe_call(name, args, kwargs) for name, args, kwargs in steps)
            log.info("dry run: %s [%s]", detail, logged)
            return f"dry run, not performed: {detail} [{calls}]"
        stop = threading.Event()
        work = asyncio.ensure_future(asyncio.to_thread(self._run, list(steps), stop))
        try:
            await asyncio.shield(work)
        except asyncio.CancelledError:  # (a run stopped, timed out or cancelled): the thread would type on
            stop.set()
            await asyncio.wait([work])  # it stops at the next character, its keys and buttons let go
            if not work.cancelled():
                work.exception()  # (retrieved: _Stopped, or what failed meanwhile; the action was cancelled)
            raise
        return detail

    def _key_names(self, keys: str) -> list[str]:
        names = []
        for part in split_keys(keys):
            name = pyautogui_key(part, self._keys)
            if name is None:
                raise ActionFailed(
                    f"unknown key {part!r} in {keys!r}: {KEY_NAMES_HINT}"
                )
            names.append(name)
        return names

    def _check_typeable(self, text: str) -> None:
        if self._keyboard is not None:  # any character but control ones (X11)
            for char in text:
                keysym_of(char)
            return
        if self._keys is None:
            return
        missing = sorted({c for c in text if not self._keys.get(c)})
        if missing:
            raise ActionFailed(
                f"cannot type {''.join(missing)!r} on this desktop: "
                "pyautogui types only characters on the keyboard layout (ASCII)"
            )

    def _xy(self, point: Any) -> tuple[int, int]:
        """The pixel pyautogui acts at: inside the watched monitor or region (a model's x=1000 of 0..1000 is its
        right edge, one past its last pixel, which is the next monitor's), and never a fail-safe corner, so that
        the agent does not pull the brake that is the person's (a maximized window's close button there)."""
        if self._gui is None:
            raise EnvironmentFailure("the desktop environment is not started (call start() first)")
        area = self._area
        x = min(max(round(point.x), area["left"]), area["left"] + area["width"] - 1)
        y = min(max(round(point.y), area["top"]), area["top"] + area["height"] - 1)
        if self.failsafe and (x, y) in self._gui.FAILSAFE_POINTS:
            width, height = self._gui.size()
            x, y = min(max(x, 1), width - 2), min(max(y, 1), height - 2)
        return x, y

    async def _act_click(self, action: Click) -> str:
        x, y = self._xy(action.point)
        clicks = 2 if action.double else 1
        held = self._key_names("+".join(action.modifiers)) if action.modifiers else []
        detail = f"{''.join(m + '+' for m in action.modifiers)}{'double-' if action.double else ''}{action.button} click at ({x}, {y})"
        return await self._input(
            detail,
            *(("keyDown", (key,), {}) for key in held),
            ("click", (x, y), {"clicks": clicks, "button": action.button}),
            *(("keyUp", (key,), {}) for key in reversed(held)),
        )

    async def _act_hover(self, action: Hover) -> str:
        x, y = self._xy(action.point)
        return await self._input(f"hover at ({x}, {y})", ("moveTo", (x, y), {}))

    async def _act_type(self, action: TypeText) -> str:
        text = action.text.replace("\r\n", "\n")  # (a Windows line end is one Enter: '\r' and '\n' were one each)
        self._check_typeable(text)
        parts = [text]
        if self._keyboard is not None and not self.dry_run:  # (more characters on no key than the spare keys hold)
            parts = await asyncio.to_thread(self._keyboard.parts, text)
        first: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        xy = self._xy(action.point) if action.point is not None else None
        if xy is not None:
            first.append(("click", xy, {}))
        if action.clear:  # select-all (Control+/ in a Tk application: its Control+A goes to the line's start), Delete
            select_all = (_PRIMARY_MODIFIER, "a")
            if self._keyboard is not None and await asyncio.to_thread(self._keyboard.tk_takes_keys, xy):
                select_all = ("ctrl", "/")
            first += [("hotkey", select_all, {}), ("press", ("delete",), {})]
        where = f" into ({xy[0]}, {xy[1]})" if xy is not None else ""
        count = f"{len(text)} characters" + (f" in {len(parts)} parts" if len(parts) > 1 else "")
        detail = f"typed {count}{where}" + (" and pressed Enter" if action.submit else "")
        mark, done = None, detail
        for i, part in enumerate(parts):
            if i:  # the application reads the keys typed before their spare keycodes are mapped to other characters
                await settle_screen(self._digest, mark, self.settle_config)
            steps = [*(first if i == 0 else []), ("write", (part,), {})]
            if action.submit and i == len(parts) - 1:
                steps.append(("press", ("enter",), {}))
            if len(parts) > 1:
                mark = await self.mark()
            done = await self._input(detail, *steps)  # (a dry run's says what it would have done)
        return done

    async def _act_press(self, action: PressKeys) -> str:
        parts = split_keys(action.keys)
        char = parts[0] if len(parts) == 1 and len(parts[0]) == 1 else ""
        if self._keyboard is not None and char.strip() and char.isprintable() and not (char.isascii() and char.islower()):
            # A lone character ('<', '€', 'A') by the display's keymap, as typed: pyautogui added Shift to the <> key
            # of the pc105 keymap ('<' came out as '>'), knew no key for a character on none, and pressed 'a' for
            # 'A' (the browser's press of 'A' types 'A').
            self._check_typeable(char)
            return await self._input(f"pressed {action.keys}", ("write", (char,), {}))
        names = self._key_names(action.keys)
        return await self._input(f"pressed {action.keys}", ("hotkey", tuple(names), {}))

    async def _act_scroll(self, action: Scroll) -> str:
        clicks = action.amount if action.direction in ("up", "right") else -action.amount
        call = "scroll" if action.direction in ("up", "down") else "hscroll"
        xy = self._xy(action.point) if action.point is not None else (None, None)
        where = f"at ({xy[0]}, {xy[1]})" if action.point is not None else "at the mouse pointer"
        detail = f"scrolled {action.direction} {action.amount} notches {where}"
        return await self._input(detail, (call, (clicks, *xy), {}))

    async def _act_drag(self, action: Drag) -> str:
        start, end = self._xy(action.point), self._xy(action.to_point)
        return await self._input(
            f"dragged ({start[0]}, {start[1]}) → ({end[0]}, {end[1]})",
            ("moveTo", start, {}),
            ("dragTo", end, {"duration": self.drag_seconds, "button": "left"}),
        )
