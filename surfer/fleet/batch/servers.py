"""A batch's model servers: one backend per endpoint for all its sessions, and
with several servers (`servers = [...]`, `--base-url` more than once) where
each session goes. A session is placed when its task starts — on the server
with the most room, or on the one a Ray driver chose — and keeps it for its
whole run, crash retries included; its agent is built with that server's
profile (surfer/models/servers.py places, surfer/models/affinity.py routes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from surfer.agent.config import AgentConfig
from surfer.models.adapters import PolicyRef
from surfer.models.affinity import ModelSession, PlacedBackend, model_session
from surfer.models.backend import ModelBackend
from surfer.models.limits import WrappedBackend
from surfer.models.servers import ServerPool


def shared_backends(
    config: AgentConfig, max_inflight: int | None, backend: ModelBackend | None = None, *,
    profile: str | None = None, local_node: set[str] | None = None,
) -> dict[str, ModelBackend]:
    """One backend per distinct endpoint (or the given one), each capped at `max_inflight`
    requests in flight, mapped per role; with several servers, the roles without an endpoint of
    their own share one placed backend (sessions it places itself: on servers of `profile`,
    default the configuration's)."""
    from surfer.agent.backends import role_backends
    from surfer.models.limits import InflightLimit

    if backend is not None:
        shared: ModelBackend = InflightLimit(backend, max_inflight) if max_inflight else backend
        return dict.fromkeys(("policy", "localizer", "validator"), shared)
    return role_backends(config, profile=profile or config.profile, max_inflight=max_inflight, local_node=local_node)


def placed_of(backends: dict[str, ModelBackend]) -> PlacedBackend | None:
    """The placed backend among a batch's backends (under its in-flight caps), if any."""
    for backend in backends.values():
        while isinstance(backend, WrappedBackend) and not isinstance(backend, PlacedBackend):
            backend = backend.inner
        if isinstance(backend, PlacedBackend):
            return backend
    return None


class BatchServers:
    """Where a batch's sessions go; see the module docstring."""

    def __init__(self, backends: dict[str, ModelBackend]) -> None:
        self.placed = placed_of(backends)
        self._pool: ServerPool | None = None  # the one of the loop the batch runs in (displays read it from threads)

    @property
    def pool(self) -> ServerPool | None:
        """The pool of the batch's event loop (None: one server); called first inside the loop."""
        if self._pool is None and self.placed is not None and self.placed.mode == "session":
            self._pool = self.placed.pool
        return self._pool

    @asynccontextmanager
    async def session(self, task_id: str, server: int | None = None,
                      policy: PolicyRef | None = None) -> AsyncIterator[tuple[ModelSession, str | None]]:
        """The task's model session, placed now (on `server`, its number, when given), its calls going to
        `policy` (an adapter; None: the configured model): (the session, the profile of its server; None
        with one server)."""
        with model_session(task_id, policy) as opened:
            pool = self.pool
            profile = None
            if pool is not None:
                lease = await pool.place(None, task_id, index=server)
                opened.hold(lease)
                profile = lease.server.spec.profile
            yield opened, profile

    def snapshot(self) -> list[dict[str, Any]]:
        """Each server's sessions, waiting requests and state (nothing with one server, or before the
        first session)."""
        return self._pool.snapshot() if self._pool is not None else []

    async def refresh(self) -> None:
        pool = self.pool
        if pool is not None:
            await pool.refresh()
