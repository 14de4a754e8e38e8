"""Settle waiting: the one owner of "is the screen done changing?".

No fixed sleeps. After a browser action we wait, bounded by `timeout`, for:
1. navigation started by the action to reach the `load` state;
2. network requests started by the action to finish;
3. the DOM to stay free of mutations for `quiet` seconds (measured from the
   last mutation, which is tracked from page load by an init script, so an
   action that changed nothing waits only for one animation frame), and
   timers the action started that are due within `timer_horizon` to fire.
Each wait reports why it ended ("quiet", "timeout", ...) and the caller
records how long it took.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field


class SettleConfig(BaseModel):
    timeout: float = Field(default=3.0, ge=0, description="Upper bound on one settle wait, seconds.")
    quiet: float = Field(default=0.08, ge=0, description="DOM quiet window, seconds.")
    timer_horizon: float = Field(default=1.0, ge=0, description="Wait for timers the action started that fire within this many seconds.")


MUTATION_TRACKER = """
(() => {
  if (window.__surferSettle) return;
  const state = window.__surferSettle = { last: Date.now(), timers: new Map() };
  new MutationObserver(() => { state.last = Date.now(); })
    .observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
  // Short timers count as pending work (a page that renders 150 ms after load).
  const setT = window.setTimeout, clearT = window.clearTimeout;
  window.setTimeout = function (fn, delay, ...args) {
    if (typeof fn !== 'function') return setT.call(this, fn, delay, ...args);
    const created = Date.now(), due = created + (Number(delay) || 0);
    const id = setT.call(this, function () { state.timers.delete(id); return fn.apply(this, arguments); }, delay, ...args);
    state.timers.set(id, { created, due });
    return id;
  };
  window.clearTimeout = function (id) { state.timers.delete(id); return clearT.call(this, id); };
})();
"""

# Resolves when the DOM has been quiet for `quiet` ms and no timer started
# since `since` is due within `horizon` ms of it (bounded chains, so a page
# that polls forever still settles), or when `timeout` ms have passed.
WAIT_FOR_QUIET = """
async ({ quiet, timeout, since, horizon }) => {
  const t0 = Date.now();
  const state = window.__surferSettle;
  await new Promise((resolve) => { requestAnimationFrame(() => resolve()); setTimeout(resolve, 50); });
  for (;;) {
    const now = Date.now();
    const idle = state ? now - state.last : quiet;
    let nextDue = Infinity;
    if (state) for (const t of state.timers.values())
      if (t.created >= since && t.due <= since + horizon) nextDue = Math.min(nextDue, t.due);
    if (idle >= quiet && nextDue === Infinity) return "quiet";
    if (now - t0 >= timeout) return "timeout";
    const wait = nextDue === Infinity ? quiet - idle : Math.max(quiet - idle, nextDue - now + 1);
    await new Promise((r) => setTimeout(r, Math.max(1, Math.min(wait, timeout - (now - t0)))));
  }
}
"""

# Requests that never "finish" in the usual sense.
_LONG_LIVED = frozenset({"websocket", "eventsource", "manifest", "other"})


@dataclass
class Mark:
    wall_ms: float  # Date.now() at the mark, to select timers the action started
    request_seq: int
    navigations: int
    url: str
    page_count: int


class NetworkTracker:
    """Counts requests per browser context so a settle wait can ask for the
    ones started after a mark to be done."""

    def __init__(self) -> None:
        self._seq = 0
        self._inflight: dict[Any, int] = {}
        self._changed = asyncio.Event()

    def attach(self, context: Any) -> None:
        context.on("request", self._started)
        context.on("requestfinished", self._ended)
        context.on("requestfailed", self._ended)

    @property
    def seq(self) -> int:
        return self._seq

    def _started(self, request: Any) -> None:
        self._seq += 1
        if request.resource_type not in _LONG_LIVED:
            self._inflight[request] = self._seq

    def _ended(self, request: Any) -> None:
        if self._inflight.pop(request, None) is not None:
            self._changed.set()

    def pending_since(self, seq: int) -> int:
        return sum(1 for s in self._inflight.values() if s > seq)

    async def wait_idle_since(self, seq: int, deadline: float) -> bool:
        while self.pending_since(seq):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                return False
        return True


async def settle_page(page: Any, mark: Mark, navigations: int, tracker: NetworkTracker, config: SettleConfig) -> str:
    """Wait until `page` settles after an action taken at `mark`; return why the wait ended."""
    from playwright.async_api import Error as PlaywrightError

    deadline = time.monotonic() + config.timeout
    reasons: list[str] = []
    if navigations != mark.navigations or page.url != mark.url:
        try:
            await page.wait_for_load_state("load", timeout=max(1.0, (deadline - time.monotonic()) * 1000))
            reasons.append("loaded")
        except PlaywrightError:
            reasons.append("load-timeout")
    if not await tracker.wait_idle_since(mark.request_seq, deadline):
        reasons.append("network-timeout")
    for attempt in range(2):
        remaining = max(0.0, deadline - time.monotonic())
        try:
            reasons.append(await page.evaluate(WAIT_FOR_QUIET, {
                "quiet": config.quiet * 1000, "timeout": remaining * 1000,
                "since": mark.wall_ms, "horizon": config.timer_horizon * 1000,
            }))
            break
        except PlaywrightError as exc:
            # A navigation replaced the document mid-wait: wait for it, then once more.
            if attempt or "Execution context was destroyed" not in str(exc) and "navigation" not in str(exc).lower():
                reasons.append("evaluate-failed")
                break
            try:
                await page.wait_for_load_state("load", timeout=max(1.0, (deadline - time.monotonic()) * 1000))
            except PlaywrightError:
                pass
    return "+".join(reasons)
