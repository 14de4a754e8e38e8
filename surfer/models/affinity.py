"""A session's model server: every call of one run — policy, localizer and
validator — goes to the server the session was placed on (servers.py), so
the prefix its requests share stays cached there.

A run opens a `ModelSession` (the agent does, or a batch before it builds the
agent); the session lives in a context variable, so the backends that serve
its roles find it without being told, and the HTTP backend names it to the
server in the `X-Surfer-Session` header (a proxy may route on it; the
stand-in server records it), and at a server with several data-parallel ranks
the rank the session keeps there (data_parallel.py). The session also carries the policy its calls go to
(`policy`: an adapter's name and version, adapters.py), fixed for its whole
run. A `PlacedBackend` is the backend of the roles
that use the configured servers: on a session's first call it places the
session (unless the batch did), then sends every call to that server's own
backend. A server that fails the session past `--server-wait` is given up
and the call goes on at another server (the session moves, its run kept).

    with model_session("task-7"):
        await placed.complete(request)      # placed on first use; every later call: the same server
"""

from __future__ import annotations

import contextvars
import re
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

from surfer.core.errors import ModelServerUnreachable

from .adapters import PolicyRef
from .backend import Completion, ModelBackend, ModelRequest
from .data_parallel import RANK_HEADER, RankHold, rank_for
from .endpoint import Endpoint
from .servers import Lease, Server, ServerPool, ServerSpec, server_pool
from .tokens_in import server_root

SESSION_HEADER = "X-Surfer-Session"
_HEADER_SAFE = "".join(chr(c) for c in range(32, 127) if chr(c) != "%")  # printable ASCII stays as it is


class ModelSession:
    """One run's model session: its id, per pool of servers its lease, and the policy its calls go to
    (None: each role's configured model)."""

    def __init__(self, session_id: str, policy: PolicyRef | None = None) -> None:
        self.id = session_id
        self.leases: dict[int, Lease] = {}
        self.ranks: dict[str, RankHold] = {}  # per endpoint with several data-parallel ranks: the one it keeps
        self.policy = policy

    def lease(self, pool: ServerPool) -> Lease | None:
        return self.leases.get(id(pool))

    def hold(self, lease: Lease) -> None:
        self.leases[id(lease.pool)] = lease

    @property
    def header(self) -> dict[str, str]:
        """The header that names the session to a server: its id, with what HTTP cannot carry in a
        header (letters beyond ASCII, as in a batch task id or a QA case named in Japanese, and '%')
        percent-encoded as UTF-8, and so are spaces at its ends (a header value cannot begin or end with one: an
        id such as 'q1 ' failed every model call as an unreachable server)."""
        value = quote(self.id, safe=_HEADER_SAFE)
        return {SESSION_HEADER: re.sub(r"^ +| +$", lambda spaces: "%20" * len(spaces.group()), value)}

    def rank_at(self, base_url: str) -> int | None:
        """The data-parallel rank this session keeps at the server at `base_url` (taken on its first request
        there); None where the server has one rank (data_parallel.py)."""
        return rank_for(self, base_url)

    def headers_at(self, base_url: str, keep_rank: bool = True) -> dict[str, str]:
        """What names the session to the server at `base_url`: its header, and (with `keep_rank`) the rank it
        keeps there, where the server has several."""
        headers = self.header
        rank = self.rank_at(base_url) if keep_rank else None
        if rank is not None:
            headers[RANK_HEADER] = str(rank)
        return headers

    @property
    def data_parallel_rank(self) -> int | None:
        """The rank it kept at its server (with several servers, the one it is on; else the first it asked):
        what records show. None: no server with several ranks."""
        held = {root: hold.rank for root, hold in self.ranks.items()}
        server = self.server
        if server is not None:
            return held.get(server_root(server.base_url))
        return next(iter(held.values()), None)

    @property
    def server(self) -> Server | None:
        """The server of its (first) lease: what displays show."""
        return next((lease.server for lease in self.leases.values()), None)

    @property
    def moves(self) -> int:
        return sum(lease.moves for lease in self.leases.values())

    def release(self) -> None:
        for lease in self.leases.values():
            lease.pool.release(lease)
        for hold in self.ranks.values():
            hold.release()


_SESSION: contextvars.ContextVar[ModelSession | None] = contextvars.ContextVar("surfer_model_session", default=None)


def current_session() -> ModelSession | None:
    """The model session of the run this code serves (None outside a run)."""
    return _SESSION.get()


