"""`--concurrency auto`: as many live sessions as the server's cache holds.

    job = Batch(config, tasks, out, concurrency="auto")     # SDK; CLI: surfer batch --concurrency auto

Every `interval` seconds the controller reads vLLM's `/metrics` (KV-cache
use, running / waiting requests, preemptions, prefix-cache hits) and the
batch's agent steps/s, then moves the number of live sessions:

- multiplicative decrease (× `decrease`) when the server is short of cache
  (KV use at or above `kv_high`, new preemptions, or the interval's
  prefix-cache hit rate below `hit_drop` of the best one so far, when that
  was at least `hit_floor`: the cache stopped keeping the sessions'
  prefixes; increases then stay below the size the running sessions'
  contexts had when that happened, the token ceiling, and wait until the
  cache kept them for `calm_intervals`), when requests queue at
  the server (more than `waiting_high` waiting per running one: deferred
  prefills or a full batch, where more sessions add waiting, not steps), or
  when steps/s (averaged over intervals) fell by more than `tolerance` after
  (or, when an interval counts few steps, by more than their counting noise,
  1/sqrt(steps): long steps on a busy GPU finish a handful per interval)
  the last increase;
- when the sessions' contexts grew past `park_at` of the token ceiling
  (append-only histories deepen every step), down to as many sessions as
  fit under `grow_below` of it;
- additive increase (+`increase`) while every session slot is in use and
  none of that happened, as far as sessions of today's mean context fit
  under `grow_below` of the token ceiling;
- otherwise it holds, and always for one interval after a decrease (until
  the sessions above the new limit have parked and the cache refilled).

The prefix-hit rule is there because KV use misses that overflow. vLLM
counts only running requests' blocks in it, not the prefixes it keeps for
the next request, nor (for a hybrid model) the Mamba states a kept prefix
needs. With sessions 8 screenshots deep on one H100, Holo2 went from 32 to
48 sessions and its hit fell from 0.84 to 0.05 at a mean KV use of 0.15;
Holotron at 48 hit 0.00 at 0.63 (docs/benchmarks/gpu-sessions.md).

A session's context is the largest request (prompt tokens) of its last step,
which a ParkingControl reads from its events. Where the sessions grow, a
ceiling counted in sessions is wrong both ways: a level that held shallow
sessions overflows deep ones, and sessions that start again shallow could be
more. Before the cache has fallen short, or where no request says its size,
a level that overflowed is the ceiling instead.

A lower limit takes effect at each session's next step boundary: the
newest sessions above it park there (none is cancelled; the time they wait
is not counted against their time limit) and go on, ahead of new sessions,
as slots free up. Until then the controller holds. A server
without vLLM's `/metrics` (another server, a hosted API) gets the fixed
`fallback` concurrency, and the batch says so.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from surfer.agent.control import RunControl
from surfer.core.deadline import pause_deadline

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
    """A semaphore whose size can change while it is held. Its holders are the
    tasks that entered it; when the limit falls below them, the newest ones
    `park` at their next step boundary (ParkingControl) and take a slot again,
    before any new session, once one is free."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.busy = 0
        self.parked = 0
        self._holders: list[object] = []  # in the order they took their slot
        self.contexts: dict[object, int] = {}  # each session's context in its last step (prompt tokens)
        self._changed = asyncio.Condition()

    async def __aenter__(self) -> "Slots":
        async with self._changed:
            await self._changed.wait_for(lambda: self.busy < self.limit and not self.parked)
            self._take(asyncio.current_task())
        return self

    async def __aexit__(self, *exc: object) -> None:
        async with self._changed:
            self.contexts.pop(asyncio.current_task(), None)
            self._give(asyncio.current_task())

    def _take(self, key: object) -> None:
        self.busy += 1
        self._holders.append(key)

    def _give(self, key: object) -> None:
        if key in self._holders:  # a session cancelled while parked holds none
            self._holders.remove(key)
            self.busy -= 1
        self._changed.notify_all()

    @property
    def over(self) -> int:
        """Sessions running above the limit (they park at their next step boundary)."""
        return max(0, self.busy - self.limit)

    def footprint(self) -> tuple[int, int]:
        """The running sessions' contexts in prompt tokens (what the server's cache must keep for their
        next requests), and how many sessions that counts (those that made a model call)."""
        known = [self.contexts[key] for key in self._holders if key in self.contexts]
        return sum(known), len(known)

    def must_park(self, key: object) -> bool:
        over = self.over
        return over > 0 and key in self._holders[-over:]

    async def park(self, key: object) -> float:
        """Give `key`'s slot back and wait for one (ahead of new sessions); the seconds it waited."""
        started = time.monotonic()
        async with self._changed:
            self._give(key)
            self.parked += 1
            try:
                await self._changed.wait_for(lambda: self.busy < self.limit)
            finally:
                self.parked -= 1
            self._take(key)
            self._changed.notify_all()  # new sessions may wait on `parked`
        return time.monotonic() - started

    async def resize(self, limit: int) -> None:
        async with self._changed:
            self.limit = limit
            self._changed.notify_all()


