"""Which X display and monitor the desktop environment watches, and whether it is there.

pyautogui reads DISPLAY once, when it is first imported, so a process drives
one X display: `_load_pyautogui` binds it on first use and refuses another
later. `check_display` is the refusal before anything runs (no display, one
that does not answer, no such monitor), for `surfer run` and `surfer qa`.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from surfer.core.errors import ConfigError

EXTRA_HINT = "the desktop environment needs pyautogui and mss: pip install 'surfer-agent[desktop]'"
DISPLAY_HINT = (
    "start a virtual one with `Xvfb :99 -screen 0 1280x800x24 & export DISPLAY=:99` "
    "(or run surfer under `xvfb-run -s '-screen 0 1280x800x24'`), or pass display=':N' (surfer run --display :N)"
)


def _linux() -> bool:
    return sys.platform.startswith("linux")


def _display_name(display: str) -> str:
    """':99.0' and ':99' are the same display."""
    return re.sub(r"\.0$", "", display.strip())


def _load_pyautogui(display: str | None) -> Any:
    """Import pyautogui bound to `display` (it reads DISPLAY at import time).
    The process environment is left as it was."""
    loaded = sys.modules.get("pyautogui")
    if loaded is None:
        saved = os.environ.get("DISPLAY")
        if display:
            os.environ["DISPLAY"] = display
        try:
            import pyautogui as loaded
        except ImportError as exc:
            raise ConfigError(f"{EXTRA_HINT} ({exc})") from None
        finally:
            if saved is None:
                os.environ.pop("DISPLAY", None)
            else:
                os.environ["DISPLAY"] = saved
    if _linux() and display:
        bound = loaded.platformModule._display.get_display_name()
        if _display_name(bound) != _display_name(display):
            raise ConfigError(
                f"pyautogui in this process already drives display {bound} (it reads DISPLAY once, at import); "
                f"cannot switch to {display}: use one desktop display per process"
            )
    return loaded


def _display_answers(display: str | None) -> bool:
    """Whether an X server answers at `display` now (a fresh connection, closed at once)."""
    try:
        import mss

        mss.MSS(display=display).close() if _linux() else mss.MSS().close()
    except Exception:  # noqa: BLE001 - whatever the connection raises, it did not answer
        return False
    return True


def _open_screen(display: str | None) -> Any:
    try:
        import mss
    except ImportError as exc:
        raise ConfigError(f"{EXTRA_HINT} ({exc})") from None
    try:
        return mss.MSS(display=display) if _linux() else mss.MSS()
    except mss.ScreenShotError as exc:
        if _linux() and _x_answers(display):  # a screen mss cannot grab: of 8 or 16 bits (`Xvfb -screen 0 WxHx16`)
            raise ConfigError(
                f"cannot take screenshots of the X display {display}: {exc}; start it with a 24-bit screen "
                "(`Xvfb :99 -screen 0 1280x800x24`, `xvfb-run -s '-screen 0 1280x800x24'`)"
            ) from None
        raise ConfigError(f"cannot reach the X server at DISPLAY={display} ({exc}); {DISPLAY_HINT}") from None


def _x_answers(display: str | None) -> bool:
    """Whether an X server accepts a connection at `display` (Xlib's, which takes any screen mss refuses)."""
    try:
        from Xlib import display as xdisplay

        xdisplay.Display(display).close()
    except Exception:  # noqa: BLE001 - whatever the connection raises, it did not answer
        return False
    return True


def resolve_display(display: str | None) -> str | None:
    """The X display a desktop environment drives: `display`, else $DISPLAY (None off Linux); ConfigError if none."""
    if not _linux():
        return None
    display = display or os.environ.get("DISPLAY")
    if not display:
        raise ConfigError(f"no display: DISPLAY is not set. The desktop environment needs an X server; {DISPLAY_HINT}")
    return display


def check_display(display: str | None = None, monitor: int | None = None) -> None:
    """Refuse (ConfigError) before anything runs when the desktop has no display, its X server does not answer,
    or it has no monitor `monitor`."""
    import importlib.util

    missing = [name for name in ("mss", "pyautogui") if importlib.util.find_spec(name) is None]  # (pyautogui is
    if missing:  # not imported: it reads DISPLAY when it is)
        raise ConfigError(f"{EXTRA_HINT} ({', '.join(missing)} missing)")
    screen = _open_screen(resolve_display(display))
    try:
        if monitor is not None:
            pick_monitor(screen.monitors, monitor)
    finally:
        screen.close()


def pick_monitor(monitors: list[dict[str, int]], monitor: int) -> dict[str, int]:
    """The area of mss monitor number `monitor` (0: all together); ConfigError naming those there are."""
    if not 0 <= monitor < len(monitors):
        found = ", ".join(f"{i}: {m['width']}x{m['height']}+{m['left']}+{m['top']}" for i, m in enumerate(monitors))
        raise ConfigError(f"there is no monitor {monitor}; monitors are {found} (0 = all together)")
    return {key: monitors[monitor][key] for key in ("left", "top", "width", "height")}
