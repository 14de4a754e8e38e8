"""Riding out a model server's outage: one watch per server, shared by the sessions of a process.

When a model call finds the server gone (connection refused or reset, HTTP 502 / 503 / 504,
vLLM's dead engine), the caller holds in `ServerWatch.hold()` instead of failing its task. The
first caller starts one probe of the server's `/models` with back-off (1 s, doubling to 15 s);
every caller waits for it, and when the server answers again they all send their call again.
A caller that has waited `limit` seconds since the outage began gets `ModelServerUnreachable`,
which ends its run as `error` / `unreachable`: never a final status, so a batch stops (exit 3)
and a plain re-run does the task.

    watch = server_watch("http://127.0.0.1:8000/v1", probe)   # probe(timeout) -> bool: it answers
    await watch.hold(limit=300)                                # returns once it answers again
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone

from surfer.core.errors import ModelServerUnreachable
from surfer.core.surface import caller, setting
from .endpoint import shown_url

log = logging.getLogger(__name__)

FIRST_PROBE, LONGEST_PROBE = 1.0, 15.0  # seconds between probes: doubling from the first to the longest
PROBE_TIMEOUT = 5.0
# What to do once the server is back, said by every outage error: a batch resumes where it stopped, a single
# run starts over (and a run directory is written only once: `surfer run --out DIR` refuses a DIR that holds one)
AGAIN = ("run the same command again once it is back (a batch resumes where it stopped; `surfer run` starts the "
         "task over, into a new --out directory if it had one)")
AGAIN_PYTHON = ("run the task again once it is back (a run starts the task over, into a new out_dir if it had one; "
                "a batch resumes where it stopped)")


def again(several: bool = False) -> str:
    """What to do after an outage, in the caller's words (the command line's, or Python's: core/surface.py);
    `several`: once one of several servers is back."""
    advice = AGAIN if caller() == "cli" else AGAIN_PYTHON
    return advice.replace("it is back", "one is back") if several else advice

Probe = Callable[[float], Awaitable[bool]]


class ServerWatch:
    """The state of one server as this process sees it: up, or down since a moment."""

    def __init__(self, base_url: str, probe: Probe) -> None:
        self.base_url = base_url
        self._probe = probe
        self.down_since: float | None = None  # event-loop time the outage began
        self.down_since_wall: datetime | None = None
        self._up = asyncio.Event()
        self._up.set()
        self._watcher: asyncio.Task[None] | None = None
        self._holding = 0
        self.answered = False  # the server answered a check in this process (so a refusal later is an outage)
        self.outages = 0  # outages seen (for reports)
        self.held_seconds = 0.0  # seconds callers spent held, summed

    @property
    def down(self) -> bool:
        return not self._up.is_set()

    async def hold(self, limit: float) -> float:
        """Wait until the server answers again; the seconds waited. Raises ModelServerUnreachable
        once the outage has lasted `limit` seconds (counted from its start, for every caller)."""
        loop = asyncio.get_running_loop()
        if self.down_since is None:
            self.down_since, self.down_since_wall = loop.time(), datetime.now(timezone.utc)
            self.outages += 1
            self._up.clear()
            log.warning("model server at %s stopped answering; holding the sessions (up to %g s)", self.base_url, limit)
            self._watcher = asyncio.create_task(self._watch(), name=f"surfer-server-watch {self.base_url}")
        started = loop.time()
        self._holding += 1
        try:
            left = self.down_since + limit - loop.time()
            if left > 0:
                try:
                    await asyncio.wait_for(self._up.wait(), left)
                except TimeoutError:
                    pass
        finally:
            self._holding -= 1
            waited = loop.time() - started
            self.held_seconds += waited
            back = self._up.is_set()
            if not back and not self._holding:
                self._stop_watching()  # nobody waits any more: the next caller starts a fresh outage
        if not back:
            raise ModelServerUnreachable(
                f"the model server at {shown_url(self.base_url)} has not answered for {limit:g} s ({setting('server_wait')}); "
                f"nothing was recorded as finished because of it: {again()}"
            )
        return waited

    async def _watch(self) -> None:
        delay = FIRST_PROBE
        while True:
            await asyncio.sleep(delay)
            try:
                answered = await self._probe(PROBE_TIMEOUT)
            except Exception:  # a probe that fails in any way means: not back yet
                answered = False
            if answered:
                break
            delay = min(LONGEST_PROBE, delay * 2)
        assert self.down_since is not None
        log.warning("model server at %s answers again after %.1f s", self.base_url,
                    asyncio.get_running_loop().time() - self.down_since)
        self._watcher = None
        self._up_again()

    def _stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None
        self._up_again()

    def _up_again(self) -> None:
        self.down_since = self.down_since_wall = None
        self._up.set()


# One watch per (event loop, server): sessions of one process share it; tests run many loops.
_WATCHES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, ServerWatch]] = weakref.WeakKeyDictionary()


def server_watch(base_url: str, probe: Probe) -> ServerWatch:
    """The watch of `base_url` in this event loop; it probes with the latest caller's `probe`
    (a backend closed since, e.g. an earlier SDK run's, must not be the one that probes)."""
    watches = _WATCHES.setdefault(asyncio.get_running_loop(), {})
    key = base_url.rstrip("/")
    if key not in watches:
        watches[key] = ServerWatch(key, probe)
    else:
        watches[key]._probe = probe
    return watches[key]


def watch_of(base_url: str, loop: asyncio.AbstractEventLoop | None = None) -> ServerWatch | None:
    """The watch of `base_url` in this event loop (or `loop`, e.g. from a display's thread), if a call made one."""
    return _WATCHES.get(loop or asyncio.get_running_loop(), {}).get(base_url.rstrip("/"))


def answered_before(base_url: str) -> bool:
    """Whether `base_url` answered a call earlier in this event loop."""
    watch = watch_of(base_url)
    return watch is not None and watch.answered


async def _not_yet(timeout: float) -> bool:
    return False


def vouch(base_url: str) -> None:
    """Another process saw `base_url` answer (a batch's driver, for its Ray workers): a refusal in
    this one is then an outage to hold, even before any call here has been answered."""
    server_watch(base_url, _not_yet).answered = True  # the first caller to hold brings its own probe


def outage_note() -> str | None:
    """'waiting for the model server at URL since HH:MM:SS' while a server of this loop is down
    (called off any loop, e.g. by a terminal display's refresh thread: of any open loop)."""
    try:
        groups = [_WATCHES.get(asyncio.get_running_loop(), {})]
    except RuntimeError:
        groups = [w for loop, w in list(_WATCHES.items()) if not loop.is_closed()]
    for watch in (watch for group in groups for watch in list(group.values())):
        if watch.down and watch.down_since_wall is not None:
            since = watch.down_since_wall.astimezone().strftime("%H:%M:%S")
            return f"waiting for the model server at {shown_url(watch.base_url)} since {since}"
    return None