def session_policy() -> PolicyRef | None:
    """The policy of the run this code serves (None: outside a run, or no policy chosen)."""
    session = _SESSION.get()
    return session.policy if session is not None else None


@contextmanager
def model_session(session_id: str, policy: PolicyRef | None = None) -> Iterator[ModelSession]:
    """The run's model session: a new one (its calls going to `policy`), released at the end, unless one
    is open already (a batch opened it, placed it and chose its policy, before it built the agent)."""
    current = _SESSION.get()
    if current is not None:
        yield current
        return
    session = ModelSession(session_id, policy)
    token = _SESSION.set(session)
    try:
        yield session
    finally:
        _SESSION.reset(token)
        session.release()
        for keeper in list(_KEEPERS):
            keeper.forget(session.id)


_KEEPERS: "weakref.WeakSet[Any]" = weakref.WeakSet()


def forget_when_sessions_end(keeper: Any) -> None:
    """`keeper.forget(session_id)` runs when each model session ends (what a backend keeps per session:
    token_chain.py's conversations)."""
    _KEEPERS.add(keeper)


class PlacedBackend(ModelBackend):
    """The backend of roles that use the configured servers (see the module docstring): `connect(endpoint)`
    makes each server's own backend (http.py's). `model` / `api_key`: a role's own, instead of each
    server's; `profile`: the sessions it places itself go to servers of that profile (None: any)."""

    def __init__(self, specs: list[ServerSpec], connect: Callable[[Endpoint], ModelBackend], mode: str = "session", *,
                 model: str | None = None, api_key: str | None = None, profile: str | None = None,
                 local_node: set[str] | None = None) -> None:
        self.specs = specs
        self.connect = connect
        self.mode = mode
        self.profile = profile
        self.local_node = local_node
        self._override = {k: v for k, v in (("model", model), ("api_key", api_key)) if v}
        self._backends: dict[str, ModelBackend] = {}

    @property
    def pool(self) -> ServerPool:
        """The pool of this event loop (one per loop and server list: servers.py)."""
        return server_pool(self.specs, self.mode, self.local_node)

    @property
    def label(self) -> str:
        model = self._override.get("model") or self.specs[0].endpoint.model
        how = "per session" if self.mode == "session" else self.mode
        return f"{model} @ {len(self.specs)} servers ({how})"

    def backend(self, server: Server) -> ModelBackend:
        """The HTTP backend of `server` (with this role's model and key)."""
        key = server.spec.key
        if key not in self._backends:
            self._backends[key] = self.connect(server.spec.endpoint.model_copy(update=self._override))
        return self._backends[key]

    async def lease(self) -> Lease | None:
        """The running session's lease, placing the session on first use (None: a call outside any run,
        which goes to the server with the most room)."""
        session = current_session()
        pool = self.pool
        if session is None:
            return None
        lease = session.lease(pool)
        if lease is None:
            lease = await pool.place(self.profile, session.id)
            session.hold(lease)
        return lease

    async def _on_server(self, call: Any) -> Any:
        """`call(backend)` at the session's server; at another one when that server is lost."""
        pool = self.pool
        if self.mode != "session":
            return await call(self.backend(pool.next_server(self.profile)))
        lease = await self.lease()
        if lease is None:
            await pool.refresh()
            server = pool.choose(self.profile)
            if server is None:
                raise ModelServerUnreachable(pool.none_left(self.profile))
            return await call(self.backend(server))
        while True:
            if lease.server.lost_since is not None:  # given up while this session was busy elsewhere: no second wait
                pool.move(lease, ModelServerUnreachable(f"{lease.server.label} was given up"))
            try:
                return await call(self.backend(lease.server))
            except ModelServerUnreachable as exc:
                if not pool.move(lease, exc):
                    raise ModelServerUnreachable(f"{pool.none_left(lease.server.spec.profile)}. The last one: {exc}") from None

    async def complete(self, request: ModelRequest) -> Completion:
        return await self._on_server(lambda backend: backend.complete(request))  # type: ignore[no-any-return]

    async def check(self) -> None:
        await self._on_server(lambda backend: backend.check())

    async def check_tokens(self) -> None:
        await self._on_server(lambda backend: backend.check_tokens())

    async def aclose(self) -> None:
        backends, self._backends = list(self._backends.values()), {}
        for backend in backends:
            await backend.aclose()
        await self.pool.aclose()
