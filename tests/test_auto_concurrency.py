"""`--concurrency auto`'s prefix-hit rule, driven by scripted /metrics readings: KV use misses the
overflow of a cache that keeps sessions' prefixes (docs/benchmarks/gpu-sessions.md), the hit rate does not."""

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


class Full(Slots):
    """Every slot in use, as in a batch with tasks waiting; `over` sessions above the limit (none by default)."""

    extra = 0

    @property  # type: ignore[override]
    def busy(self) -> int:
        return self.limit + self.extra

    @busy.setter
    def busy(self, value: int) -> None:
        pass


def decide(readings: list[dict[str, float]], start: int = 8, slots: Slots | None = None,
           steps: Any = None, controller: Scripted | None = None, **options: Any) -> list[Any]:
    controller = controller or Scripted("http://127.0.0.1:1/metrics", interval=0.01, **options)
    controller.readings = list(readings)
    slots = slots or Full(start)
    # by default a constant 1,000 steps/s, whatever the timing: the steps/s rule stays out of it
    steps = steps or (lambda: int(time.monotonic() * 1000))

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
    assert decisions[1].reason == "cache short (prefix hit 0.05, 0.84 while it kept the sessions' prefixes; KV 0.3)"
    assert decisions[1].prefix_hit == 0.05


def test_a_layout_that_reuses_little_keeps_growing() -> None:
    # hits of 0.2 then 0.05: under `hit_floor`, nothing to lose; and a steady hit rate keeps growing too
    low = decide([reading(0, 0), reading(1000, 200), reading(2000, 250)])
    assert [d.limit for d in low] == [10, 12]
    steady = decide([reading(0, 0), reading(1000, 800), reading(2000, 1550)])
    assert [d.limit for d in steady] == [10, 12] and steady[1].prefix_hit == 0.75


def test_after_a_decrease_it_settles_and_increases_stay_below_the_level_that_overflowed() -> None:
    hits = [0, 900, 1800, 1850, 1900, 2800, 3700, 4600, 5500, 6400, 7300]  # 0.9, 0.9, 0.05 twice, then 0.9
    decisions = decide([reading(1000 * k, h) for k, h in enumerate(hits)])
    assert [d.limit for d in decisions] == [10, 12, 8, 8, 8, 8, 10, 11, 11, 11]
    assert decisions[2].reason.startswith("cache short (prefix hit 0.05")  # 12 overflowed the cache
    assert decisions[3].reason.startswith("settling")  # the interval after a decrease: the cache refills
    assert decisions[4].reason == "cache kept the prefixes 0 of 2 intervals since it fell short"  # then two calm ones
    assert decisions[8].reason == "below 12 sessions, where the cache stopped keeping their prefixes"


def test_one_short_interval_at_a_level_that_held_waits_for_a_second() -> None:
    # 0.9 while growing to the maximum (10) and holding there, then a dip to 0.3 (sessions starting or
    # resuming cold) and 0.9 again: no decrease; a dip that lasts two intervals lowers the limit
    dip = decide([reading(1000 * k, h) for k, h in enumerate([0, 900, 1800, 2100, 3000])], maximum=10)
    assert [d.limit for d in dip] == [10, 10, 10, 10]
    assert [d.reason for d in dip[1:]] == ["at the maximum"] * 3
    lasting = decide([reading(1000 * k, h) for k, h in enumerate([0, 900, 1800, 2100, 2400])], maximum=10)
    assert [d.limit for d in lasting] == [10, 10, 10, 7]
    assert lasting[3].reason.startswith("cache short (prefix hit 0.30, 0.90")


def test_it_holds_while_sessions_above_a_lower_limit_have_not_parked() -> None:
    slots = Full(8)
    slots.extra = 3  # three sessions above the limit, still in their step
    decisions = decide([reading(0, 0), reading(1000, 900), reading(2000, 1800)], slots=slots)
    assert [d.limit for d in decisions] == [8, 8]
    assert decisions[0].reason == "settling (3 sessions above the limit, 0 parked)"


class Growing(Full):
    """Full slots whose sessions' contexts are scripted: each reading's footprint, `tokens` per session."""

    tokens: list[int] = []

    def footprint(self) -> tuple[int, int]:
        per = self.tokens.pop(0) if len(self.tokens) > 1 else self.tokens[0]
        return per * self.limit, self.limit


