"""Backpressure on a model server: a cap on in-flight requests, independent
of how many agent sessions share the backend.

    shared = InflightLimit(OpenAICompatibleBackend(endpoint), max_inflight=32)
    Agent(config, backend=shared, ...)   # 100 sessions, at most 32 requests at once
"""

from __future__ import annotations

import asyncio

from .backend import Completion, ModelBackend, ModelRequest


class WrappedBackend(ModelBackend):
    """A backend around `inner`: checking and closing pass through to it."""

    inner: ModelBackend

    async def check(self) -> None:
        await self.inner.check()

    async def check_tokens(self) -> None:
        await self.inner.check_tokens()

    async def aclose(self) -> None:
        await self.inner.aclose()


class InflightLimit(WrappedBackend):
    """Wraps a backend; at most `max_inflight` `complete` calls run at once,
    the rest wait their turn (FIFO). Records how many ran and the peak."""

    def __init__(self, inner: ModelBackend, max_inflight: int) -> None:
        if max_inflight < 1:
            raise ValueError(f"max_inflight must be at least 1, got {max_inflight}")
        self.inner = inner
        self.max_inflight = max_inflight
        self._slots = asyncio.Semaphore(max_inflight)
        self.inflight = 0
        self.peak_inflight = 0
        self.requests = 0
        self.waiting = 0

    async def complete(self, request: ModelRequest) -> Completion:
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.inflight += 1
        self.peak_inflight = max(self.peak_inflight, self.inflight)
        try:
            return await self.inner.complete(request)
        finally:
            self.inflight -= 1
            self.requests += 1
            self._slots.release()

    @property
    def label(self) -> str:
        return f"{self.inner.label} (≤{self.max_inflight} in flight)"