class ParkingControl(RunControl):
    """A batch session's RunControl under `--concurrency auto`: between steps, a session above the
    limit parks until a slot is free, and the time it waited is not its run's (its time limit moves
    by it). A lower limit so takes effect within a step, not when sessions end: in long sessions that
    is what lets the server's cache recover."""

    def __init__(self, slots: Slots) -> None:
        super().__init__()
        self.slots = slots
        self.key = asyncio.current_task()  # made in the drain worker that took the session's slot
        self._step_context = 0

    def observe(self, event: object) -> None:
        """A listener of the session's events: its context is the largest request of its last step
        (a continuing localizer's request holds the policy's whole conversation)."""
        from surfer.agent.events import ModelCalled

        if isinstance(event, ModelCalled) and event.call.usage.prompt_tokens:
            self._step_context = max(self._step_context, event.call.usage.prompt_tokens)
            self.slots.contexts[self.key] = self._step_context

    async def checkpoint(self) -> list[str]:
        self._step_context = 0
        if self.slots.must_park(self.key):
            pause_deadline(await self.slots.park(self.key))
        return await super().checkpoint()


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
    context_tokens: int | None = None  # the running sessions' contexts (Slots.footprint)


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
    hit_drop: float = 0.5  # a prefix hit rate under this share of the best interval's is a short cache
    hit_floor: float = 0.3  # ... when the best was at least this (a layout that reuses little has nothing to lose)
    calm_intervals: int = 2  # after the cache fell short, intervals it must keep the prefixes before an increase
    # shares of the contexts' size at which the cache fell short (the token ceiling): increases keep the
    # sessions under `grow_below`; when they grow past `park_at`, some park until they are under it again
    grow_below: float = 0.75
    park_at: float = 0.85
    smoothing: float = 0.5  # weight of the newest interval in the steps/s average
    fallback: int = 8
    clock: Callable[[], float] = time.monotonic  # when each reading came (steps/s)
    decisions: list[Decision] = field(default_factory=list)

    more_urls: tuple[str, ...] = ()  # several model servers: the /metrics of the others, read with the first

    @classmethod
    def for_endpoint(cls, base_url: str, **options: Any) -> "AutoConcurrency":
        root = base_url.rstrip("/").removesuffix("/v1")
        return cls(root + "/metrics", **options)

    @classmethod
    def for_servers(cls, config: Any, **options: Any) -> "AutoConcurrency":
        """Following the configuration's servers (AgentConfig): with several, their readings together
        (combine_readings: requests and tokens summed, the fullest cache's use)."""
        urls = [spec.metrics_url for spec in config.server_specs() if spec.node is None] or [config.server_specs()[0].metrics_url]
        return cls(urls[0], more_urls=tuple(urls[1:]), **options)

    async def read(self, client: Any) -> dict[str, float] | None:
        from surfer.models.metrics import combine_readings, read_metrics

        readings = [await read_metrics(client, url) for url in (self.metrics_url, *self.more_urls)]
        values = combine_readings([r for r in readings if r is not None])
        if values is None:
            return None
        return values if "vllm:kv_cache_usage_perc" in values or "vllm:num_requests_running" in values else None

    async def control(self, slots: Slots, steps: Callable[[], int], client: Any) -> None:
        """Adjust `slots` every `interval` until cancelled."""
        from surfer.models.metrics import cache_hit_rate

        started = last_time = self.clock()
        last_steps = steps()
        last = await self.read(client) or {}
        last_rate: float | None = None
        kept_hit: float | None = None  # the best interval hit rate: the cache keeping the sessions' prefixes
        ceiling: int | None = None  # the level at which it stopped keeping them: increases stay below it
        # the sessions' contexts (prompt tokens) at which it stopped keeping them: where sessions grow
        # longer, a level that held shallow sessions overflows deep ones, so this, not a number of
        # sessions, bounds them once the batch's requests say how large their contexts are
        token_ceiling: int | None = None
        last_footprint = 0
        short_before = False
        calm = self.calm_intervals  # intervals the cache kept the prefixes since it last fell short
        last_change = "start"
        while True:
            await asyncio.sleep(self.interval)
            now = await self.read(client)
            if now is None:
                continue  # a busy server missed one reading
            clock = self.clock()
            counted = steps() - last_steps
            measured = counted / max(1e-9, clock - last_time)
            rate = measured if last_rate is None else self.smoothing * measured + (1 - self.smoothing) * last_rate
            kv = now.get("vllm:kv_cache_usage_perc")
            waiting = now.get("vllm:num_requests_waiting", 0.0)
            preempted = now.get("vllm:num_preemptions", 0.0) - last.get("vllm:num_preemptions", 0.0)
            limit = slots.limit
            running = now.get("vllm:num_requests_running", 0.0)
            hit = cache_hit_rate(last, now)
            footprint, known = slots.footprint()
            per_session = footprint / known if known else 0.0
            # the contexts when the cache was first seen short (the end of that interval)
            short_from = last_footprint if short_before else footprint
            kept_hit = max(kept_hit or 0.0, hit) if hit is not None and slots.over == 0 else kept_hit
            short = (hit is not None and kept_hit is not None and kept_hit >= self.hit_floor
                     and hit < kept_hit * self.hit_drop)
            if (kv is not None and kv >= self.kv_high) or preempted > 0:
                limit = max(self.minimum, math.floor(limit * self.decrease))
                reason = f"cache short (KV {kv if kv is None else round(kv, 2)}, waiting {waiting:g}, preempted {preempted:g})"
                change = "decrease"
            elif slots.over or last_change == "decrease":
                # the last decrease has not taken effect yet (sessions park at their next step), or the
                # cache is still refilling after it: judge the new level from the next interval
                reason, change = f"settling ({slots.over} sessions above the limit, {slots.parked} parked)", "hold"
            elif short and (last_change == "increase" or short_before):
                # that level overflowed the cache: later increases stay below it. Right after an increase one
                # short interval says so; at a level that held before, it may be sessions starting or resuming
                # cold, so only a second one in a row lowers the limit
                if short_from:
                    token_ceiling = min(token_ceiling or short_from, short_from)
                else:
                    ceiling = min(ceiling or limit, limit)
                calm = 0
                limit = max(self.minimum, math.floor(limit * self.decrease))
                reason = (f"cache short (prefix hit {hit:.2f}, {kept_hit:.2f} while it kept the sessions' prefixes; "
                          f"KV {kv if kv is None else round(kv, 2)})")
                change = "decrease"
            elif waiting > self.waiting_high * max(1.0, running):
                # a queue (deferred prefills, or a full batch): more sessions add waiting, not steps
                limit = max(self.minimum, math.floor(limit * self.decrease))
                reason = f"requests queue at the server (waiting {waiting:g}, running {running:g}, KV {kv if kv is None else round(kv, 2)})"
                change = "decrease"
            elif last_change == "increase" and last_rate and rate < last_rate * (1 - self._noise(counted)):
                limit = max(self.minimum, math.floor(limit * self.decrease))
                reason = f"steps/s fell from {last_rate:.2f} to {rate:.2f} after an increase"
                change = "decrease"
            elif token_ceiling and per_session and footprint >= self.park_at * token_ceiling and limit > self.minimum:
                # the sessions grew (append-only histories): park some before the cache overflows again
                limit = max(self.minimum, min(limit - 1, math.floor(self.grow_below * token_ceiling / per_session)))
                reason = (f"the sessions' contexts reached {footprint:,} tokens, near the {token_ceiling:,} "
                          f"at which the cache fell short")
                change = "decrease"
            elif slots.busy >= slots.limit and calm < self.calm_intervals:
                reason, change = f"cache kept the prefixes {calm} of {self.calm_intervals} intervals since it fell short", "hold"
            elif slots.busy >= slots.limit:
                top = self.maximum if ceiling is None else min(self.maximum, ceiling - 1)
                room = (math.floor(self.grow_below * token_ceiling / per_session) if token_ceiling and per_session
                        else None)  # sessions of today's mean context that fit below the token ceiling
                if room is not None and room <= limit < top:
                    reason = (f"{limit + 1} sessions would hold about {per_session * (limit + 1):,.0f} tokens, over "
                              f"{self.grow_below:.0%} of the {token_ceiling:,} at which the cache fell short")
                    change = "hold"
                elif limit < top:
                    top = top if room is None else min(top, room)
                    limit = min(top, limit + self.increase)
                    reason, change = "every slot in use, cache has room", "increase"
                else:
                    reason = ("at the maximum" if ceiling is None or top == self.maximum
                              else f"below {ceiling} sessions, where the cache stopped keeping their prefixes")
                    change = "hold"
            else:
                reason, change = "slots to spare", "hold"
            await slots.resize(limit)
            self.decisions.append(Decision(round(clock - started, 2), limit, round(rate, 3), kv, running, waiting,
                                           preempted, reason, hit, footprint))
            calm = calm + 1 if change == "hold" and not short else calm
            last, last_steps, last_time, last_rate, last_change = now, steps(), clock, rate, change
            last_footprint = footprint
            short_before = short and change == "hold"  # a short interval that did not move the limit yet

    def _noise(self, counted: int) -> float:
        """The fall in steps/s that counts as one: `tolerance`, or a count's relative noise
        (1/sqrt(n)) when the interval finished few steps."""
        return max(self.tolerance, 1.0 / math.sqrt(max(1, counted)))

    def summary(self) -> dict[str, Any]:
        limits = [d.limit for d in self.decisions]
        return {"mode": AUTO, "metrics": self.metrics_url, "start": self.start, "final": limits[-1] if limits else self.start,
                "decisions": [asdict(d) for d in self.decisions]}
