"""Typing text: one `insertText` where the page cannot tell, per-key events
where it listens to keys.

Per-key typing sends keydown / keypress / input / keyup for every character
(~3 DevTools commands each, through Playwright's driver): for "value 0" some
5 ms of Chromium's CPU and 20 driver commands, against one check and one
command for an insert. An insert fires `beforeinput` and `input` like typing does, but no
key events, so it is used only when nothing on the page listens to keys:
`KEY_LISTENERS` (an init script in every frame) notes any keydown / keyup /
keypress listener or handler the page adds, and `MAY_INSERT` allows an insert
only into a focused text field of the main frame (not one inside an iframe, not
one with a datalist or an open surfer popup, whose key handling
widgets.js owns) when no such listener exists. Otherwise the caller types
key by key. It also says when nothing that takes text has the focus, so the
step can tell the model its text went into no field. (It runs after
widgets.js, whose own key handling does not count.)
"""

from __future__ import annotations

KEY_LISTENERS = """
(() => {
  if (window.__surferKeys) return;
  const state = window.__surferKeys = { listening: false };
  const KEYS = new Set(['keydown', 'keyup', 'keypress']);
  const add = EventTarget.prototype.addEventListener;
  EventTarget.prototype.addEventListener = function (type, listener, options) {
    if (KEYS.has(type) && listener) state.listening = true;
    return add.call(this, type, listener, options);
  };
  for (const proto of [HTMLElement.prototype, Document.prototype, Window.prototype, SVGElement.prototype]) {
    for (const name of ['onkeydown', 'onkeyup', 'onkeypress']) {
      const d = Object.getOwnPropertyDescriptor(proto, name);
      if (!d || !d.set) continue;
      Object.defineProperty(proto, name, { ...d, set(value) { if (value) state.listening = true; d.set.call(this, value); } });
    }
  }
})();
"""

# 'insert' when `text` may go in as one insert (Input.insertText: `beforeinput` and
# `input` as from an input method, no key events), 'keys' when the caller must
# type it key by key, 'nowhere' when nothing that takes text has the focus (the
# page's body, a link or a button: the keys reach the page, no field; the caller
# types key by key and says so). With `clear` an insert also selects the field's content,
# which the insert then replaces (what Ctrl+A, Delete and typing do, without keys).
# A date, time, month or week field is typed into part by part (month, day, year),
# starting at the part the click landed on: text in the field's value format
# (2024-05-10, 14:30) is 'set' as its value, the way a click in its picker sets it;
# other text ('segments') is typed key by key from the field's first part.
MAY_INSERT = r"""
({ text, clear }) => {
  let focused = document.activeElement;
  while (focused && focused.shadowRoot && focused.shadowRoot.activeElement) focused = focused.shadowRoot.activeElement;
  // (a widget of the page's own that holds the focus, a combobox with a tabindex, takes its keys: not 'nowhere')
  const noField = !focused || (!focused.isContentEditable &&
    (focused === document.body || focused === document.documentElement || /^(A|BUTTON|SUMMARY|IMG)$/.test(focused.tagName)));
  if (noField && document.designMode !== 'on') return 'nowhere';
  // the field and its text now, for TYPED_IN to tell afterwards what the field did with the text
  window.__surferTyping = focused instanceof HTMLTextAreaElement || (focused instanceof HTMLInputElement &&
    ['text', 'search', 'email', 'url', 'tel', 'number'].includes(focused.type)) ? { el: focused, before: focused.value } : null;
  if (focused instanceof HTMLInputElement && ['date', 'datetime-local', 'month', 'week', 'time'].includes(focused.type) &&
      !focused.readOnly && !focused.disabled) {
    const before = focused.value, wanted = text.trim();
    if (wanted && !(window.__surferWidgets && window.__surferWidgets.open)) {
      focused.value = wanted;
      if (focused.value) {  // a value the field takes (2024-05-10, 14:30): set, as its picker sets it
        if (focused.value !== before) {
          focused.dispatchEvent(new Event('input', { bubbles: true, composed: true }));
          focused.dispatchEvent(new Event('change', { bubbles: true }));
        }
        return 'set';
      }
      focused.value = before;
    }
    return 'segments';  // typed as the field shows it (05/10/2024): from its first part, wherever the click put the caret
  }
  if (/[\n\r\t]/.test(text)) return 'keys';  // Enter and Tab are keys: they submit forms and move focus
  const keys = window.__surferKeys;
  if (!keys || keys.listening || document.querySelector('[onkeydown],[onkeyup],[onkeypress]')) return 'keys';
  let el = document.activeElement;
  if (!el || el.shadowRoot || el.tagName === 'IFRAME' || el.tagName === 'FRAME') return 'keys';
  if (window.__surferWidgets && window.__surferWidgets.open) return 'keys';
  const textual = el instanceof HTMLTextAreaElement || (el instanceof HTMLInputElement && !el.list &&
    ['text', 'search', 'email', 'url', 'tel', 'password', 'number', ''].includes(el.type));
  if (!textual && !el.isContentEditable) return 'keys';
  if (el.disabled || el.readOnly) return 'keys';
  // more than the field keeps: key by key, as typed, so a page that moves the focus on when a field is full (code
  // boxes of one digit each) gets the rest in the next field
  if (el.maxLength >= 0 && (clear ? 0 : el.value.length) + text.length > el.maxLength) return 'keys';
  if (clear) {
    try {
      if (el.isContentEditable) getSelection().selectAllChildren(el); else el.select();
    } catch (e) { return 'keys'; }
  }
  return 'insert';
}
"""

