"""Typing text on an X display, character by character, by keysym.

pyautogui types a character by the keycode of its keysym and presses Shift
when the character is one that needs Shift on a US keyboard: on the usual
pc105 keymap (Xvfb's too) '<' is the first level of the <> key, so Shift made
it '>'; and it cannot type a character that is on no key (é, ß, €, 日本).
Here each character's keycode and level come from the X server's own keymap
(level 1: with Shift), and a character on no key is given a spare keycode
(one with no keysym) mapped to it for as long as the display is driven, as
xdotool does; `release()` gives the spare keycodes back.
"""

from __future__ import annotations

from typing import Any

from surfer.core.errors import ActionFailed

# Keysyms of the characters that are keys rather than text.
CONTROL_KEYSYMS = {"\n": 0xFF0D, "\r": 0xFF0D, "\t": 0xFF09}  # Return, Tab


def keysym_of(char: str) -> int:
    """The X keysym that types `char` (Latin-1 keysyms are their code points; others are 0x1000000 + it)."""
    if char in CONTROL_KEYSYMS:
        return CONTROL_KEYSYMS[char]
    code = ord(char)
    if code < 0x20 or 0x7F <= code < 0xA0:
        raise ActionFailed(f"cannot type the control character {char!r}: press keys for it instead")
    return code if code < 0x100 else 0x1000000 + code


class X11Keyboard:
    """Types text through XTest on one Xlib display connection (pyautogui's)."""

    def __init__(self, display: Any) -> None:
        self.display = display
        self._shift: int | None = None
        self._mapped: dict[int, int] = {}  # keysym -> the spare keycode mapped to it
        self._spare: list[int] | None = None

    def _keycode(self, keysym: int) -> tuple[int, bool]:
        """(keycode, with Shift) for a keysym: the keymap's plain level first, then its Shift level."""
        if keysym in self._mapped:
            return self._mapped[keysym], False
        for keycode, index in sorted(self.display.keysym_to_keycodes(keysym), key=lambda pair: (pair[1], pair[0])):
            if index in (0, 1):
                return keycode, index == 1
        return self._map_spare(keysym), False

    def _map_spare(self, keysym: int) -> int:
        if self._spare is None:
            first = self.display.display.info.min_keycode
            count = self.display.display.info.max_keycode - first + 1
            mapping = self.display.get_keyboard_mapping(first, count)
            self._spare = [first + i for i, syms in enumerate(mapping) if not any(syms)]
        if not self._spare:
            raise ActionFailed("cannot type this text: the X keymap has no spare key left for its characters")
        keycode = self._spare.pop()
        self.display.change_keyboard_mapping(keycode, [(keysym, keysym)])
        self.display.sync()
        self._mapped[keysym] = keycode
        return keycode

    def plan(self, text: str) -> list[tuple[int, bool]]:
        """(keycode, with Shift) for every character, spare keys mapped; ActionFailed before anything is typed."""
        return [self._keycode(keysym_of(char)) for char in text]

    def shift(self) -> int:
        if self._shift is None:
            self._shift = self.display.keysym_to_keycode(0xFFE1)  # Shift_L
        return self._shift

    def press(self, keycode: int, shift: bool) -> None:
        """One character: Shift held around the key when its level needs it, released whatever happens."""
        from Xlib import X
        from Xlib.ext.xtest import fake_input

        if shift:
            fake_input(self.display, X.KeyPress, self.shift())
        try:
            fake_input(self.display, X.KeyPress, keycode)
            fake_input(self.display, X.KeyRelease, keycode)
        finally:
            if shift:
                fake_input(self.display, X.KeyRelease, self.shift())
            self.display.sync()

    def release(self) -> None:
        """Give the spare keycodes back (their keysyms cleared)."""
        mapped, self._mapped = self._mapped, {}
        for keycode in mapped.values():
            self.display.change_keyboard_mapping(keycode, [(0, 0)])
        if mapped:
            self.display.sync()
