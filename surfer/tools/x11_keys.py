"""Typing text on an X display, character by character, by keysym.

pyautogui types a character by the keycode of its keysym and presses Shift
when the character is one that needs Shift on a US keyboard: on the usual
pc105 keymap (Xvfb's too) '<' is the first level of the <> key, so Shift made
it '>'; and it cannot type a character that is on no key (é, ß, €, 日本).
Here each character's keycode and level come from the X server's own keymap
(level 1: with Shift), and a character on no key is given a spare keycode
(one with no keysym; two characters each, plain and with Shift) mapped to it
for as long as the display is driven, as xdotool does; a later text that
needs room takes back the keycodes of earlier ones, and `release()` gives
them all back. The keycodes in use are listed in a property of the root
window with a window of their user's (`_SURFER_SPARE_KEYS`): those of a
process that ended without giving them back (killed, or its environment never
closed) are taken as spare again, where they stayed mapped for as long as the
X server ran. A text with more such characters than the spare keycodes
hold (38 on Xvfb) is typed in `parts` of half as many, so that a part's keys
are not mapped to other characters before the one after the next (the caller
lets the application read each part's keys before it types the next).
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
        self._spare: list[int] | None = None  # keycodes with no keysym, not mapped by us yet
        self._codes: dict[int, list[int]] = {}  # a spare keycode we mapped -> its keysyms (plain, with Shift; 0 free)
        self._owner: Any = None  # the window that says in _SURFER_SPARE_KEYS which keycodes are ours
        self._last: set[int] = set()  # the keysyms of the last text planned (its keys may not all be read yet)

    def _on_keymap(self, keysym: int) -> tuple[int, bool] | None:
        spare = self._spare_codes()  # (a keycode left mapped by a process gone is spare, not on the keymap)
        for keycode, index in sorted(self.display.keysym_to_keycodes(keysym), key=lambda pair: (pair[1], pair[0])):
            if index in (0, 1) and keycode not in self._codes and keycode not in spare:
                return keycode, index == 1
        return None

    def _mapped(self, keysym: int) -> tuple[int, bool] | None:
        return next(((code, level == 1) for code, syms in self._codes.items()
                     for level, sym in enumerate(syms) if sym == keysym), None)

    def plan(self, text: str) -> list[tuple[int, bool]]:
        """(keycode, with Shift) for every character: its key and level on the keymap (level 1: with Shift), or a
        spare keycode mapped to it (two characters a keycode, plain and with Shift). Spare keycodes mapped for
        earlier texts are taken back when this one needs room. ActionFailed before anything is typed."""
        keysyms = [keysym_of(char) for char in text]
        missing = list(dict.fromkeys(k for k in keysyms if self._on_keymap(k) is None and self._mapped(k) is None))
        if missing:
            self._make_room(set(keysyms), len(missing))
            for keysym in missing:
                self._map(keysym)
        self._last = set(keysyms)
        return [self._on_keymap(k) or self._mapped(k) for k in keysyms]  # type: ignore[misc]

    def parts(self, text: str) -> list[str]:
        """`text` cut into parts whose characters on no key fit the spare keycodes (each part is `plan`ned and
        typed in turn); one part, `text`, when they all fit (or there is no spare keycode: `plan` says so)."""
        room = 2 * (len(self._spare_codes()) + len(self._codes))
        if not room or len({k for k in map(keysym_of, text) if self._on_keymap(k) is None}) <= room:
            return [text]
        room //= 2  # two parts in a row fit together: the application may not have read all of one's keys yet
        parts, start, missing = [], 0, set()
        for i, char in enumerate(text):
            keysym = keysym_of(char)
            if keysym in missing or self._on_keymap(keysym) is not None:
                continue
            if len(missing) == room:
                parts.append(text[start:i])
                start, missing = i, set()
            missing.add(keysym)
        return [*parts, text[start:]]

    def _spare_codes(self) -> list[int]:
        if self._spare is None:
            first = self.display.display.info.min_keycode
            mapping = self.display.get_keyboard_mapping(first, self.display.display.info.max_keycode - first + 1)
            empty = [first + i for i, syms in enumerate(mapping) if not any(syms)]
            self._spare = [*(code for code in self._left_behind() if code not in empty), *empty]
        return self._spare

    def _left_behind(self) -> list[int]:
        """The keycodes `_SURFER_SPARE_KEYS` lists (pairs: keycode, its user's window) for users whose window is
        gone (the X server destroys a client's windows when its connection ends): cleared, and dropped from it."""
        from Xlib import X, Xatom

        root = self.display.screen().root
        atom = self.display.intern_atom("_SURFER_SPARE_KEYS")
        found = root.get_full_property(atom, Xatom.INTEGER)
        pairs = list(zip(found.value[::2], found.value[1::2])) if found is not None and found.format == 32 else []
        dead = set()
        for owner in {owner for _, owner in pairs}:
            try:
                self.display.create_resource_object("window", owner).get_geometry()
            except Exception:  # noqa: BLE001 - BadDrawable: its user ended
                dead.add(owner)
        left = [code for code, owner in pairs if owner in dead]
        for code in left:  # cleared: spare again, as they were before
            self.display.change_keyboard_mapping(code, [(0, 0)])
        if dead:
            root.change_property(atom, Xatom.INTEGER, 32, [v for code, owner in pairs if owner not in dead
                                                          for v in (code, owner)], X.PropModeReplace)
            self.display.sync()
        return left

    def _lease(self, code: int | None) -> None:
        """List `code` as this connection's in `_SURFER_SPARE_KEYS` (None: drop all of this connection's)."""
        from Xlib import X, Xatom

        root = self.display.screen().root
        if self._owner is None:
            if code is None:
                return
            self._owner = root.create_window(0, 0, 1, 1, 0, 0, window_class=X.InputOnly, visual=X.CopyFromParent)
        atom, owner = self.display.intern_atom("_SURFER_SPARE_KEYS"), self._owner.id
        found = root.get_full_property(atom, Xatom.INTEGER)
        values = list(found.value) if found is not None and found.format == 32 else []
        pairs = [(c, o) for c, o in zip(values[::2], values[1::2]) if o != owner or (code is not None and c != code)]
        if code is not None:
            pairs.append((code, owner))
        root.change_property(atom, Xatom.INTEGER, 32, [v for pair in pairs for v in pair], X.PropModeReplace)
        if code is None:
            self._owner.destroy()
            self._owner = None

    def _free_slots(self) -> int:
        assert self._spare is not None
        return 2 * len(self._spare) + sum(syms.count(0) for syms in self._codes.values())

    def _make_room(self, needed: set[int], count: int) -> None:
        self._spare_codes()
        for keep in (needed | self._last, needed):  # earlier texts' characters give way, the last one's last
            if self._free_slots() >= count:
                break
            for code, syms in list(self._codes.items()):
                self._codes[code] = [sym if sym in keep else 0 for sym in syms]
        if self._free_slots() < count:
            raise ActionFailed(
                f"cannot type this text: {count} of its characters are on no key, and the X keymap has room for "
                f"{self._free_slots()}" + ("; type it in parts" if self._free_slots() else "")
            )

    def _map(self, keysym: int) -> None:
        assert self._spare is not None
        code = next((c for c, syms in self._codes.items() if 0 in syms), None)
        if code is None:
            code = self._spare.pop()
            self._codes[code] = [0, 0]
            self._lease(code)
        syms = self._codes[code]
        syms[syms.index(0)] = keysym
        plain, shifted = syms
        # A lone keysym would be read as a case pair (Xlib: 'Ü' alone is 'ü', and 'Ü' with Shift): both levels set.
        self.display.change_keyboard_mapping(code, [(plain or shifted, shifted or plain)])
        self.display.sync()

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

    def tk_takes_keys(self, point: tuple[int, int] | None) -> bool:
        """Whether keys sent now go to a Tk application, whose Control+A on X11 is Emacs' line start rather than
        select-all (Control+/ is its select-all): the window at `point` (a click there comes first) or, without
        one, the focused window (the one under the pointer when the focus follows it), or a window it is in,
        belongs to the X client of an application Tk lists in the root window's InterpRegistry property. False
        when it cannot tell (the display gone: the input after says so)."""
        try:
            return self._tk_takes_keys(point)
        except Exception:  # noqa: BLE001 - Xlib's errors, ConnectionClosedError
            return False

    def _tk_takes_keys(self, point: tuple[int, int] | None) -> bool:
        from Xlib import X, Xatom

        display = self.display
        root = display.screen().root
        registry = root.get_full_property(display.intern_atom("InterpRegistry"), Xatom.STRING)
        if registry is None:  # (no Tk application on this display)
            return False
        mask = display.display.info.resource_id_mask
        tk_clients = {}
        for entry in bytes(registry.value).split(b"\0"):  # 'commwindow-hex appname'
            try:
                comm = int(entry.split(b" ", 1)[0], 16)
            except ValueError:
                continue
            tk_clients[comm & ~mask] = comm
        windows = []
        focus = display.get_input_focus().focus if point is None else None
        if focus is not None and not isinstance(focus, int) and focus != root:
            windows.append(focus.id)
        else:
            if point is None:
                pointer = root.query_pointer()
                point = (pointer.root_x, pointer.root_y)
            window = root
            while True:  # down the windows at the point, the WM's frame to the application's innermost
                child = window.translate_coords(root, *point).child
                if not child:
                    break
                windows.append(child.id)
                window = child
        for client in {w & ~mask for w in windows} & set(tk_clients):
            comm = display.create_resource_object("window", tk_clients[client])
            try:  # (a registry entry outlives a Tk application that crashed: its window is gone)
                if comm.get_full_property(display.intern_atom("TK_APPLICATION"), X.AnyPropertyType) is not None:
                    return True
            except Exception:  # noqa: BLE001 - BadWindow
                continue
        return False

    def release(self) -> None:
        """Give the spare keycodes back (their keysyms cleared)."""
        codes, self._codes = self._codes, {}
        for code in codes:
            self.display.change_keyboard_mapping(code, [(0, 0)])
        self._lease(None)
        self.display.sync()
