"""Key names in a `press` action, as models write them.

The action's schema asks for Playwright's names ('Control+A', 'Enter',
'Shift+Tab'), but vision models write 'ctrl+a', 'enter', 'esc', 'cmd+k' or
'down' as often. Every environment takes both: the desktop maps them to
pyautogui's names (desktop.py), the browser to Playwright's (`playwright_keys`).
"""

from __future__ import annotations

import re
import sys

# Playwright's names for keys that are not one character, found whatever their case.
_NAMED = (
    "Backspace", "Tab", "Enter", "Escape", "Space", "PageUp", "PageDown", "End", "Home", "Insert", "Delete",
    "ArrowLeft", "ArrowUp", "ArrowRight", "ArrowDown", "Shift", "Control", "Alt", "Meta", "ControlOrMeta",
    "CapsLock", "NumLock", "ScrollLock", "Pause", "PrintScreen", "ContextMenu",
    *(f"F{n}" for n in range(1, 25)),
)
# Other names models use for them.
_ALIASES = {
    # 'cmd' is the Mac's Control for shortcuts (models trained on Mac screens write 'cmd+c' to copy): the platform's
    # primary modifier, Control here (Super on Linux and Windows does nothing of the kind)
    "ctrl": "Control", "cmd": "ControlOrMeta", "command": "ControlOrMeta",
    "super": "Meta", "win": "Meta", "windows": "Meta",
    "option": "Alt", "opt": "Alt", "return": "Enter", "esc": "Escape", "del": "Delete", "ins": "Insert",
    "up": "ArrowUp", "down": "ArrowDown", "left": "ArrowLeft", "right": "ArrowRight", "spacebar": "Space",
    "pgup": "PageUp", "pgdn": "PageDown", "plus": "+", "menu": "ContextMenu",
}
# X keysym names, as models trained on xdotool write them ('Page_Down', 'KP_Enter', 'Super_L', 'comma').
_KEYSYMS = {
    "page_up": "PageUp", "page_down": "PageDown", "prior": "PageUp", "next": "PageDown", "kp_enter": "Enter",
    "caps_lock": "CapsLock", "num_lock": "NumLock", "scroll_lock": "ScrollLock", "print": "PrintScreen",
    **{f"{key}_{side}": name for key, name in (("control", "Control"), ("shift", "Shift"), ("alt", "Alt"),
                                               ("super", "Meta"), ("meta", "Meta")) for side in "lr"},
    "comma": ",", "period": ".", "minus": "-", "equal": "=", "slash": "/", "backslash": "\\", "semicolon": ";",
    "apostrophe": "'", "grave": "`", "bracketleft": "[", "bracketright": "]",
}


def _folded(name: str) -> str:
    """A key name as looked up: lower case, without the spaces, '_' and '-' between its words ('Page Down',
    'page_down', 'page-down' and 'PageDown' are one key)."""
    return re.sub(r"(?<=[a-z0-9])[\s_-]+(?=[a-z0-9])", "", name.lower())


_BY_LOWER = {_folded(name): value for name, value in
             ({name: name for name in _NAMED} | _ALIASES | _KEYSYMS).items()}
_MODIFIERS = frozenset({"Control", "Shift", "Alt", "Meta", "ControlOrMeta"})

KEY_NAMES_HINT = (
    "use key names such as Enter, Tab, Escape, Backspace, Delete, ArrowUp, PageDown, Home, F5 or single characters, "
    "joined with '+' (e.g. 'Control+A'), one key or combination a press"
)


def split_keys(keys: str) -> list[str]:
    """'Control+Shift+A' → ['Control', 'Shift', 'A']; 'Control++' → ['Control', '+']. Modifiers joined by spaces
    or '-' as models write them too ('ctrl c', 'Ctrl-C', 'ctrl + c', 'control-shift-t'); 'Page Down' is one key."""
    parts = [part.strip() or part for part in re.split(r"\+(?=.)", keys.strip()) if part] or [keys]
    if len(parts) == 1 and len(parts[0]) > 1 and _folded(parts[0]) not in _BY_LOWER:
        pieces = re.split(r"\s+|-(?=.)", parts[0])
        if len(pieces) > 1 and all(_BY_LOWER.get(_folded(p), p) in _MODIFIERS for p in pieces[:-1]):
            return pieces
    return parts


def key_name(part: str) -> str:
    """One key in Playwright's name: 'esc' → 'Escape', 'Page_Down' → 'PageDown', 'comma' → ','. A character
    stays as written, and so does a name it does not know (each environment refuses those it cannot press)."""
    if part == " ":
        return "Space"
    return part if len(part) == 1 else _BY_LOWER.get(_folded(part), part)


def playwright_keys(keys: str) -> str:
    """`keys` in Playwright's names: 'ctrl+a' → 'Control+a', 'esc' → 'Escape', 'cmd+shift+k' →
    'ControlOrMeta+Shift+k'. Characters stay as written; a name it does not know is left for Playwright to refuse."""
    if keys == " ":
        return "Space"
    return "+".join(key_name(part) for part in split_keys(keys))


# The browser's own shortcuts: Chromium acts on them before the page sees them, but keys sent through the DevTools
# protocol reach only the page, so surfer does what the browser would (or says it cannot). Written with modifiers
# in `_MODIFIER_ORDER`, letters in lower case (as `browser_shortcut` looks them up).
BROWSER_SHORTCUTS = {
    "F5": "refresh", "Control+r": "refresh", "Shift+F5": "refresh", "Control+F5": "refresh", "Control+Shift+r": "refresh",
    "Meta+r": "refresh", "Alt+ArrowLeft": "back", "Meta+[": "back", "Alt+ArrowRight": "forward", "Meta+]": "forward",
    "Control+w": "close_tab", "Control+F4": "close_tab", "Meta+w": "close_tab",
    "Control+Tab": "next_tab", "Control+PageDown": "next_tab",
    "Control+Shift+Tab": "previous_tab", "Control+PageUp": "previous_tab",
    "Control+l": "address bar", "Alt+d": "address bar", "F6": "address bar", "Meta+l": "address bar",
    "Control+t": "new tab", "Meta+t": "new tab", "Control+n": "new window", "Meta+n": "new window",
}
_MODIFIER_ORDER = ("Control", "Alt", "Shift", "Meta")


def browser_shortcut(keys: str) -> str | None:
    """What `keys` (Playwright's names) asks of the browser rather than the page, from BROWSER_SHORTCUTS; else None."""
    parts = split_keys(keys)
    primary = "Meta" if sys.platform == "darwin" else "Control"  # what Playwright presses for ControlOrMeta
    held = sorted({primary if p == "ControlOrMeta" else p for p in parts[:-1]}, key=lambda p: _MODIFIER_ORDER.index(p) if p in _MODIFIER_ORDER else 9)
    last = parts[-1].lower() if len(parts[-1]) == 1 else parts[-1]
    return BROWSER_SHORTCUTS.get("+".join([*held, last]))
