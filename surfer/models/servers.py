"""Several model servers for one batch: where each new session goes, and what
happens to a server that goes away.

A session is placed on one server when it starts and keeps it for its whole
run (surfer/models/affinity.py routes its calls), so the prefix its requests
share stays cached there. Placement chooses the server with the most room:
the fewest sessions placed on it plus requests its `/metrics` says are
waiting (vLLM's or SGLang's, one vocabulary: metrics.py), divided by its
weight. A server whose outage the sessions are holding through (outage.py)
takes no new sessions; one that did not come back within `--server-wait` is
*lost*: its sessions move to another server of the same profile (their cache
is lost, their runs are kept), and it is probed until it answers, then takes
new sessions again.

    pool = server_pool([ServerSpec(Endpoint(base_url=a), "holotron"), ServerSpec(Endpoint(base_url=b), "holotron")])
    lease = await pool.place()          # the server with the most room
    pool.release(lease)                 # the session ended

One pool per (event loop, server list): the sessions of one process, a batch
and the SDK's agents alike, count on one tally (as outage.py's watches).
`mode="round-robin-per-request"` is the benchmarks' naive load balancer: each
request to the next server, with no affinity (every session's prefix lost).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Literal

from surfer.core.errors import ModelServerUnreachable

from .endpoint import Endpoint, shown_url
from .outage import FIRST_PROBE, LONGEST_PROBE, PROBE_TIMEOUT, again, watch_of

log = logging.getLogger(__name__)

Placement = Literal["session", "round-robin-per-request"]
PLACEMENTS: tuple[str, ...] = ("session", "round-robin-per-request")
METRICS_AGE = 1.0  # seconds a /metrics reading of the servers serves placement before it is read again
METRICS_TIMEOUT = 2.0


@dataclass(frozen=True)
class ServerSpec:
    """One model server of several: where it is, what it serves, its share of the sessions, and (with
    --ray) the node whose sessions alone may use it."""

    endpoint: Endpoint
    profile: str
    weight: float = 1.0
    node: str | None = None

    @property
    def key(self) -> str:
        return "|".join((self.endpoint.model_dump_json(), self.profile, repr(self.weight), self.node or ""))

    @property
    def metrics_url(self) -> str:
        return self.endpoint.base_url.rstrip("/").removesuffix("/v1") + "/metrics"


@dataclass
class Server:
    """A server's state as this process sees it."""

    index: int  # 1-based, in the configured order (what messages and displays call it)
    spec: ServerSpec
    sessions: int = 0  # sessions placed on it now
    placed: int = 0  # sessions placed on it in all (moves included)
    moved_away: int = 0  # sessions that left it for another server
    waiting: float = 0.0  # requests waiting at the server (its last /metrics reading)
    running: float | None = None
    lost_since: float | None = None  # event-loop time it was given up on (None: not lost)
    metrics: bool = True  # read its /metrics (False: a node-local server the driver cannot reach)
    loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)  # its pool's (displays read from threads)
    _probe: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        return self.spec.endpoint.base_url

    @property
    def label(self) -> str:
        return f"server {self.index} ({shown_url(self.base_url)})"

    @property
    def state(self) -> str:
        """up, holding (an outage its sessions wait through) or lost (given up on; probed)."""
        if self.lost_since is not None:
            return "lost"
        watch = watch_of(self.base_url, self.loop)
        return "holding" if watch is not None and watch.down else "up"

    def load(self) -> float:
        return (self.sessions + self.waiting) / self.spec.weight


@dataclass
class Lease:
    """A session's place: the server its calls go to (it changes only when that server is lost)."""

    pool: "ServerPool"
    server: Server
    session: str = ""
    moves: int = 0
    released: bool = False


async def _answers(endpoint: Endpoint, timeout: float) -> bool:
    """Whether the server at `endpoint` answers /models (json_http.answers)."""
    from .json_http import JsonClient, answers

    client = JsonClient(endpoint.base_url, endpoint.api_key, timeout)
    try:
        return await answers(lambda: client.request("GET", "models", timeout))
    finally:
        await client.aclose()


