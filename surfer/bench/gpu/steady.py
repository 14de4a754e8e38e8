"""Steady-state measurement for `surfer bench gpu`: count agent steps only after
every session of the first cohort has finished its first step (the ramp-up is
left out), and end the window once every session running then has done
`min_steps` more steps, or at the time limit. When the run has no session left
to start, the first session that ends also ends a window of `min_steps`: from
then on fewer sessions run, and the rate would mix the steady load with the
run's tail. For the same reason a window never opens once such a session ended
before it.

Beside steps/s and step p50/p95 it reports what the engine did in that window,
from vLLM's /metrics counters read at its start and end: the prompt tokens it
computed per agent step (`vllm:prompt_tokens_by_source{source="local_compute"}`,
which vLLM 0.25.1 exposes, else prompt tokens minus prefix-cache hits), the
prefix and multimodal-cache hit rates, preemptions, and the KV use and running / waiting requests sampled
in between. Counters a server does not expose are left out (None), never guessed.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from surfer.bench.throughput import percentile
from surfer.models.metrics import cache_hit_rate

# vLLM counter names (parse_metrics drops "_total"); by-source series carry ":<source>".
PROMPT = "vllm:prompt_tokens"
COMPUTED = "vllm:prompt_tokens_by_source:local_compute"
HITS = "vllm:prefix_cache_hits"
GENERATED = "vllm:generation_tokens"
PREEMPTIONS = "vllm:num_preemptions"


@dataclass
class SteadyWindow:
    """Fed with (session, event kind, time) by the level's listener; decides the window."""

    cohort_size: int  # sessions that start together (the concurrency)
    min_steps: int = 5
    sessions_total: int | None = None  # sessions in the run (None: one that ends is always replaced)
    start: float = field(default_factory=time.monotonic)
    started_order: list[str] = field(default_factory=list)
    first_step: dict[str, float] = field(default_factory=dict)
    ended: dict[str, float] = field(default_factory=dict)
    steps: list[tuple[str, float, float]] = field(default_factory=list)  # (session, finished at, seconds)
    t0: float | None = None
    t1: float | None = None
    closed_by: str | None = None  # "min_steps", or "a session ended"
    shrank_at: float | None = None  # a session ended, none left to replace it, before the window opened
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    _members: set[str] = field(default_factory=set)  # sessions running when the window opened

    def session_started(self, session: str) -> None:
        self.started_order.append(session)

    def step_finished(self, session: str, seconds: float, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self.steps.append((session, now, seconds))
        self.first_step.setdefault(session, now)
        self._check(now)

    def session_ended(self, session: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self.ended[session] = now
        if self.min_steps > 0 and session in self.started_order and self.sessions_total is not None \
                and len(self.started_order) >= self.sessions_total:
            if self.t0 is None:
                self.shrank_at = self.shrank_at if self.shrank_at is not None else now
            elif self.t1 is None:
                self._close(now, "a session ended")
                return
        self._check(now)

    def _close(self, now: float, why: str) -> None:
        self.t1, self.closed_by = now, why
        self.closed.set()

    def _check(self, now: float) -> None:
        if self.t0 is None:
            if self.shrank_at is not None:
                return
            cohort = self.started_order[:self.cohort_size]
            if len(cohort) < self.cohort_size or not all(s in self.first_step or s in self.ended for s in cohort):
                return
            members = {s for s in self.started_order if s not in self.ended}
            if not members:  # every session ended (the time limit cut them) before a steady window could open
                return
            self.t0, self._members = now, members
            self.opened.set()
        if self.t1 is None and self.min_steps > 0:
            counts: dict[str, int] = {}
            for session, at, _ in self.steps:
                if at > self.t0:
                    counts[session] = counts.get(session, 0) + 1
            if all(counts.get(s, 0) >= self.min_steps or s in self.ended for s in self._members):
                self._close(now, "min_steps")

    def summary(self, stopped: float) -> dict[str, Any] | None:
        """Figures of the window (it ends at `t1`, or at `stopped` when the time limit came first)."""
        if self.t0 is None:
            return None
        end = self.t1 if self.t1 is not None else stopped
        inside = [(s, seconds) for s, at, seconds in self.steps if self.t0 < at <= end]
        span = end - self.t0
        per_session: dict[str, int] = {}
        for session, _ in inside:
            per_session[session] = per_session.get(session, 0) + 1
        durations = [seconds for _, seconds in inside]
        members = sorted(self._members)
        return {
            "seconds": round(span, 3),
            "steps": len(inside),
            "steps_per_s": round(len(inside) / span, 4) if span > 0 else None,
            "step_p50": _r(percentile(durations, 0.5)),
            "step_p95": _r(percentile(durations, 0.95)),
            "sessions": len(members),
            "min_steps_per_session": min((per_session.get(s, 0) for s in members), default=0),
            "complete": self.closed_by == "min_steps",  # every session did min_steps before the time limit
            "closed_by": self.closed_by or "time limit",
            "ramp_seconds": round(self.t0 - self.start, 3),  # left out: until every first session's first step
        }

    def missing(self, stopped: float) -> str:
        """Why no window opened (for a run whose summary is None)."""
        if self.shrank_at is not None and self.shrank_at < stopped:
            return "a session ran out of steps before every session finished its first step: raise --session-steps"
        return "a session never finished its first step"


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def counter_figures(first: dict[str, float] | None, last: dict[str, float] | None, steps: int) -> dict[str, Any]:
    """What the engine did between two /metrics readings, per agent step where it makes sense."""
    if not first or not last:
        return {"counters": "no /metrics readings"}

    def delta(name: str) -> float | None:
        if name not in first or name not in last:
            return None
        return last[name] - first[name]

    prompt, hits = delta(PROMPT), delta(HITS)
    computed = delta(COMPUTED)
    source = "prompt_tokens_by_source{source=local_compute}"
    if computed is None and prompt is not None and hits is not None:
        computed, source = max(0.0, prompt - hits), "prompt_tokens - prefix_cache_hits"

    def per_step(value: float | None) -> float | None:
        return round(value / steps, 1) if value is not None and steps else None

    return {
        "prompt_tokens_per_step": per_step(prompt),
        "computed_prompt_tokens_per_step": per_step(computed),
        "computed_from": source if computed is not None else None,
        "generation_tokens_per_step": per_step(delta(GENERATED)),
        "prefix_cache_hit_rate": cache_hit_rate(first, last),
        "preemptions": delta(PREEMPTIONS),
        "mm_cache_hit_rate": cache_hit_rate(first, last, "mm"),
    }


def gauge_figures(samples: list[tuple[float, dict[str, float]]], t0: float, t1: float) -> dict[str, Any]:
    """Mean / max of KV use and running / waiting requests over the samples taken in [t0, t1]."""
    inside = [values for at, values in samples if t0 <= at <= t1]

    def stats(name: str) -> dict[str, float] | None:
        values = [v[name] for v in inside if name in v]
        return {"mean": round(sum(values) / len(values), 4), "max": round(max(values), 4)} if values else None

    return {"kv_cache_usage": stats("vllm:kv_cache_usage_perc"), "running": stats("vllm:num_requests_running"),
            "waiting": stats("vllm:num_requests_waiting"), "samples": len(inside)}