def test_once_the_cache_fell_short_the_sessions_contexts_not_their_number_bound_the_limit() -> None:
    # 10k-token sessions: 8 hold (0.9), 10 overflow right after the increase (100k tokens). Later the
    # sessions restart shallow (5k): more of them fit under 75 % of 100k, so it grows past 10, which a
    # ceiling counted in sessions forbade; as they deepen it parks some before they reach 100k again
    slots = Growing(8)
    slots.tokens = [10_000] * 4 + [5_000] * 6 + [9_000]
    hits = [0, 900, 1000, 1900, 2800, 3700, 4600, 5500, 6400, 7300, 8200, 9100]
    decisions = decide([reading(1000 * k, h) for k, h in enumerate(hits)], slots=slots)
    limits = [d.limit for d in decisions]
    assert limits == [10, 7, 7, 7, 9, 11, 13, 15, 15, 15, 8]
    assert decisions[1].reason.startswith("cache short (prefix hit 0.10") and decisions[1].context_tokens == 100_000
    assert decisions[2].reason.startswith("settling") and decisions[3].reason.startswith("cache kept the prefixes 1 of 2")
    # a ceiling counted in sessions stopped at 9; counted in tokens, 5k sessions go on to 15 (75k)
    assert decisions[9].reason == "16 sessions would hold about 80,000 tokens, over 75% of the 100,000 at which the cache fell short"
    # as they deepen to 9k (past 85k) it parks some, down to 75k (15 -> 8), before the cache overflows again
    assert decisions[10].reason == "the sessions' contexts reached 135,000 tokens, near the 100,000 at which the cache fell short"


def test_a_fall_in_steps_per_s_counts_only_beyond_the_noise_of_the_steps_counted() -> None:
    # steps finished per 1 s interval: the same 56 % fall (28 % once averaged) right after an increase is noise
    # when the intervals count 9 and 4 steps (1/sqrt(4) = 0.5), and a real fall when they count 900 and 400
    def run(counts: list[int]) -> list[Any]:
        clock = [0.0]
        controller = Scripted("http://127.0.0.1:1/metrics", interval=0.01, clock=lambda: clock[0])
        readings = [reading(1000 * k, 900 * k) for k in range(len(counts) + 1)]
        done = [sum(counts[:k]) for k in range(len(counts) + 1)]
        read, total = controller.read, len(readings)

        async def tick(client: Any) -> dict[str, float] | None:
            if len(controller.readings) < total:  # the start's reading at 0 s, then one a second
                clock[0] += 1.0
            return await read(client)

        controller.read = tick  # type: ignore[method-assign]
        steps = lambda: done[min(len(done) - 1, max(0, total - len(controller.readings) - 1))]  # noqa: E731
        return decide(readings, steps=steps, controller=controller)

    few = run([9, 4])
    assert [d.limit for d in few] == [10, 12] and few[1].reason == "every slot in use, cache has room"
    many = run([900, 400])
    assert [d.limit for d in many] == [10, 7] and many[1].reason == "steps/s fell from 900.00 to 650.00 after an increase"
    assert Scripted("x")._noise(4) == 0.5 and Scripted("x")._noise(400) == 0.15


def test_slots_park_the_newest_sessions_above_a_lower_limit_and_resume_them_before_new_ones() -> None:
    async def go() -> list[str]:
        slots = Slots(3)
        order: list[str] = []
        release = {name: asyncio.Event() for name in "abcd"}

        async def session(name: str) -> None:
            async with slots:
                order.append(f"{name} starts")
                me = asyncio.current_task()
                while not release[name].is_set():
                    if slots.must_park(me):
                        order.append(f"{name} parks")
                        waited = await slots.park(me)
                        order.append(f"{name} resumes")
                        assert waited >= 0
                    await asyncio.sleep(0.01)
                order.append(f"{name} ends")

        tasks = [asyncio.create_task(session(name)) for name in "abc"]
        await asyncio.sleep(0.05)
        await slots.resize(1)  # b and c, the newest, park at their next check
        await asyncio.sleep(0.05)
        assert slots.busy == 1 and slots.parked == 2 and slots.over == 0
        tasks.append(asyncio.create_task(session("d")))  # a new session waits behind the parked ones
        await asyncio.sleep(0.05)
        release["a"].set()
        await asyncio.sleep(0.05)
        await slots.resize(4)
        for name in "bcd":
            release[name].set()
        await asyncio.gather(*tasks)
        return order

    order = asyncio.run(go())
    assert order[:5] == ["a starts", "b starts", "c starts", "b parks", "c parks"] or \
        order[:5] == ["a starts", "b starts", "c starts", "c parks", "b parks"]
    assert order.index("a ends") < order.index("b resumes") < order.index("d starts")
    assert order.index("c resumes") < order.index("d starts")


