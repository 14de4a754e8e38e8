"""Native widgets a vision agent must be able to use: the in-page stand-ins
for Chromium's popups (widgets.js) and how a right click is reported.

Chromium draws a `<select>` popup, a date/time/month/week picker or the
colour chooser as a separate widget: it shows in screenshots, but input sent
through the DevTools protocol never reaches it. widgets.js (an init script
in every frame) draws an equivalent popup inside the page instead, where
clicks and keys work; `drawn(page)` lists what is drawn (for tests and
ground-truth oracles, which read geometry the way a person reads the screen).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any


@lru_cache(maxsize=1)
def widgets_script() -> str:
    return resources.files(__package__).joinpath("widgets.js").read_text(encoding="utf-8")


async def drawn(page: Any) -> list[dict[str, Any]]:
    """Clickable items of the open popup in any frame, in page CSS pixels
    (`frame` offset added), with `label`, `value`, box and `visible`."""
    items: list[dict[str, Any]] = []
    for frame in page.frames:
        try:
            found = await frame.evaluate("() => window.__surferWidgets ? window.__surferWidgets.drawn() : []")
        except Exception:  # noqa: BLE001 - a detached or navigating frame has nothing open
            continue
        if not found:
            continue
        dx = dy = 0.0
        if frame.parent_frame is not None:
            element = await frame.frame_element()
            box = await element.bounding_box()
            border = await element.evaluate("(e) => [e.clientLeft, e.clientTop]")
            dx, dy = (box["x"] + border[0], box["y"] + border[1]) if box else (0.0, 0.0)
        items += [{**item, "x": item["x"] + dx, "y": item["y"] + dy} for item in found]
    return items


SHARE_AREA = "(area) => { if (window.__surferWidgets) window.__surferWidgets.area = area; }"
CONTEXT_MENU_STATE = "() => window.__surferWidgets ? window.__surferWidgets.contextMenuState() : null"


# told after an action whose settle wait saw the page call `window.print()` (widgets.js turns it into nothing: a
# browser with a window would hold the page in its print preview)
PRINT_NOTE = "the page asked to print (window.print): surfer does not print, and no print dialog opened"


# The innermost element at (x, y) as `el`, through open shadow roots (the start of a page function of x and y).
DEEPEST_AT = r"""
  let el = document.elementFromPoint(x, y);
  while (el && el.shadowRoot) {
    const inner = el.shadowRoot.elementFromPoint(x, y);
    if (!inner || inner === el) break;
    el = inner;
  }
"""

# The tooltip of what is under the pointer: the `title` of the element there or of its nearest ancestor with
# one (an SVG element's <title> child), through open shadow roots; '' when none (or an iframe is there).
TOOLTIP = r"""
({ x, y }) => {
""" + DEEPEST_AT + r"""  if (el && ['IFRAME', 'FRAME'].includes(el.tagName)) return '';
  for (let node = el; node; node = node.parentElement || (node.getRootNode().host || null)) {
    if (node instanceof SVGElement) {
      const own = Array.from(node.children).find((child) => child.tagName.toLowerCase() === 'title');
      if (own && own.textContent.trim()) return own.textContent.trim();
    } else if (node.hasAttribute && node.hasAttribute('title')) return node.getAttribute('title').trim();
  }
  return '';
}
"""


async def tooltip_note(page: Any, x: float, y: float) -> str:
    """After a hover: a sentence quoting the tooltip Chromium would show there (drawn outside the page, so
    never on a screenshot), else ''."""
    try:
        text = await page.evaluate(TOOLTIP, {"x": x, "y": y})
    except Exception:  # noqa: BLE001 - the page navigated or closed
        return ""
    if not text:
        return ""
    text = " ".join(text.split())
    return f'; its tooltip reads "{text[:300]}{"…" if len(text) > 300 else ""}"'


async def context_menu_note(page: Any, since_ms: float) -> str:
    """After a right click: '' when the page showed a menu of its own, else a
    sentence saying Chromium's native menu is not usable."""
    for frame in page.frames:
        try:
            state = await frame.evaluate(CONTEXT_MENU_STATE)
        except Exception:  # noqa: BLE001
            continue
        if state and state["at"] >= since_ms and state["prevented"]:
            return ""  # the page's own menu
    return (
        "; the page has no menu of its own there, and Chromium's native context menu cannot be used "
        "(nothing usable opened)"
    )
