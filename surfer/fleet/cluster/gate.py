"""A cluster-wide cap on model requests in flight: one Ray actor holding the
slots, and a backend wrapper that takes one before each request.

Each request holds a token; `release(token)` frees it whether it was granted,
still waiting, or not even seen yet (a caller cancelled before its acquire
arrived), so a cancelled session never leaks a slot. `forget(holder)` frees
everything a dead worker held.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from typing import Any

from surfer.models.backend import Completion, ModelBackend, ModelRequest
from surfer.models.limits import WrappedBackend


class InflightGate:
    """The slots (run as an async Ray actor: every call shares one event loop)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held: dict[str, str] = {}  # token -> holder
        self.waiting: OrderedDict[str, tuple[str, asyncio.Future[bool]]] = OrderedDict()
        self.released_early: set[str] = set()
        self.peak = 0
        self.requests = 0

    async def acquire(self, holder: str, token: str) -> bool:
        if token in self.released_early:
            self.released_early.discard(token)
            return False
        self.requests += 1
        if len(self.held) < self.limit and not self.waiting:
            self._hold(token, holder)
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.waiting[token] = (holder, future)
        try:
            return await future
        finally:
            self.waiting.pop(token, None)

    def release(self, token: str) -> None:
        if self.held.pop(token, None) is not None:
            self._grant()
            return
        waiter = self.waiting.pop(token, None)
        if waiter is not None:
            if not waiter[1].done():
                waiter[1].set_result(False)
        else:
            self.released_early.add(token)

    def forget(self, holder: str) -> int:
        """Free the slots of a worker that died; returns how many it held."""
        tokens = [t for t, h in self.held.items() if h == holder]
        for token in tokens:
            del self.held[token]
        for token, (h, future) in list(self.waiting.items()):
            if h == holder and not future.done():
                future.set_result(False)
        self._grant()
        return len(tokens)

    def stats(self) -> dict[str, Any]:
        return {"limit": self.limit, "peak": self.peak, "requests": self.requests, "inflight": len(self.held)}

    def _hold(self, token: str, holder: str) -> None:
        self.held[token] = holder
        self.peak = max(self.peak, len(self.held))

    def _grant(self) -> None:
        while self.waiting and len(self.held) < self.limit:
            token, (holder, future) = self.waiting.popitem(last=False)
            if not future.done():
                self._hold(token, holder)
                future.set_result(True)


class ClusterInflightLimit(WrappedBackend):
    """Wraps a backend on a worker: each `complete` holds one of the gate's slots."""

    def __init__(self, inner: ModelBackend, gate: Any, holder: str) -> None:
        self.inner = inner
        self.gate = gate
        self.holder = holder

    async def complete(self, request: ModelRequest) -> Completion:
        token = uuid.uuid4().hex
        try:
            await self.gate.acquire.remote(self.holder, token)
        except BaseException:
            self.gate.release.remote(token)
            raise
        try:
            return await self.inner.complete(request)
        finally:
            self.gate.release.remote(token)

    @property
    def label(self) -> str:
        return f"{self.inner.label} (cluster-wide cap)"


def gated(backends: dict[str, ModelBackend], gate: Any, holder: str) -> dict[str, ModelBackend]:
    """The per-role backends with each distinct one behind the gate."""
    wrapped: dict[int, ModelBackend] = {}
    return {role: wrapped.setdefault(id(b), ClusterInflightLimit(b, gate, holder)) for role, b in backends.items()}
