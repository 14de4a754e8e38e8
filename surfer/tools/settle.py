"""Settle waiting: the one owner of "is the screen done changing?".

No fixed sleeps. After a browser action we wait, bounded by `timeout`, for:
1. navigation started by the action to reach the `load` state;
2. network requests started by the action to finish (not those the page
   was already polling on its own before the action: the same method and
   address, asked for twice in the 2 s before it, or held open by the server,
   a long poll; nor streams: WebSockets, event streams);
3. the DOM to stay free of mutations for `quiet` seconds (measured from the
   last mutation, which is tracked from page load by an init script, so an
   action that changed nothing waits only for one animation frame), and
   timers the action started (setTimeout, and an interval's first tick) that
   are due within `timer_horizon` to fire, and CSS transitions and animations
   that end within it (a menu fading in; an endless spinner is not waited for);
   what keeps changing through `ticking` at a steady pace without growing (a
   clock, a progress bar, a carousel, a timer chain re-arming itself) stops
   counting, so a page that never stops moving costs a short wait.
The in-page check also says whether the action activated a file field (a
click on it, a label's or a script's `click()`, `showPicker()`) or a link
that downloads (`<a download>`): the browser reports the file chooser or the
download through another channel, which can answer after the page is quiet,
so the caller waits for that report (bounded) only then. It says too whether
the page asked to print (`window.print()`), so a click costs one round trip.
Each wait reports why it ended ("quiet", "timeout", ...) and the caller
records how long it took.

On the desktop nothing but the screen can be watched: screen_settle.py (its
names are imported here too).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel, Field

# (the desktop's settle wait: its own module, its names importable from here too)
from .screen_settle import ScreenHabits, ScreenSettleConfig, settle_screen, tile_digests, tiles_changed  # noqa: F401


class SettleConfig(BaseModel):
    timeout: float = Field(default=3.0, ge=0, description="Upper bound on one settle wait, seconds.")
    quiet: float = Field(default=0.08, ge=0, description="DOM quiet window, seconds.")
    timer_horizon: float = Field(default=1.0, ge=0, description=(
        "Wait for timers the action started that fire, and CSS transitions and animations it started that end, "
        "within this many seconds."))
    ticking: float = Field(default=0.6, gt=0, description=(
        "A part of the page that keeps changing this long during the wait, at a steady pace and without growing "
        "(a clock, a progress bar, a carousel, a ticker), is not waited for any more, seconds."))


MUTATION_TRACKER = """
(() => {
  if (window.__surferSettle) return;
  // `log`: [time, node] of the last 2 s of mutations (one per node and batch), to tell the nodes a page keeps
  // changing on its own (a clock, a ticker, an animation driven by script) from what an action changed.
  const state = window.__surferSettle = { last: Date.now(), start: Date.now(), log: [], timers: new Map(), chooser: 0, download: 0, popup: 0, added: [] };
  // A file field or a downloading link activated (and not prevented): the browser is about to report a
  // file chooser or a download.
  const later = window.setTimeout.bind(window);
  const isFileField = (node) => node instanceof HTMLInputElement && node.type === 'file' && !node.disabled;
  // (a `download` link to another origin is followed, not downloaded: the browser ignores the attribute)
  const isDownload = (node) => (node instanceof HTMLAnchorElement || node instanceof HTMLAreaElement)
    && node.hasAttribute('download') && !!node.href
    && (node.protocol === 'blob:' || node.protocol === 'data:' || node.origin === location.origin);
  // A link that opens in another tab (target=_blank, or a click with Ctrl / Shift / Meta held) or window.open():
  // the browser reports the new tab on another channel too.
  const link = (node) => (node instanceof HTMLAnchorElement || node instanceof HTMLAreaElement) && !!node.href;
  const framed = (name) => !!document.querySelector(`iframe[name="${CSS.escape(name)}"], frame[name="${CSS.escape(name)}"]`);
  const inNewTab = (event, node) => link(node) && !isDownload(node) && (event.ctrlKey || event.shiftKey || event.metaKey
    || (!['', '_self', '_parent', '_top'].includes(node.target.toLowerCase()) && !framed(node.target)));
  window.addEventListener('click', (event) => {
    const path = event.composedPath();
    const chooser = isFileField(path[0]), download = path.some(isDownload), popup = path.some((node) => inNewTab(event, node));
    if (chooser || download || popup) later(() => {
      if (event.defaultPrevented) return;
      if (chooser) state.chooser = Date.now();
      if (download) state.download = Date.now();
      if (popup) state.popup = Date.now();
    }, 0);
  }, true);
  const open = window.open;
  window.open = function () { state.popup = Date.now(); return open.apply(this, arguments); };
  const showPicker = HTMLInputElement.prototype.showPicker;
  if (showPicker) HTMLInputElement.prototype.showPicker = function () {
    if (isFileField(this)) state.chooser = Date.now();
    return showPicker.apply(this, arguments);
  };
  new MutationObserver((records) => {
    const now = state.last = Date.now();
    const log = state.log;
    for (const node of new Set(records.map((r) => r.target))) log.push([now, node]);
    let drop = 0;
    while (drop < log.length && (log[drop][0] < now - 2000 || log.length - drop > 5000)) drop++;
    if (drop) log.splice(0, drop);
    // elements added (a toast appended to the body): what a wait may see shown and then taken away
    const added = state.added;
    for (const r of records) for (const node of r.addedNodes) if (node.nodeType === 1) added.push([now, node]);
    if (added.length > 200) added.splice(0, added.length - 200);
  })
    .observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
  // Short timers count as pending work (a page that renders 150 ms after load);
  // an interval counts until its first tick.
  // A timer set by a timer's callback continues that timer's chain: `root` is when the chain began and
  // `parent` when the timer that set it was set, `depth` how many timers before it (a clock that re-arms its setTimeout
  // every tick is one chain).
  let running = null;  // the timer whose callback runs now
  const track = (set) => function (fn, delay, ...args) {
    if (typeof fn !== 'function') return set.call(this, fn, delay, ...args);
    const created = Date.now(), due = created + (Number(delay) || 0);
    const timer = { created, due, root: running ? running.root : created, parent: running ? running.created : null,
                    depth: running ? running.depth + 1 : 0 };
    const id = set.call(this, function () {
      state.timers.delete(id);
      const outer = running;
      running = timer;
      try { return fn.apply(this, arguments); } finally { running = outer; }
    }, delay, ...args);
    state.timers.set(id, timer);
    return id;
  };
  const clear = (cl) => function (id) { state.timers.delete(id); return cl.call(this, id); };
  window.setTimeout = track(window.setTimeout);
  window.setInterval = track(window.setInterval);
  window.clearTimeout = clear(window.clearTimeout);
  window.clearInterval = clear(window.clearInterval);
})();
"""

# Resolves when the DOM has been quiet for `quiet` ms (quiet but for the nodes
# the page was changing on its own, 3 times or more over at least half of the
# second before `since`: a clock or a ticker never holds a step for the whole timeout) and no timer started
# since `since` is due within `horizon` ms of it (bounded chains, so a page
# that polls forever still settles), or when `timeout` ms have passed, with
# [why, the document's title, whether a file field / a downloading link was activated since `since`, whether
# the page asked to print since then (window.print(), which widgets.js turns into a note), whether it opened a tab,
# the texts shown during the wait and gone by its end]
# (the title rides along so the screenshot that follows needs no round trip of
# its own for it).
WAIT_FOR_QUIET = """
async ({ quiet, timeout, since, horizon, ticking: ticking_ms }) => {
  const t0 = Date.now();
  const state = window.__surferSettle, widgets = window.__surferWidgets;
  // the latest action's wait: a wait a dialog held up goes on once it is answered, and must not take the print
  // of an action after it
  if (widgets && !(widgets.since > since)) widgets.since = since;
  const started = () => {
    // [a file field activated, a downloading link activated, the page asked to print, a tab opened] since `since`
    // (a print call is told once, by the first wait of the latest action after it; `since` less 250 ms, as the
    // page's clock can lag ours)
    const printed = !!widgets && widgets.printed >= since - 250 && widgets.printed !== widgets.told;
    if (printed && widgets.since === since) widgets.told = widgets.printed;
    return [!!state && state.chooser >= since, !!state && state.download >= since, printed && widgets.since === since,
            !!state && state.popup >= since];
  };
  const seen = new Map();  // node -> [mutations, first, last] in the second before `since`
  if (state) for (const [t, node] of state.log)
    if (t >= since - 1000 && t < since) {
      const s = seen.get(node);
      if (s) { s[0]++; s[2] = t; } else seen.set(node, [1, t, t]);
    }
  // changing on its own: 3 times or more, over half a second at least (not the burst of one earlier action)
  const ambient = new Set([...seen].filter(([, [n, first, last]]) => n >= 3 && last - first >= 500).map(([node]) => node));
  // Ticking since: a node that has kept changing through `ticking` ms of this wait, 4 times or more, without its
  // text growing (a clock, a progress bar or a carousel that started with the page or the action, a ticker
  // that never stops) is not waited for any more; content streaming in grows, and is waited for.
  const size = (node) => (node.textContent || '').length;
  const sizeAt = new Map();  // node -> its text length when this wait first saw it change
  const ticking = new Set();
  const watchTicking = (now) => {
    if (!state) return;
    const from = Math.max(since, t0, now - 2 * ticking_ms), per = new Map();
    for (let i = state.log.length - 1; i >= 0 && state.log[i][0] >= from; i--) {
      const [t, node] = state.log[i], s = per.get(node);
      if (s) { s[0]++; s[1] = t; } else per.set(node, [1, t, t]);  // [changes, first, last]
    }
    for (const [node, [n, first, last]] of per) {
      if (!sizeAt.has(node)) sizeAt.set(node, size(node));
      else if (now - t0 >= ticking_ms && n >= 4 && last - first >= ticking_ms * 0.75 && now - last < ticking_ms / 2 && Math.abs(size(node) - sizeAt.get(node)) <= 16)
        ticking.add(node);
    }
  };
  const lastChange = () => {  // the last mutation of a node that is not one of those
    if (!ambient.size && !ticking.size) return state.last;
    for (let i = state.log.length - 1; i >= 0; i--) {
      const node = state.log[i][1];
      if (!ambient.has(node) && !ticking.has(node)) return state.log[i][0];
    }
    return state.start;
  };
  // CSS transitions and animations started since `since` that end within `horizon` (a menu fading in, a panel
  // sliding open: drawn half-way, a screenshot shows what is not there yet); endless ones (a spinner), and
  // those the page was already playing, are not waited for.
  const drawnBy = () => {
    let end = -Infinity;
    for (const a of (document.getAnimations ? document.getAnimations() : [])) {
      if (a.playState !== 'running' || !a.effect || a.currentTime === null) continue;
      // (its start is the time of the frame it began in, which can precede the action by a frame or more)
      if (a.startTime !== null && performance.timeOrigin + a.startTime < since - 250) continue;
      const left = (a.effect.getComputedTiming().endTime - a.currentTime) / Math.abs(a.playbackRate || 1);
      if (left > 0 && left <= horizon) end = Math.max(end, Date.now() + left);
    }
    return end;
  };
  // What the action showed while the wait held on for a timer (a toast, a "Copied" tip) and was hidden or removed
  // by the time the wait ended: the screenshot after it cannot show it, so its text is told (short texts only).
  const shown = new Map();  // element -> its text when it was drawn
  const note = () => {
    if (!state) return;
    for (const [t, node] of [...state.log, ...state.added]) {
      const el = node.nodeType === 1 ? node : node.parentElement;
      if (t < since || !el || shown.has(el) || ambient.has(node) || ticking.has(node) || shown.size >= 50) continue;
      const text = el.isConnected && el.checkVisibility() ? (el.innerText || '').trim() : '';
      if (text && text.length <= 200) shown.set(el, text);
    }
  };
  const gone = () => {
    const texts = [...shown].filter(([el]) => !el.isConnected || !el.checkVisibility()).map(([, text]) => text);
    const page = document.body ? document.body.innerText : '';
    return [...new Set(texts)].filter((text, _, all) => !page.includes(text)
      && !all.some((other) => other !== text && other.includes(text))).slice(0, 3);
  };
  // Let the action's handlers run (one frame at most: the screenshot waits for a fresh frame itself).
  await new Promise((resolve) => { requestAnimationFrame(() => resolve()); setTimeout(resolve, 16); });
  for (;;) {
    const now = Date.now();
    watchTicking(now);
    const idle = state ? now - lastChange() : quiet;
    let nextDue = Infinity;
    // (of a chain the page was running before the action, only its first timer set since: one tick of its own;
    // nor a chain that has kept re-arming itself through `ticking` ms: a clock that started with the page)
    if (state) for (const t of state.timers.values())
      if (t.created >= since && t.due <= since + horizon && (t.root >= since || t.parent < since)
          && !(t.depth >= 3 && now - t.root >= ticking_ms)) nextDue = Math.min(nextDue, t.due);
    const drawn = drawnBy();
    if (idle >= quiet && nextDue === Infinity && drawn <= now) return ["quiet", document.title, ...started(), gone()];
    if (now - t0 >= timeout) return ["timeout", document.title, ...started(), gone()];
    if (idle >= quiet && drawn <= now) note();  // drawn and still but for a timer the action set: what shows now
    const wait = Math.max(quiet - idle, nextDue === Infinity ? 0 : nextDue - now + 1, drawn - now + 1);
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
    ones started after a mark to be done. It remembers which addresses were
    asked for in the last seconds, so that a wait can leave out what the page
    was already polling on its own before the action (a chat or a status page
    that asks its server every few hundred milliseconds), and the addresses
    the page holds a request open to (a long poll: one was in flight for
    POLL_WINDOW_MS before the action, or one took HELD_MS or longer). A
    response that streams events (`text/event-stream` read by `fetch`) is
    long-lived, as an EventSource's or a WebSocket's is."""

    POLL_WINDOW_MS = 2000.0  # an address asked for twice in this long before the action is the page's own polling
    HELD_MS = 5000.0  # a request this long is a long poll (longer than a settle wait: not the action's to wait for)

    def __init__(self) -> None:
        self._seq = 0
        self._inflight: dict[Any, tuple[int, str, float]] = {}  # request -> (seq, address, wall-clock ms started)
        self._recent: deque[tuple[float, str]] = deque()  # (wall-clock ms, address) of requests started lately
        self._held: dict[str, float] = {}  # address -> when a request to it ended after HELD_MS or more
        self._changed = asyncio.Event()

    def attach(self, target: Any) -> None:
        """Count the requests of `target`: a browser context (its tabs, popups included), or one tab."""
        target.on("request", self._started)
        target.on("response", self._responded)
        target.on("requestfinished", self._ended)
        target.on("requestfailed", self._ended)
        if hasattr(target, "main_frame"):  # a tab
            self._watch(target)
        else:
            target.on("page", self._watch)

    @property
    def seq(self) -> int:
        return self._seq

    def _started(self, request: Any) -> None:
        self._seq += 1
        # the method and the address without its query: a poll's GETs are one, a form's POST to the same path another
        now, address = time.time() * 1000, f'{request.method} {request.url.split("#", 1)[0].split("?", 1)[0]}'
        self._recent.append((now, address))
        while self._recent and (self._recent[0][0] < now - 2 * self.POLL_WINDOW_MS or len(self._recent) > 2000):
            self._recent.popleft()
        if request.resource_type not in _LONG_LIVED:
            self._inflight[request] = (self._seq, address, now)

    def _responded(self, response: Any) -> None:
        try:
            streams = response.headers.get("content-type", "").startswith("text/event-stream")
        except Exception:  # noqa: BLE001
            streams = False
        if streams and self._inflight.pop(response.request, None) is not None:
            self._changed.set()

    def _ended(self, request: Any) -> None:
        entry = self._inflight.pop(request, None)
        if entry is not None:
            now = time.time() * 1000
            if now - entry[2] >= self.HELD_MS:
                self._held[entry[1]] = now
                while len(self._held) > 200:
                    del self._held[next(iter(self._held))]
            self._changed.set()

    def _watch(self, page: Any) -> None:
        """A tab that closes with requests in flight (a sign-in popup calling window.close()) reports none of
        them finished: they are dropped when it closes, not waited for until the timeout."""
        page.on("close", lambda _=None: self._page_closed(page))

    def _page_closed(self, page: Any) -> None:
        for request in [r for r in self._inflight if _page_of(r) is page]:
            del self._inflight[request]
        self._changed.set()

    def polled_before(self, wall_ms: float) -> frozenset[str]:
        """The addresses the page asked for twice or more in the POLL_WINDOW_MS before `wall_ms` (a mark's),
        and those it holds requests open to (long polls)."""
        seen: dict[str, int] = {}
        for at, address in self._recent:
            if wall_ms - self.POLL_WINDOW_MS <= at < wall_ms:
                seen[address] = seen.get(address, 0) + 1
        held = {address for _, address, started in self._inflight.values() if started <= wall_ms - self.POLL_WINDOW_MS}
        return frozenset({address for address, count in seen.items() if count >= 2} | held | set(self._held))

    def pending_since(self, seq: int, polled: frozenset[str] = frozenset()) -> int:
        return sum(1 for s, address, _ in self._inflight.values() if s > seq and address not in polled)

    async def wait_idle_since(self, seq: int, deadline: float, polled: frozenset[str] = frozenset()) -> bool:
        return await wait_until(lambda: not self.pending_since(seq, polled), self._changed, deadline)


def _page_of(request: Any) -> Any:
    try:
        return request.frame.page
    except Exception:  # noqa: BLE001
        return None


class BrowserReport:
    """When the browser last reported something an action starts on another channel than the page's (a file
    chooser, a download): a step whose page said it started one waits, bounded, for the report."""

    def __init__(self) -> None:
        self.at = 0.0  # wall-clock ms of the last report
        self._arrived = asyncio.Event()

    def arrived(self) -> None:
        self.at = time.time() * 1000
        self._arrived.set()

    async def since(self, wall_ms: float, limit: float) -> bool:
        """True once a report came at or after `wall_ms`; False after `limit` seconds without one."""
        return await wait_until(lambda: self.at >= wall_ms, self._arrived, time.monotonic() + limit)


async def wait_until(condition: Callable[[], bool], changed: asyncio.Event, deadline: float) -> bool:
    """Wait until `condition()` holds, looking again whenever `changed` is set; False at `deadline`
    (time.monotonic()) if it still does not."""
    while not condition():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        changed.clear()
        try:
            await asyncio.wait_for(changed.wait(), remaining)
        except asyncio.TimeoutError:
            return False
    return True


async def _wait_quiet(page: Any, mark: Mark, config: SettleConfig, deadline: float, seen: dict[str, Any]) -> str:
    from playwright.async_api import Error as PlaywrightError

    remaining = max(0.0, deadline - time.monotonic())
    seen.pop("title", None)
    try:
        reason, seen["title"], chooser, download, printed, popup, gone = await page.evaluate(WAIT_FOR_QUIET, {
            "quiet": config.quiet * 1000, "timeout": remaining * 1000,
            "since": mark.wall_ms, "horizon": config.timer_horizon * 1000, "ticking": config.ticking * 1000,
        })
        seen["file_chooser"] = seen.get("file_chooser", False) or chooser
        seen["download"] = seen.get("download", False) or download
        seen["printed"] = seen.get("printed", False) or printed
        seen["popup"] = seen.get("popup", False) or popup
        seen["vanished"] = [*seen.get("vanished", []), *gone]
        return reason
    except PlaywrightError as exc:
        if page.is_closed():
            return "page-closed"
        # A navigation replaced the document mid-wait: the caller goes round again.
        return "navigated" if "context was destroyed" in str(exc) or "navigat" in str(exc).lower() else "evaluate-failed"


async def settle_page(
    current: Callable[[], tuple[Any, int]], mark: Mark, tracker: NetworkTracker, config: SettleConfig,
    seen: dict[str, Any] | None = None,
) -> str:
    """Wait until the current page settles after an action taken at `mark`.

    `current()` returns (page, navigation count) now: a click may open a tab
    (which becomes current) or navigate while we wait. Rounds of
    load → DOM/timer quiet → network idle repeat until one round sees nothing
    new, or the deadline passes. Returns why the wait ended, e.g. "quiet" or
    "loaded+quiet" or "...+timeout". `seen` gets the page's `title` as the last
    in-page check saw it (absent when that check failed), and `file_chooser` /
    `download`: True when the action activated a file field / a downloading link, and `printed`: True when
    the page asked to print (one round trip tells it all: no check of its own after each click), and `popup`:
    True when it opened a tab (a target=_blank link, window.open()), and `vanished`: the texts the action showed
    while the wait held on for a timer and were hidden or removed by its end (a toast that lasts under a second)."""
    from playwright.async_api import Error as PlaywrightError

    deadline = time.monotonic() + config.timeout
    seen = {} if seen is None else seen
    seen_navigations, seen_url = mark.navigations, mark.url
    polled = tracker.polled_before(mark.wall_ms)  # the page's own polling is not the action's to wait for
    reasons: list[str] = []
    while True:
        page, navigations = current()
        if navigations != seen_navigations or page.url != seen_url:
            seen_navigations, seen_url = navigations, page.url
            try:
                await page.wait_for_load_state("load", timeout=max(1.0, (deadline - time.monotonic()) * 1000))
                reasons.append("loaded")
            except PlaywrightError:
                reasons.append("load-timeout")
        quiet = await _wait_quiet(page, mark, config, deadline, seen)
        if tracker.pending_since(mark.request_seq, polled):
            if not await tracker.wait_idle_since(mark.request_seq, deadline, polled):
                reasons.append("network-timeout")
                return "+".join(reasons)
            continue  # responses may change the page: look again
        page_now, navigations_now = current()
        if quiet == "evaluate-failed" or quiet in ("quiet", "timeout", "page-closed") and page_now is page and navigations_now == seen_navigations and page.url == seen_url:
            reasons.append(quiet)
            return "+".join(reasons)
        if time.monotonic() >= deadline:
            reasons.append("timeout")
            return "+".join(reasons)
