"""What reads a model server's /metrics (Prometheus text) — vLLM's `vllm:*` or
SGLang's `sglang:*` series — the parser, one read, and a sampler polling it
while a run goes on. Used by `--concurrency auto` (surfer/fleet/concurrency.py),
`surfer bench gpu` and `surfer view`.

One vocabulary for both engines: vLLM's names. SGLang's series are read into
them (`SGLANG_AS_VLLM`): its running and queued requests, its token usage as
the KV cache's, its prompt and cached-token counters as the prefix cache's
queries and hits (and the computed prompt tokens as their difference), its
retracted requests as preemptions. Which engine answered is said by an
`engine:<name>` entry of 1.0. SGLang counts prompt and cached tokens when a
request finishes, vLLM when it is scheduled: over a window of many requests
the two agree."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

_METRIC = re.compile(r"^((?:vllm|sglang):[a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$")
_SOURCE = re.compile(r'source="([a-z_]+)"')
ENGINES = ("vllm", "sglang")

# SGLang series (with "_total" dropped) -> the vLLM names surfer reads.
SGLANG_AS_VLLM = {
    "sglang:num_running_reqs": ("vllm:num_requests_running",),
    "sglang:num_queue_reqs": ("vllm:num_requests_waiting",),
    "sglang:token_usage": ("vllm:kv_cache_usage_perc",),
    "sglang:prompt_tokens": ("vllm:prompt_tokens", "vllm:prefix_cache_queries"),
    "sglang:cached_tokens": ("vllm:prefix_cache_hits",),
    "sglang:generation_tokens": ("vllm:generation_tokens",),
    "sglang:num_retracted_requests": ("vllm:num_preemptions",),
}
COMPUTED = "vllm:prompt_tokens_by_source:local_compute"


def parse_metrics(text: str) -> dict[str, float]:
    """Sum of each vllm:* or sglang:* series (over labels) in a Prometheus text page; a series with
    a `source` label (vLLM's prompt tokens by source) is also kept per source, as `name:source`.
    SGLang's series are also given under the vLLM names they stand for (see the module docstring)."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = _METRIC.match(line.strip())
        if match:
            name = match.group(1).removesuffix("_total")
            value = float(match.group(3))
            values[name] = values.get(name, 0.0) + value
            source = _SOURCE.search(match.group(2) or "")
            if source and name.startswith("vllm:"):
                key = f"{name}:{source.group(1)}"
                values[key] = values.get(key, 0.0) + value
    engines = {name.split(":", 1)[0] for name in values}
    if "sglang" in engines:
        for name, targets in SGLANG_AS_VLLM.items():
            for target in targets:
                if name in values:
                    values[target] = values[name]
        if "sglang:prompt_tokens" in values:
            values[COMPUTED] = max(0.0, values["sglang:prompt_tokens"] - values.get("sglang:cached_tokens", 0.0))
    for engine in ENGINES:
        if engine in engines:
            values[f"engine:{engine}"] = 1.0
    return values


def combine_readings(readings: list[dict[str, float]]) -> dict[str, float] | None:
    """Several servers' readings as one: counters and request counts summed, the KV cache's use
    the fullest server's (the one that falls short first); None without any reading."""
    if not readings:
        return None
    if len(readings) == 1:
        return readings[0]
    out: dict[str, float] = {}
    for values in readings:
        for name, value in values.items():
            if name == "vllm:kv_cache_usage_perc" or name.startswith("engine:"):
                out[name] = max(out.get(name, value), value)
            else:
                out[name] = out.get(name, 0.0) + value
    return out


def engine_of(values: dict[str, float] | None) -> str | None:
    """"vllm" or "sglang": the engine a reading came from (None: no reading)."""
    if not values:
        return None
    return "sglang" if "engine:sglang" in values else "vllm" if "engine:vllm" in values else None


async def read_metrics(client: Any, url: str) -> dict[str, float] | None:
    """The series at `url` (a server's /metrics) with an httpx-like async client;
    None when there is no such page or the server does not answer."""
    try:
        response = await client.get(url)
    except Exception:  # noqa: BLE001 - no server, no route, a busy server: no metrics
        return None
    return parse_metrics(response.text) if response.status_code == 200 else None


def cache_hit_rate(before: dict[str, float], after: dict[str, float], cache: str = "prefix") -> float | None:
    """The hit rate of vLLM's prefix cache (or "mm": its multimodal processor cache) between two
    readings; None without queries in between."""
    queries = after.get(f"vllm:{cache}_cache_queries", 0.0) - before.get(f"vllm:{cache}_cache_queries", 0.0)
    hits = after.get(f"vllm:{cache}_cache_hits", 0.0) - before.get(f"vllm:{cache}_cache_hits", 0.0)
    return round(hits / queries, 4) if queries > 0 else None


class MetricsSampler:
    """Polls `<root>/metrics` about once a second while a run goes on; `root` may be several servers'
    roots, whose readings are taken together (combine_readings)."""

    def __init__(self, root: str | list[str], interval: float = 1.0) -> None:
        roots = [root] if isinstance(root, str) else list(root)
        self.urls = [r.rstrip("/") + "/metrics" for r in roots]
        self.url = self.urls[0]
        self.interval = interval
        self.samples: list[dict[str, float]] = []
        self.times: list[float] = []  # time.monotonic() of each sample
        self._task: asyncio.Task[None] | None = None

    async def _read(self, client: Any) -> dict[str, float] | None:
        if len(self.urls) == 1:
            return await read_metrics(client, self.url)
        readings = await asyncio.gather(*(read_metrics(client, url) for url in self.urls))
        return combine_readings([r for r in readings if r is not None])

    async def _loop(self, client: Any) -> None:
        while True:
            await self.snapshot()
            await asyncio.sleep(self.interval)

    async def snapshot(self) -> dict[str, float] | None:
        """Read /metrics now and keep the sample (None where it could not be read)."""
        sample = await self._read(self._client)
        if sample:
            self.samples.append(sample)
            self.times.append(time.monotonic())
        return sample

    def timed(self) -> list[tuple[float, dict[str, float]]]:
        return list(zip(self.times, self.samples))

    async def __aenter__(self) -> "MetricsSampler":
        from surfer.models.json_http import http_library, proxied_client

        self._client = proxied_client(http_library().AsyncClient, self.url, timeout=5)
        self._task = asyncio.create_task(self._loop(self._client))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self.snapshot()
        await self._client.aclose()

    def summary(self) -> dict[str, Any] | None:
        if len(self.samples) < 2:
            return None
        first, last = self.samples[0], self.samples[-1]

        def series(name: str) -> list[float]:
            return [s[name] for s in self.samples if name in s]

        def stats(name: str) -> dict[str, float] | None:
            values = series(name)
            return {"mean": round(sum(values) / len(values), 4), "max": round(max(values), 4)} if values else None

        return {
            "prefix_cache_hit_rate": cache_hit_rate(first, last),
            "mm_cache_hit_rate": cache_hit_rate(first, last, "mm"),
            "kv_cache_usage": stats("vllm:kv_cache_usage_perc"),
            "running": stats("vllm:num_requests_running"),
            "waiting": stats("vllm:num_requests_waiting"),
            "samples": len(self.samples),
        }