# After typing into a text field (MAY_INSERT noted it and its text): '' when the text went in, else why not, in
# words for the step's outcome — the field is read-only, kept only `maxlength` characters, or holds other text than
# typed (a mask, a number field that drops letters). Lengths only, never the text: it may be a secret, partly kept.
# (Told while the field keeps the focus: a page that moves it on, code boxes passing each digit to the next, is
# not second-guessed.)
TYPED_IN = r"""
({ text, clear }) => {
  const typing = window.__surferTyping;
  window.__surferTyping = null;
  // (not when the focus moved on: code boxes that pass each digit to the next; nor for Tab or Enter, keys not text)
  let focused = document.activeElement;
  while (focused && focused.shadowRoot && focused.shadowRoot.activeElement) focused = focused.shadowRoot.activeElement;
  if (!typing || focused !== typing.el || /[\t\r]/.test(text) || (/\n/.test(text) && !(focused instanceof HTMLTextAreaElement)))
    return '';
  const el = typing.el, value = el.value;
  // (in capitals, as a code field writes it, or without the spaces around it, as an email field keeps it: kept)
  if (value.toLowerCase().includes(text.trim().toLowerCase())) return '';
  if (value === typing.before)
    return el.readOnly ? 'the field is read-only: its text did not change' : 'the field took none of it: its text did not change';
  if (el.maxLength >= 0 && value.length >= el.maxLength && el.maxLength < (clear ? 0 : typing.before.length) + text.length)
    return `the field takes at most ${el.maxLength} characters: not all of the ${text.length} typed went in`;
  return `the field changed what was typed: it holds ${value.length} characters (${text.length} typed)`;
}
"""

# Whether the focus moves within `ms` (a click on a search button whose field appears and takes the focus
# a moment later): checked when the click before typing left no field focused, so the text goes where the
# page puts the focus rather than, key by key, partly into the page and partly into the field.
FOCUS_MOVES = r"""
(ms) => new Promise((done) => {
  const was = document.activeElement, start = performance.now();
  const look = () => document.activeElement !== was ? done(true) : performance.now() - start >= ms ? done(false) : setTimeout(look, 10);
  look();
})
"""

# A caret that does not blink (CSS `caret-animation: manual`, Chromium >= 139):
# a blinking caret repaints its page twice a second, ~5 ms of Chromium's CPU
# per second per session with a focused field, all the while the model thinks
# (measured here; 0 without the blink). The caret stays drawn, so screenshots
# show where the focus is, the same every time. An adopted style sheet adds no
# node to the page; a page that replaces `document.adoptedStyleSheets` gets
# its blink back, nothing else.
STILL_CARET = """
(() => {
  try {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync('* { caret-animation: manual !important; }');
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
  } catch (e) { /* an older Chromium: the caret blinks */ }
})();
"""

# The frame's origin when its document has the focus (else null), with where the focused field's form may send
# it: its action's origin and its submit buttons' formaction's.
FOCUSED_HERE = """() => {
  if (!document.hasFocus()) return null;
  const form = document.activeElement && document.activeElement.form, sends = [];
  const originOf = (url) => { try { return new URL(url || document.baseURI, document.baseURI).origin; } catch (e) { return ''; } };
  if (form) {
    sends.push(originOf(form.getAttribute('action')));
    for (const c of Array.from(form.elements || [])) {
      const type = (c.getAttribute('type') || '').toLowerCase();
      const submits = (c.tagName === 'BUTTON' && !['button', 'reset'].includes(type)) || (c.tagName === 'INPUT' && ['submit', 'image'].includes(type));
      if (submits && c.hasAttribute('formaction') && sends.length < 10) sends.push(originOf(c.getAttribute('formaction')));
    }
  }
  return {origin: location.origin, sends: [...new Set(sends)]};
}"""


# A field that took a secret draws it as dots, as a password field does (screenshots are pixels: they go to the
# model server and into the run's records). The focused element of the focused document; a password field
# already does.
HIDE_TYPED = """() => {
  const el = document.hasFocus() ? document.activeElement : null;
  if (!el || el === document.body || el.tagName === 'IFRAME' || (el.getAttribute('type') || '').toLowerCase() === 'password') return false;
  el.style.setProperty('-webkit-text-security', 'disc', 'important');
  return true;
}"""


async def hide_typed(page: object) -> None:
    """Make the focused field (in whichever frame has the focus) draw its text as dots."""
    for frame in getattr(page, "frames", []):
        try:
            await frame.evaluate(HIDE_TYPED)
        except Exception:  # noqa: BLE001 - a frame detached or navigating meanwhile
            continue


async def focused_origin(page: object) -> str | None:
    """The origin of the frame whose document has the focus — where keys typed now go (the deepest frame that
    says it has it: a focused iframe's ancestors say so too); the main frame's when no frame says so. None when
    nothing could be read (the page is gone)."""
    return (await focused_target(page))[0]


async def focused_target(page: object) -> tuple[str | None, list[str]]:
    """`focused_origin`, and the origins the focused field's form may send it to (its action's, its submit buttons'
    `formaction`'s; empty: no form)."""
    focused, sends, depth = None, [], -1
    for frame in getattr(page, "frames", []):
        try:
            here = await frame.evaluate(FOCUSED_HERE)
        except Exception:  # noqa: BLE001 - a frame detached or navigating meanwhile: it holds no focus to type into
            continue
        level, parent = 0, frame.parent_frame
        while parent is not None:
            level, parent = level + 1, parent.parent_frame
        if isinstance(here, dict) and level > depth:
            focused, sends, depth = here.get("origin"), [str(o) for o in here.get("sends") or []], level
    if focused is None:
        try:
            focused = await page.main_frame.evaluate("location.origin")  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001
            return None, []
    return focused, sends