def test_parking_control_counts_each_running_sessions_largest_request_of_its_last_step() -> None:
    from surfer.agent.events import ModelCall, ModelCalled
    from surfer.models.backend import Usage
    from surfer.fleet.concurrency import ParkingControl

    def called(tokens: int) -> ModelCalled:
        return ModelCalled(step=1, call=ModelCall(role="policy", request={}, completion="", seconds=0.1,
                                                   usage=Usage(prompt_tokens=tokens, completion_tokens=5)))

    async def go() -> list[tuple[int, int]]:
        slots = Slots(2)
        seen: list[tuple[int, int]] = []
        step_two = asyncio.Event()

        async def session(first: int, second: int, wait: bool) -> None:
            async with slots:
                control = ParkingControl(slots)
                control.observe(called(first))
                control.observe(called(first + 40))  # the localizer continues the policy's request
                await control.checkpoint()
                control.observe(called(second))  # the next step's policy request: that step's largest so far
                if wait:
                    await step_two.wait()
                seen.append(slots.footprint())

        a = asyncio.create_task(session(1000, 1200, wait=True))
        b = asyncio.create_task(session(3000, 3100, wait=False))
        await b
        step_two.set()
        await a
        seen.append(slots.footprint())  # both ended: nothing left to keep
        return seen

    assert asyncio.run(go()) == [(4300, 2), (1200, 1), (0, 0)]


def test_a_session_cancelled_while_parked_gives_back_no_slot_twice() -> None:
    async def go() -> Slots:
        slots = Slots(2)
        parked = asyncio.Event()

        async def session(park: bool) -> None:
            async with slots:
                if park:
                    await slots.resize(1)
                    assert slots.must_park(asyncio.current_task())
                    parked.set()
                    await slots.park(asyncio.current_task())
                await asyncio.sleep(10)

        first = asyncio.create_task(session(False))
        await asyncio.sleep(0.01)
        second = asyncio.create_task(session(True))
        await parked.wait()
        await asyncio.sleep(0.01)
        assert slots.busy == 1 and slots.parked == 1
        second.cancel()  # Ctrl-C while parked
        await asyncio.gather(second, return_exceptions=True)
        assert slots.busy == 1 and slots.parked == 0
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        return slots

    slots = asyncio.run(go())
    assert slots.busy == 0 and slots.parked == 0


def test_the_stand_ins_prefix_cache_evicts_the_least_recently_used_blocks_beyond_its_capacity() -> None:
    from surfer.models.prefix_cache import PrefixCache

    def request(session: str, steps: int) -> dict[str, Any]:  # a session's history: one image per step
        images = [{"type": "image_url", "image_url": {"url": f"data:{session}-{k}"}} for k in range(steps)]
        return {"messages": [{"role": "user", "content": images}]}

    cache = PrefixCache(capacity=4 * 256 + 16)  # four images and the role's block
    assert cache.take(request("a", 2)) == 0
    assert cache.take(request("a", 3)) == 1 + 2 * 256  # the role's block (1 token) and a's two images
    assert cache.take(request("b", 2)) == 1  # only the shared role block: b's images push a's first out
    assert cache.tokens <= cache.capacity
    assert cache.take(request("a", 3)) == 1  # a's first image was evicted, so nothing after it counts
    unbounded = PrefixCache()
    for session in "abcdef":
        unbounded.take(request(session, 3))
    assert all(unbounded.take(request(session, 3)) == 1 + 3 * 256 for session in "abcdef")
    cache.clear()
    assert cache.tokens == 0 and cache.take(request("a", 1)) == 0
