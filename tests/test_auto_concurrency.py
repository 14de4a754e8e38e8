"""`--concurrency auto`'s prefix-hit rule, driven by scripted /metrics readings: KV use misses the
overflow of a cache that keeps sessions' prefixes (README, "The seeds' regime"), the hit rate does not."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from surfer.fleet.concurrency import AutoConcurrency, Slots


class Scripted(AutoConcurrency):
    """Reads the next of `readings` (cumulative vLLM counters) instead of a server's /metrics."""

    readings: list[dict[str, float]]

    async def read(self, client: Any) -> dict[str, float] | None:
        return self.readings.pop(0) if self.readings else None


def reading(queries: float, hits: float, kv: float = 0.3) -> dict[str, float]:
    return {"vllm:prefix_cache_queries": queries, "vllm:prefix_cache_hits": hits, "vllm:kv_cache_usage_perc": kv,
            "vllm:num_requests_running": 8.0, "vllm:num_requests_waiting": 0.0}


def decide(readings: list[dict[str, float]], start: int = 8) -> list[Any]:
    controller = Scripted("http://127.0.0.1:1/metrics", interval=0.01)
    controller.readings = list(readings)
    slots = Slots(start)
    slots.busy = 10**6  # every slot in use, as in a batch with tasks waiting
    def steps() -> int:  # a constant 1,000 steps/s, whatever the timing: the steps/s rule stays out of it
        return int(time.monotonic() * 1000)

    async def go() -> None:
        task = asyncio.create_task(controller.control(slots, steps, None))
        while controller.readings:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())
    return controller.decisions


def test_a_prefix_hit_collapse_after_an_increase_lowers_the_limit_at_low_kv_use() -> None:
    # 0.84 of prompt tokens hit, the limit grows, then 0.05 hit at KV use 0.3 (Holo2 8 deep, 32 -> 48 sessions)
    decisions = decide([reading(0, 0), reading(1000, 840), reading(2000, 890)])
    assert [d.limit for d in decisions] == [10, 7]
    assert decisions[0].reason == "every slot in use, cache has room" and decisions[0].prefix_hit == 0.84
    assert decisions[1].reason == "cache short (prefix hit 0.84 -> 0.05 after an increase, KV 0.3)"
    assert decisions[1].prefix_hit == 0.05


def test_a_layout_that_reuses_little_keeps_growing() -> None:
    # hits of 0.2 then 0.05: under `hit_floor`, nothing to lose; and a steady hit rate keeps growing too
    low = decide([reading(0, 0), reading(1000, 200), reading(2000, 250)])
    assert [d.limit for d in low] == [10, 12]
    steady = decide([reading(0, 0), reading(1000, 800), reading(2000, 1550)])
    assert [d.limit for d in steady] == [10, 12] and steady[1].prefix_hit == 0.75
