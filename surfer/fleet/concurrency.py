"""`--concurrency auto`: as many live sessions as the server's cache holds.

    job = Batch(config, tasks, out, concurrency="auto")     # SDK; CLI: surfer batch --concurrency auto

Every `interval` seconds the controller reads vLLM's `/metrics` (KV-cache
use, running / waiting requests, preemptions, prefix-cache hits) and the
batch's agent steps/s, then moves the number of live sessions:

- multiplicative decrease (× `decrease`) when the server is short of cache
  (KV use at or above `kv_high`, new preemptions, or, after an increase, the
  interval's prefix-cache hit rate fell below `hit_drop` of the last one's:
  the cache stopped keeping the sessions' prefixes), when requests queue at
  the server (more than `waiting_high` waiting per running one: deferred
  prefills or a full batch, where more sessions add waiting, not steps), or
  when steps/s (averaged over intervals) fell by more than `tolerance` after
  the last increase;
- additive increase (+`increase`) while every session slot is in use and
  none of that happened;
- otherwise it holds.

The prefix-hit rule is there because KV use misses that overflow. vLLM
counts only running requests' blocks in it, not the prefixes it keeps for
the next request, nor (for a hybrid model) the Mamba states a kept prefix
needs. With sessions 8 screenshots deep on one H100, Holo2 went from 32 to
48 sessions and its hit fell from 0.84 to 0.05 at a mean KV use of 0.15;
Holotron at 48 hit 0.00 at 0.63 (README, "The seeds' regime").

A lower limit takes effect as sessions finish (none is cancelled). A server
without vLLM's `/metrics` (another server, a hosted API) gets the fixed
`fallback` concurrency, and the batch says so.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

AUTO = "auto"


def parse_concurrency(value: str | int) -> int | str:
    """`--concurrency`: a positive integer or 'auto'."""
    from surfer.core.errors import ConfigError

    if isinstance(value, int) or str(value).strip().isdigit():
        number = int(value)
        if number < 1:
            raise ConfigError(f"--concurrency must be at least 1, got {number}")
        return number
    if str(value).strip().lower() == AUTO:
        return AUTO
    raise ConfigError(f"--concurrency takes a number of sessions or 'auto', got {value!r}")


class Slots:
    """A semaphore whose size can change while it is held."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.busy = 0
        self._changed = asyncio.Condition()

    async def __aenter__(self) -> "Slots":
        async with self._changed:
            await self._changed.wait_for(lambda: self.busy < self.limit)
            self.busy += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        async with self._changed:
            self.busy -= 1
            self._changed.notify_all()

    async def resize(self, limit: int) -> None:
        async with self._changed:
            self.limit = limit
            self._changed.notify_all()


@dataclass
class Decision:
    seconds: float  # since the controller started
    limit: int  # live sessions allowed from now on
    steps_per_s: float
    kv_cache_usage: float | None
    running: float | None
    waiting: float | None
    preempted: float
    reason: str
    prefix_hit: float | None = None  # over the interval


@dataclass
class AutoConcurrency:
    """The AIMD controller; see the module docstring. `steps()` returns the batch's steps so far."""

    metrics_url: str
    start: int = 4
    minimum: int = 1
    maximum: int = 256
    interval: float = 10.0
    increase: int = 2
    decrease: float = 0.7
    kv_high: float = 0.9
    waiting_high: float = 0.1  # waiting requests per running one that count as a queue at the server
    tolerance: float = 0.15
    hit_drop: float = 0.5  # after an increase, a prefix hit rate under this share of the last interval's is a short cache
    hit_floor: float = 0.3  # ... when the last interval's was at least this (a layout that reuses little has nothing to lose)
    smoothing: float = 0.5  # weight of the newest interval in the steps/s average
    fallback: int = 8
    decisions: list[Decision] = field(default_factory=list)

    @classmethod
    def for_endpoint(cls, base_url: str, **options: Any) -> "AutoConcurrency":
        root = base_url.rstrip("/").removesuffix("/v1")
        return cls(root + "/metrics", **options)

    async def read(self, client: Any) -> dict[str, float] | None:
        from surfer.models.metrics import read_metrics

        values = await read_metrics(client, self.metrics_url)
        if values is None:
            return None
        return values if "vllm:kv_cache_usage_perc" in values or "vllm:num_requests_running" in values else None

    async def control(self, slots: Slots, steps: Callable[[], int], client: Any) -> None:
        """Adjust `slots` every `interval` until cancelled."""
        from surfer.models.metrics import cache_hit_rate

        started = last_time = time.monotonic()
        last_steps = steps()
        last = await self.read(client) or {}
        last_rate: float | None = None
        last_hit: float | None = None
        last_change = "start"
        while True:
            await asyncio.sleep(self.interval)
            now = await self.read(client)
            if now is None:
                continue  # a busy server missed one reading
            clock = time.monotonic()
            measured = (steps() - last_steps) / max(1e-9, clock - last_time)
            rate = measured if last_rate is None else self.smoothing * measured + (1 - self.smoothing) * last_rate
            kv = now.get("vllm:kv_cache_usage_perc")
            waiting = now.get("vllm:num_requests_waiting", 0.0)
            preempted = now.get("vllm:num_preemptions", 0.0) - last.get("vllm:num_preemptions", 0.0)
            limit = slots.limit
            running = now.get("vllm:num_requests_running", 0.0)
            hit = cache_hit_rate(last, now)
            if (kv is not None and kv >= self.kv_high) or preempted > 0:
                limit = max(self.minimum, math.floor(limit * self.decrease))
                reason = f"cache short (KV {kv if kv is None else round(kv, 2)}, waiting {waiting:g}, preempted {preempted:g})"
                change = "decrease"
            elif (last_change == "increase" and hit is not None and last_hit is not None and last_hit >= self.hit_floor
                  and hit < last_hit * self.hit_drop):
                limit = max(self.minimum, math.floor(limit * self.decrease))
                reason = (f"cache short (prefix hit {last_hit:.2f} -> {hit:.2f} after an increase, "
                          f"KV {kv if kv is None else round(kv, 2)})")
                change = "decrease"
            elif waiting > self.waiting_high * max(1.0, running):
                # a queue (deferred prefills, or a full batch): more sessions add waiting, not steps
                limit = max(self.minimum, math.floor(limit * self.decrease))
                reason = f"requests queue at the server (waiting {waiting:g}, running {running:g}, KV {kv if kv is None else round(kv, 2)})"
                change = "decrease"
            elif last_change == "increase" and last_rate and rate < last_rate * (1 - self.tolerance):
                limit = max(self.minimum, math.floor(limit * self.decrease))
                reason = f"steps/s fell from {last_rate:.2f} to {rate:.2f} after an increase"
                change = "decrease"
            elif slots.busy >= slots.limit:
                limit = min(self.maximum, limit + self.increase)
                reason = "every slot in use, cache has room"
                change = "increase"
            else:
                reason, change = "slots to spare", "hold"
            await slots.resize(limit)
            self.decisions.append(Decision(round(clock - started, 2), limit, round(rate, 3), kv, running, waiting,
                                           preempted, reason, hit))
            last, last_steps, last_time, last_rate, last_change = now, steps(), clock, rate, change
            last_hit = hit if hit is not None else last_hit

    def summary(self) -> dict[str, Any]:
        limits = [d.limit for d in self.decisions]
        return {"mode": AUTO, "metrics": self.metrics_url, "start": self.start, "final": limits[-1] if limits else self.start,
                "decisions": [asdict(d) for d in self.decisions]}
