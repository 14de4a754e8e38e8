"""What a scroll did, told to the model: how far the page or the scrolling area under the pointer moved,
or that nothing moved (already at the bottom, or nothing there scrolls). A mouse wheel sent to a page
that cannot scroll further changes nothing, and "scrolled down 500 px" would have the model scroll on.

`before` runs just ahead of the wheel: it notes the scroll positions of every element the wheel could
scroll from the point (the element there and its ancestors, through open shadow roots, then the page)
and whether the page itself handles the wheel (a map, a carousel: `preventDefault`). `after` runs once
the page settled and compares. A point over an iframe is not measured (the frame's own page scrolls).
"""

from __future__ import annotations

from typing import Any

from surfer.tools.widgets import DEEPEST_AT

BEFORE = r"""
({ x, y }) => {
""" + DEEPEST_AT + r"""  if (el && ['IFRAME', 'FRAME', 'EMBED', 'OBJECT'].includes(el.tagName)) return false;
  const root = document.scrollingElement || document.documentElement;
  const nodes = [];
  for (let node = el; node && node.nodeType === 1; node = node.parentElement || (node.getRootNode().host || null)) {
    if (node !== root) nodes.push(node);
  }
  nodes.push(root);
  const state = window.__surferScroll = { nodes, before: nodes.map((n) => [n.scrollLeft, n.scrollTop]), prevented: false };
  addEventListener('wheel', (e) => { state.prevented = e.defaultPrevented; }, { once: true, passive: true });
  return true;
}
"""

# [moved px along the axis, 'page' | 'area', at its end now] for what moved first; else
# {prevented, scrollable: whether anything there scrolls along the axis}.
AFTER = r"""
async ({ vertical }) => {
  const state = window.__surferScroll;
  if (!state) return null;
  const root = document.scrollingElement || document.documentElement;
  const axis = vertical ? 1 : 0;
  const position = (n) => [n.scrollLeft, n.scrollTop];
  const measure = () => {
    for (let i = 0; i < state.nodes.length; i++) {
      const node = state.nodes[i], moved = position(node)[axis] - state.before[i][axis];
      if (Math.abs(moved) >= 1) {
        const room = vertical ? node.scrollHeight - node.clientHeight : node.scrollWidth - node.clientWidth;
        const at = position(node)[axis];
        const page = node === root || node === document.body || node === document.documentElement;
        return { moved: Math.round(Math.abs(moved)), what: page ? 'page' : 'area',
                 end: moved > 0 ? at >= room - 1 : at <= 0 };
      }
    }
    return null;
  };
  let found = measure();
  if (!found && !state.prevented) {  // a wheel the compositor has not applied yet: two frames more
    await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
    found = measure();
  }
  delete window.__surferScroll;
  if (found) return found;
  const scrollable = state.nodes.some((node) => {
    const size = vertical ? node.scrollHeight - node.clientHeight : node.scrollWidth - node.clientWidth;
    if (size < 1) return false;
    if (node === root) return true;
    const overflow = getComputedStyle(node)[vertical ? 'overflowY' : 'overflowX'];
    return overflow === 'auto' || overflow === 'scroll' || overflow === 'overlay';
  });
  return { prevented: state.prevented, scrollable };
}
"""

ENDS = {"down": "bottom", "up": "top", "left": "left end", "right": "right end"}


async def note_positions(page: Any, x: float, y: float) -> bool:
    """Before the wheel: whether what it scrolls can be measured afterwards."""
    try:
        return bool(await page.evaluate(BEFORE, {"x": x, "y": y}))
    except Exception:  # noqa: BLE001 - a page navigating away: the scroll is reported as sent
        return False


async def describe(page: Any, direction: str, distance: int, x: float, y: float) -> str | None:
    """After the page settled: what the scroll moved, in one phrase; None when it cannot tell."""
    try:
        found = await page.evaluate(AFTER, {"vertical": direction in ("up", "down")})
    except Exception:  # noqa: BLE001 - the page navigated (a scroll can load more) or closed
        return None
    at = f"({x:.0f}, {y:.0f})"
    if not found or found.get("prevented"):
        return None  # the page handles the wheel itself: what it did is on the next screenshot
    if "moved" in found:
        what = "the page" if found["what"] == "page" else "the scrolling area"
        end = f" (now at its {ENDS[direction]})" if found["end"] and found["moved"] < distance else ""
        return f"scrolled {what} {direction} {found['moved']} px at {at}{end}"
    if found["scrollable"]:
        return f"scrolling {direction} at {at} moved nothing: already at the {ENDS[direction]} there"
    return f"scrolling {direction} at {at} moved nothing: nothing there scrolls {direction}"