class ServerPool:
    """The servers of one batch (or agent) and their sessions (made in the event loop that uses it); see
    the module docstring. `local_node`:
    the names of this machine's Ray node (its IP address, its hostname): servers of another node are
    left out; None: a driver, which uses every server and reads no /metrics of a node-local one."""

    def __init__(self, specs: list[ServerSpec], mode: str = "session", local_node: set[str] | None = None) -> None:
        if mode not in PLACEMENTS:
            from surfer.core.errors import ConfigError

            raise ConfigError(f"server placement must be one of {', '.join(PLACEMENTS)}, got {mode!r}")
        self.mode = mode
        loop = asyncio.get_running_loop()
        self.servers = [Server(n, spec, metrics=spec.node is None or local_node is not None, loop=loop)
                        for n, spec in enumerate(specs, 1) if local_node is None or spec.node is None or spec.node in local_node]
        self._read_at = float("-inf")
        self._refresh: tuple[asyncio.AbstractEventLoop, asyncio.Task[None]] | None = None
        self._client: Any = None
        self._turn = 0  # round-robin-per-request's next server

    # -- placement -------------------------------------------------------------------

    def candidates(self, profile: str | None = None, node: set[str] | None = None,
                   exclude: Server | None = None) -> list[Server]:
        """Servers that take new sessions now (of `profile`; usable from `node`): those up, else (every
        one in an outage) those its sessions hold for; never a lost one."""
        usable = [s for s in self.servers if s is not exclude and s.lost_since is None
                  and (profile is None or s.spec.profile == profile)
                  and (s.spec.node is None or node is None or s.spec.node in node)]
        up = [s for s in usable if s.state == "up"]
        return up or usable

    def choose(self, profile: str | None = None, node: set[str] | None = None, exclude: Server | None = None) -> Server | None:
        """The server with the most room (see the module docstring); None when none takes sessions."""
        chosen = self.candidates(profile, node, exclude)
        if not chosen:
            return None
        return min(chosen, key=lambda s: (s.load(), s.sessions / s.spec.weight, s.index))

    async def place(self, profile: str | None = None, session: str = "", *, node: set[str] | None = None,
                    index: int | None = None) -> Lease:
        """A new session's lease: the server with the most room (`index`: that server, e.g. where a Ray
        driver placed it). ModelServerUnreachable when no server takes sessions."""
        if index is not None:
            server = next((s for s in self.servers if s.index == index), None)
            if server is None:
                raise ModelServerUnreachable(f"no server {index} here (this node has {len(self.servers)})")
            if server.lost_since is not None:  # placed where this process has given the server up: another one
                server = self.choose(server.spec.profile, node, exclude=server) or server
        else:
            await self.refresh()
            server = self.choose(profile, node)
            if server is None:
                raise ModelServerUnreachable(self.none_left(profile))
        server.sessions += 1
        server.placed += 1
        return Lease(self, server, session)

    def release(self, lease: Lease) -> None:
        if not lease.released:
            lease.released = True
            lease.server.sessions -= 1

    def next_server(self, profile: str | None = None) -> Server:
        """round-robin-per-request: the next server in turn that takes requests."""
        chosen = self.candidates(profile) or [s for s in self.servers if profile is None or s.spec.profile == profile]
        if not chosen:
            raise ModelServerUnreachable(self.none_left(profile))
        self._turn += 1
        return chosen[self._turn % len(chosen)]

    def move(self, lease: Lease, failure: BaseException) -> bool:
        """`lease`'s server failed the session past --server-wait: give it up (probed until it answers)
        and move the session to another server of its profile. False when there is none."""
        failed = lease.server
        self.lose(failed, failure)
        target = self.choose(failed.spec.profile, exclude=failed)
        if target is None:
            return False
        failed.sessions -= 1
        failed.moved_away += 1
        target.sessions += 1
        target.placed += 1
        lease.server = target
        lease.moves += 1
        log.warning("session %s moves from %s to %s (its prefix cache is lost, its run goes on)",
                    lease.session or "?", failed.label, target.label)
        return True

    def lose(self, server: Server, failure: BaseException) -> None:
        """Take `server` out of placement until it answers again (a probe in the background)."""
        if server.lost_since is not None:
            return
        loop = asyncio.get_running_loop()
        server.lost_since = loop.time()
        log.warning("%s is out of placement: %s", server.label, failure)
        server._probe = loop.create_task(self._probe_until_back(server), name=f"surfer-server-probe {server.base_url}")

    async def _probe_until_back(self, server: Server) -> None:
        delay = FIRST_PROBE
        while True:
            await asyncio.sleep(delay)
            try:
                back = await _answers(server.spec.endpoint, PROBE_TIMEOUT)
            except Exception:  # noqa: BLE001 - a probe that fails in any way means: not back yet
                back = False
            if back:
                break
            delay = min(LONGEST_PROBE, delay * 2)
        server.lost_since = None
        server._probe = None
        log.warning("%s answers again: it takes new sessions", server.label)

    def none_left(self, profile: str | None) -> str:
        which = f" of profile {profile}" if profile else ""
        states = ", ".join(f"{s.label}: {s.state}" for s in self.servers) or "none usable on this node"
        return (f"no model server{which} takes sessions ({states}); nothing was recorded as finished because of it: "
                f"{again(several=True)}")

    # -- what the servers say ------------------------------------------------------------

    async def refresh(self, max_age: float = METRICS_AGE) -> None:
        """Read every server's /metrics (waiting and running requests) when the last reading is older
        than `max_age`; concurrent callers share one reading."""
        if len(self.servers) < 2 or self.mode != "session" or time.monotonic() - self._read_at < max_age:
            return
        loop = asyncio.get_running_loop()
        if self._refresh is None or self._refresh[0] is not loop or self._refresh[1].done():
            self._refresh = (loop, loop.create_task(self._read_all()))
        await asyncio.shield(self._refresh[1])

    async def _read_all(self) -> None:
        from .json_http import http_library, proxied_client
        from .metrics import read_metrics

        readable = [s for s in self.servers if s.metrics]
        if self._client is None:
            url = readable[0].spec.metrics_url if readable else ""
            self._client = proxied_client(http_library().AsyncClient, url, timeout=METRICS_TIMEOUT)
        readings = await asyncio.gather(*(read_metrics(self._client, s.spec.metrics_url) for s in readable))
        for server, values in zip(readable, readings):
            server.waiting = (values or {}).get("vllm:num_requests_waiting", 0.0)
            server.running = (values or {}).get("vllm:num_requests_running")
        self._read_at = time.monotonic()

    def snapshot(self) -> list[dict[str, Any]]:
        """Each server's state for displays and metrics.jsonl."""
        return [{"server": s.index, "base_url": shown_url(s.base_url), "profile": s.spec.profile, "weight": s.spec.weight,
                 "state": s.state, "sessions": s.sessions, "placed": s.placed, "moved_away": s.moved_away,
                 "waiting": s.waiting, "running": s.running} for s in self.servers]

    async def aclose(self) -> None:
        """Close the /metrics client (made again on the next reading); a lost server's probe goes on
        (the event loop's end cancels it)."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


# One pool per (event loop, server list): every agent and batch of a process counts on one tally.
_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, ServerPool]] = weakref.WeakKeyDictionary()


def server_pool(specs: list[ServerSpec], mode: str = "session", local_node: set[str] | None = None) -> ServerPool:
    """The pool of `specs` in this event loop."""
    key = "\n".join([mode, ",".join(sorted(local_node or ())), *(s.key for s in specs)])
    pools = _POOLS.setdefault(asyncio.get_running_loop(), {})
    if key not in pools:
        pools[key] = ServerPool(specs, mode, local_node)
    return pools[key]
