"""What a person does in the browser while they hold the controls, read from
the page's own events (tools/person.py says what a watch gives back).

A script in the tab the agent was using (an init script, so it stays through
navigations, and run at once in the page as it stands) reports every
pointer-down, input, named key press (Enter, Tab, Escape, arrows, a chord
such as Control+A) and wheel turn, with viewport (CSS px) coordinates and
the element under it, to a binding; main-frame navigations come from
Playwright. They become surfer actions:

    pointer-down            click at the point, on the element (a second one there: a double-click); released
                            `DRAG_PX` or more away: drag from there to where it was released
    input events in a field type(final text) into that field, one action per field; a secret field
                            (password, one-time code, card number) is recorded as REDACTED; a list: the text
                            of the option(s) chosen, as shown; a checkbox, radio, slider or file field: none
                            (the click or drag on it is the action)
    named key / chord       press
    wheel                   scroll (consecutive turns one way join)
    navigation              where the action just before led, else goto(url) (an address typed, back); an
                            action that ended after leading somewhere is not given a later navigation

An action ends when nothing more comes for `QUIET` seconds (its screen after
is taken then) or when the next one begins. The page's events and the
browser's navigations come on two channels, and under load a key press can
arrive after the navigation it caused: each page event carries the page's
clock, and a navigation waits (up to `QUIET`) for the page's events stamped
before it arrived. Only the main frame is read, in
the tab that was current when the person took over; a person who closes the
tab they are in is recorded `close_tab`, and one who goes on in another tab
(Ctrl+T) as an action not read, with the screens before and after.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any

from surfer.core.actions import Click, CloseTab, CssPoint, Drag, Goto, PressKeys, Scroll, TypeText
from surfer.tools.person import REDACTED, PersonAction, PersonWatch

log = logging.getLogger(__name__)

QUIET = 0.4  # seconds without a new event that end an action
HELD = 30.0  # ... while a mouse button is held (a drag in progress): the most it waits for the release
DIALOG_PROBE = 1.0  # at the hand-back, while a dialog is held: how long the page may take to show it runs again
DRAG_PX = 8  # a button released this far (CSS px) from where it was pressed: a drag, not a click
LED_TO = 2.0  # a navigation this soon after a click or key press is where that action led
BINDING = "__surfer_person"
BUTTONS = {0: "left", 1: "middle", 2: "right"}

SCRIPT = r"""(() => {
  if (window !== window.top || window.__surferPersonWatch) return;
  window.__surferPersonWatch = true;
  const report = (event) => {
    const send = window.__surfer_person;
    if (typeof send === 'function') Promise.resolve(send({...event, t: Date.now()})).catch(() => {});
  };
  const SECRET = /password|one-time-code|otp|cc-number|cc-csc|card/i;
  const secret = (el) => !!el && el.nodeType === 1 && ((el.type || '').toLowerCase() === 'password'
      || SECRET.test(el.getAttribute('autocomplete') || '') || SECRET.test(el.getAttribute('name') || ''));
  const editable = (el) => !!el && el.nodeType === 1 && (el.isContentEditable || /^(input|textarea|select)$/i.test(el.tagName));
  const describe = (el) => {
    if (!el || el.nodeType !== 1) return null;
    const label = (el.labels && el.labels[0] && el.labels[0].innerText) || el.getAttribute('aria-label')
      || el.getAttribute('placeholder') || el.getAttribute('title') || el.getAttribute('alt')
      || (editable(el) ? el.getAttribute('name') : el.innerText) || '';
    const box = el.getBoundingClientRect();
    return {tag: el.tagName.toLowerCase(), role: el.getAttribute('role') || '', name: String(label).trim().replace(/\s+/g, ' ').slice(0, 80),
            id: el.id || '', type: el.getAttribute('type') || '', x: box.left + box.width / 2, y: box.top + box.height / 2};
  };
  const held = (e) => ['Control', 'Alt', 'Shift', 'Meta'].filter((m) => e.getModifierState(m));
  addEventListener('pointerdown', (e) => report({kind: 'pointer', x: e.clientX, y: e.clientY, button: e.button,
      count: e.detail, modifiers: held(e), element: describe(e.target)}), true);
  addEventListener('pointerup', (e) => report({kind: 'release', x: e.clientX, y: e.clientY, element: describe(e.target)}), true);
  addEventListener('input', (e) => {
    const el = e.target, hidden = secret(el);
    if (el.tagName === 'INPUT' && /^(checkbox|radio|range|file)$/i.test(el.type || '')) return;  // its click or drag says it
    const value = hidden ? null : el.tagName === 'SELECT' ? [...el.selectedOptions].map((o) => o.text.trim()).join(', ')  // as shown
        : ('value' in el ? String(el.value) : el.innerText || '');
    report({kind: 'input', secret: hidden, value, element: describe(el)});
  }, true);
  addEventListener('keydown', (e) => {
    const named = e.key.length > 1, chord = e.ctrlKey || e.metaKey || e.altKey;
    if ((!named && !chord) || ['Control', 'Shift', 'Alt', 'Meta', 'CapsLock', 'Unidentified', 'Process'].includes(e.key)) return;
    if (editable(e.target) && ['Backspace', 'Delete'].includes(e.key)) return;  // its input event says what it did
    const key = e.key.length === 1 ? e.key.toUpperCase() : e.key;
    report({kind: 'key', keys: [...held(e).filter((m) => m !== e.key), key].join('+'), element: describe(e.target)});
  }, true);
  addEventListener('wheel', (e) => report({kind: 'wheel', x: e.clientX, y: e.clientY, dx: e.deltaX, dy: e.deltaY}),
      {capture: true, passive: true});
})()"""

_WATCHING: "weakref.WeakKeyDictionary[Any, BrowserPersonWatch]" = weakref.WeakKeyDictionary()
_INSTALLED: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _reported(source: dict[str, Any], event: Any) -> None:
    watch = _WATCHING.get(source.get("page"))
    if watch is not None and isinstance(event, dict):
        watch._queue.put_nowait(event)


async def _install(page: Any) -> None:
    """The binding and the script, once per tab (both stay with the tab)."""
    if page in _INSTALLED:
        return
    await page.expose_binding(BINDING, _reported)
    await page.add_init_script(SCRIPT)
    _INSTALLED.add(page)
    await page.evaluate(SCRIPT)  # the document open now (init scripts run in the next ones)


def target_of(element: dict[str, Any] | None) -> str:
    """An element as a target is written: "the 'Sign in' button"."""
    if not element:
        return "the page"
    tag = element.get("tag") or "element"
    kind = element.get("role") or {"a": "link", "input": "field", "textarea": "field", "select": "list"}.get(tag, tag)
    if element.get("tag") == "input" and element.get("type") in ("checkbox", "radio", "submit", "button"):
        kind = element["type"]
    name = element.get("name") or ""
    return f"the {name!r} {kind}" if name else f"the {kind}"


def _element(event: dict[str, Any]) -> dict[str, Any] | None:
    element = event.get("element")
    return {k: v for k, v in element.items() if k not in ("x", "y") and v} if isinstance(element, dict) else None


class BrowserPersonWatch(PersonWatch):
    """A person's turn in the browser, read from the page (see the module's docstring)."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.actions: list[PersonAction] = []
        self._page: Any = None
        self._url = ""
        self._reading: asyncio.Future[None] | None = None
        self._told = 0  # the browser's notices for the agent's next outcome from before the turn
        self._down = False  # a mouse button is held (pressed on the page, not yet released)
        self._answered = ""  # a dialog held for the agent that the person answered in the window, as said

    async def start(self) -> None:
        page = self._page = self.env.page
        self.env.person_turn = True  # the tabs the person opens are theirs to keep
        self._told = len(self.env._notices)
        try:
            await _install(page)
        except Exception as exc:  # noqa: BLE001 - a page that cannot be read still has its screens
            log.warning("a person's actions in this tab cannot be read (%s): only the screens are recorded", exc)
        self._url = page.url
        _WATCHING[page] = self
        page.on("framenavigated", self._navigated)
        await super().start()
        self._reading = asyncio.ensure_future(self._read())

    def _navigated(self, frame: Any) -> None:
        if self._page is not None and frame == self._page.main_frame:
            self._queue.put_nowait({"kind": "navigate", "url": frame.url, "t": time.time() * 1000})

    async def stop(self) -> list[PersonAction]:
        page = self._page
        held = self.env._dialog is not None  # a dialog the page opened, held for the agent (frozen: no script runs)
        runs = False
        try:
            # through the binding, stamped with the page's clock: the page's events from before it are read first
            # (those of a document the person left can still be on their way: they are waited for, up to QUIET)
            await asyncio.wait_for(page.evaluate(f"() => window.{BINDING} && window.{BINDING}({{kind: 'flush', t: Date.now()}})"),
                                   DIALOG_PROBE if held else 5)
            runs = True
        except Exception:  # noqa: BLE001 - a tab between two documents, closed or hanging: what arrives is known
            self._queue.put_nowait({"kind": "flush", "t": time.time() * 1000})
        answered = self._answered = self.env.dialog_answered_in_window(page) if held and runs else ""  # (a window shows it)
        try:
            if self._reading is not None:
                await self._reading
        finally:
            self.env.person_turn = False
            _WATCHING.pop(page, None)
            page.remove_listener("framenavigated", self._navigated)
        if answered and self.actions:
            last = self.actions[-1]
            last.detail = "; ".join(filter(None, (last.detail, answered)))
            if self.env._page is page:  # its screen after showed the dialog drawn over the page: the page now
                last.after = await self._observe() or last.after
        await self._left_tab(page)
        return self.actions

    async def _left_tab(self, page: Any) -> None:
        """When the person closed the tab they were in, or went on in another one, the screen at the hand-back is
        not the one their last action left: one more action holds it (`close_tab`; in another tab, not read: the
        screens before and after). What the browser noticed during the turn (a tab closed) is the person's doing,
        told with their actions, not with the agent's next one."""
        env = self.env
        current = env._page  # the tab the agent works in: the watched one, or one the person opened
        shut = [tab for tab in (current, page) if tab is not None and tab.is_closed()]
        closed = bool(shut)
        if closed or current is not page:
            left = next((a.after for a in reversed(self.actions) if a.after is not None), self.first)
            gone = shut[0].url if shut else ""
            now = await self._observe()  # (a closed tab is left for one still open: tabs.py)
            if now is not None:
                if closed:
                    self.actions.append(PersonAction(CloseTab(), left, now, detail=f"closed the tab at {gone}; "
                                                     f"the current tab is now {now.url}"))
                else:
                    self.actions.append(PersonAction(None, left, now, detail=f"went on in another tab, at {now.url} "
                                                     "(what was done there is not read: the screens before and after)"))
        noticed = env._notices[self._told:]
        del env._notices[self._told:]
        if closed:  # (said by the close_tab above)
            noticed = [n for n in noticed if "closed itself" not in n]
        if self._answered:  # (the dialog's opening is said with its answer)
            noticed = [n for n in noticed if not n.startswith(self._answered.removesuffix(", answered in the window") + "; ")]
        if noticed and self.actions:
            last = self.actions[-1]
            last.detail = "; ".join(filter(None, (last.detail, *noticed)))

    async def _read(self) -> None:
        before = self.first
        pending: PersonAction | None = None  # the action being read (typing goes on)
        last: PersonAction | None = None  # the last one ended (a navigation may be where it led)
        again = False  # `last` led somewhere after it ended: its screen after is taken again
        held: tuple[str, float] | None = None  # a navigation waiting for the page's events from before it
        after_held: dict[str, Any] | None = None  # the event that ended the wait, read again once it is done
        closing = False  # the page's flush came: what it stamped earlier may still arrive, until QUIET passes
        while True:
            if after_held is not None:
                event, after_held = after_held, None
            else:
                try:
                    quiet = HELD if isinstance(pending and pending.action, Click) and self._down and not closing else QUIET
                    event = await (asyncio.wait_for(self._queue.get(), quiet) if pending or again or held or closing
                                   else self._queue.get())
                except TimeoutError:
                    event = {"kind": "flush"} if closing and not held else {"kind": "quiet"}
            kind = event.get("kind")
            if kind == "navigate" and str(event.get("url") or "") in (self._url, held and held[0]):
                continue
            if kind == "flush" and event.get("t") and not closing:  # the page's: wait for its stragglers
                closing = True
                continue
            if kind == "flush" and self._page.url != self._url and not held:  # a navigation not reported yet
                after_held = event
                event, kind = {"kind": "navigate", "url": self._page.url, "t": time.time() * 1000}, "navigate"
            if held is not None and (kind in ("quiet", "flush", "navigate") or not float(event.get("t") or 0) < held[1]):
                after_held = event  # it came after the navigation held: that one first
                event, kind, held = {"kind": "arrived", "url": held[0]}, "arrived", None
            if kind == "navigate":
                self._url = str(event.get("url") or "")
                self._down = False  # (a press that led away: its release, in the next document, is not reported)
                held = (self._url, float(event.get("t") or time.time() * 1000))
                continue
            if kind == "arrived":
                url = str(event["url"])
                cause = pending or last
                # an action that ended after leading somewhere led there only: a later navigation is the person's own
                if (cause is not None and isinstance(cause.action, (Click, PressKeys, TypeText)) and time.monotonic() - cause.at < LED_TO
                        and (cause is pending or not cause.detail)):
                    cause.detail = f"went to {url}"
                    again = again or pending is None
                    continue
                event = {"kind": "goto", "url": url}
            elif kind not in ("quiet", "flush") and self._joins(pending, event):
                continue
            if pending is not None or again:
                after = await self._observe()
                if pending is not None:
                    pending.after, last, pending = after, pending, None
                    self.actions.append(last)
                elif last is not None:
                    last.after = after
                before, again = after or before, False
            if kind == "flush":
                return
            if kind != "quiet":
                pending = self._action(event, before)

    def _joins(self, pending: PersonAction | None, event: dict[str, Any]) -> bool:
        """Whether `event` goes on with the action in progress (typing, scrolling, a second click)."""
        kind = event.get("kind")
        if kind == "release":  # the end of a press: a drag when it moved, else nothing new
            self._down = False
            if pending is not None and isinstance(pending.action, Click) and not pending.action.double and pending.action.point:
                start, x, y = pending.action.point, float(event.get("x", 0)), float(event.get("y", 0))
                if max(abs(x - start.x), abs(y - start.y)) >= DRAG_PX:
                    click = pending.action
                    pending.action = Drag(target=click.target, point=start, to_target=target_of(_element(event)),
                                          to_point=CssPoint(x=x, y=y))
            return True
        if pending is None:
            return False
        action = pending.action
        if kind == "input" and isinstance(action, TypeText) and pending.element == _element(event):
            pending.action = action.model_copy(update={"text": REDACTED if event.get("secret") else str(event.get("value") or "")})
            pending.redacted = pending.redacted or bool(event.get("secret"))
            return True
        if kind == "wheel" and isinstance(action, Scroll) and action.direction == _direction(event):
            pending.action = action.model_copy(update={"amount": min(50, action.amount + 1)})
            return True
        if (kind == "pointer" and isinstance(action, Click) and int(event.get("count") or 1) >= 2
                and action.point is not None and abs(action.point.x - event.get("x", 0)) < 5 and abs(action.point.y - event.get("y", 0)) < 5):
            pending.action = action.model_copy(update={"double": True})
            self._down = True
            return True
        return False

    def _action(self, event: dict[str, Any], before: Any) -> PersonAction | None:
        kind, element = event.get("kind"), _element(event)
        made = PersonAction(None, before, element=element)
        if kind == "pointer":
            self._down = True
            modifiers = [m for m in event.get("modifiers") or [] if m in ("Control", "Alt", "Shift", "Meta")]
            made.action = Click(target=target_of(element), point=CssPoint(x=float(event.get("x", 0)), y=float(event.get("y", 0))),
                                button=BUTTONS.get(int(event.get("button") or 0), "left"), modifiers=modifiers)
        elif kind == "input":
            made.redacted = bool(event.get("secret"))
            box = event.get("element") or {}
            made.action = TypeText(text=REDACTED if made.redacted else str(event.get("value") or ""), target=target_of(element),
                                   point=CssPoint(x=float(box.get("x", 0)), y=float(box.get("y", 0))) if box else None)
        elif kind == "key":
            made.action = PressKeys(keys=str(event.get("keys") or "Enter"))
        elif kind == "wheel":
            made.action = Scroll(direction=_direction(event), amount=1,
                                 point=CssPoint(x=float(event.get("x", 0)), y=float(event.get("y", 0))))
        elif kind == "goto":
            made.action, made.element = Goto(url=str(event["url"])), None
        else:
            return None
        return made


def _direction(event: dict[str, Any]) -> str:
    dx, dy = float(event.get("dx") or 0), float(event.get("dy") or 0)
    if abs(dy) >= abs(dx):
        return "down" if dy > 0 else "up"
    return "right" if dx > 0 else "left"
