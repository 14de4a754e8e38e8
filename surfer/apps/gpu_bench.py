"""`surfer bench gpu`: surfer driving vLLM on a GPU with session-shaped load.

    surfer bench gpu make-model holotron models/holotron     # dummy-weight model directories
    surfer bench gpu make-model holo2 models/holo2
    surfer bench gpu run --model holotron=models/holotron --model holo2=models/holo2 --out gpu.json
    surfer bench gpu run --model holo2=models/holo2 --layouts window,blocks --auto --levels 16,64,128

For each model, `run` starts vLLM with `surfer serve` (random weights:
`--load-format dummy`), then at each concurrency level runs a batch over the
replay environment (recorded screenshots, so no browser: the same images,
prompts, history growth and prefix reuse as real sessions) for a time
window, and then a bare load generator: an open replay of the request
bodies surfer sent at that level, at the same concurrency, one session's
requests in order. Both runs start from empty prefix and multimodal caches.
The ratio of the two is the harness's cost at the server.

Reported per level: agent steps/s, model calls/s, prompt and completion
tokens/s, p50/p95 step and model-call time, and from vLLM's /metrics the
prefix-cache hit rate, KV-cache use and running/waiting requests; per model:
engine start time, GPU memory and what vLLM's log says of weights and KV cache.
With `--layouts window,blocks` every level runs once per prompt layout
(surfer/agent/layouts.py), and `--auto` adds a run with `--concurrency auto`
(surfer/apps/concurrency.py, up to the highest level) per layout; the
results then hold blocks-over-window steps/s and prefix-hit ratios per
level, and auto's steps/s over the best fixed level's.
With `--variants` (surfer/apps/gpu_variants.py) each run is one variant of
the client-side settings (layout, role continuation, image budget, history
depth, sessions), all within one server start per model; the results then
hold each variant's steady steps/s and computed tokens per agent step over
the first variant's.

Every run also reports a steady-state window (surfer/apps/gpu_steady.py):
steps counted only after every session has finished its first step, until
each has done `--min-steps` more (the run then stops; `--window` is the time
limit), with the prompt tokens the engine computed per agent step from
vLLM's counters.

With `--base-url`, an already running server is used instead (no serving;
the tests use the stand-in server this way).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from surfer.core.errors import ConfigError
from surfer.models.backend import Completion, ModelBackend, ModelRequest

from .gpu_steady import SteadyWindow, counter_figures, gauge_figures
from .gpu_variants import Variant
from .gpu_variants import runs as variant_runs
from .throughput import _pct, parse_levels

if TYPE_CHECKING:  # imported where used: building the CLI (`surfer --help`) loads no pydantic model
    from surfer.agent.events import Event

DEFAULT_LEVELS = "1,16,64,128"
# Random weights: keep whitespace between JSON tokens from running on (see gpu_models).
STRUCTURED = json.dumps({"backend": "xgrammar", "disable_any_whitespace": True})
_session: contextvars.ContextVar[str] = contextvars.ContextVar("surfer_bench_session", default="")


def _httpx() -> Any:
    from surfer.models.json_http import http_library

    return http_library()


# -- what surfer sends ---------------------------------------------------------------


@dataclass
class SentRequest:
    session: str
    body: dict[str, Any]  # the JSON body on the wire


def wire_body(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON the OpenAI SDK sends for `body` (its `extra_body` merged in)."""
    out = {k: v for k, v in body.items() if k != "extra_body"}
    out.update(body.get("extra_body") or {})
    return out


class RecordingBackend(ModelBackend):
    """The HTTP backend, remembering each request body by session (a context
    variable set when the session's run starts)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent: list[SentRequest] = []

    @property
    def label(self) -> str:
        return self.inner.label

    async def check(self) -> None:
        await self.inner.check()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def complete(self, request: ModelRequest) -> Completion:
        self.sent.append(SentRequest(_session.get(), wire_body(self.inner._body(request, self.inner.structured_mode))))
        return await self.inner.complete(request)


# -- vLLM's /metrics -----------------------------------------------------------------


_METRIC = re.compile(r"^(vllm:[a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$")
_SOURCE = re.compile(r'source="([a-z_]+)"')


def parse_metrics(text: str) -> dict[str, float]:
    """Sum of each vllm:* series (over labels) in a Prometheus text page; a series with a
    `source` label (vLLM's prompt tokens by source) is also kept per source, as `name:source`."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = _METRIC.match(line.strip())
        if match:
            name = match.group(1).removesuffix("_total")
            value = float(match.group(3))
            values[name] = values.get(name, 0.0) + value
            source = _SOURCE.search(match.group(2) or "")
            if source:
                key = f"{name}:{source.group(1)}"
                values[key] = values.get(key, 0.0) + value
    return values


class MetricsSampler:
    """Polls `<root>/metrics` about once a second while a run goes on."""

    def __init__(self, root: str, interval: float = 1.0) -> None:
        self.url = root.rstrip("/") + "/metrics"
        self.interval = interval
        self.samples: list[dict[str, float]] = []
        self.times: list[float] = []  # time.monotonic() of each sample
        self._task: asyncio.Task[None] | None = None

    async def _read(self, client: Any) -> dict[str, float] | None:
        try:
            response = await client.get(self.url)
        except Exception:  # noqa: BLE001 - no /metrics (the stand-in) or a busy server
            return None
        return parse_metrics(response.text) if response.status_code == 200 else None

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
        httpx = _httpx()
        self._client = httpx.AsyncClient(timeout=5)
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
        queries = last.get("vllm:prefix_cache_queries", 0) - first.get("vllm:prefix_cache_queries", 0)
        hits = last.get("vllm:prefix_cache_hits", 0) - first.get("vllm:prefix_cache_hits", 0)

        def series(name: str) -> list[float]:
            return [s[name] for s in self.samples if name in s]

        def stats(name: str) -> dict[str, float] | None:
            values = series(name)
            return {"mean": round(sum(values) / len(values), 4), "max": round(max(values), 4)} if values else None

        return {
            "prefix_cache_hit_rate": round(hits / queries, 4) if queries else None,
            "kv_cache_usage": stats("vllm:kv_cache_usage_perc"),
            "running": stats("vllm:num_requests_running"),
            "waiting": stats("vllm:num_requests_waiting"),
            "samples": len(self.samples),
        }


async def reset_server_caches(root: str) -> bool:
    """Empty vLLM's prefix and multimodal caches (needs VLLM_SERVER_DEV_MODE=1); False where refused."""
    httpx = _httpx()
    ok = True
    async with httpx.AsyncClient(timeout=60) as client:
        for path in ("/reset_prefix_cache", "/reset_mm_cache"):
            try:
                ok &= (await client.post(root.rstrip("/") + path)).status_code == 200
            except httpx.HTTPError:
                ok = False
    return ok


# -- one level: surfer, then the bare generator -------------------------------------------


@dataclass
class LevelTally:
    """Events of one timed run."""

    started: float = field(default_factory=time.monotonic)
    steps: list[float] = field(default_factory=list)  # step seconds
    calls: list[float] = field(default_factory=list)  # model-call seconds
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failed_calls: int = 0
    steady: SteadyWindow | None = None

    def __call__(self, event: Event) -> None:
        from surfer.agent.events import Finished, ModelCalled, RunStarted, StepFinished

        if isinstance(event, RunStarted):
            _session.set(event.run_id)  # runs in the session's own task: tags its requests
            if self.steady is not None:
                self.steady.session_started(event.run_id)
        elif isinstance(event, Finished):
            if self.steady is not None:
                self.steady.session_ended(_session.get())
        elif isinstance(event, StepFinished):
            self.steps.append(event.record.timings.total)
            if self.steady is not None:
                self.steady.step_finished(_session.get(), event.record.timings.total)
        elif isinstance(event, ModelCalled):
            self.calls.append(event.call.seconds)
            self.prompt_tokens += event.call.usage.prompt_tokens
            self.completion_tokens += event.call.usage.completion_tokens
            self.failed_calls += event.call.error is not None

    def rates(self, seconds: float) -> dict[str, Any]:
        return {
            "seconds": round(seconds, 3),
            "model_calls": len(self.calls),
            "calls_per_s": round(len(self.calls) / seconds, 4),
            "prompt_tokens_per_s": round(self.prompt_tokens / seconds, 1),
            "completion_tokens_per_s": round(self.completion_tokens / seconds, 1),
            "prompt_tokens_per_call": round(self.prompt_tokens / len(self.calls), 1) if self.calls else None,
            "completion_tokens_per_call": round(self.completion_tokens / len(self.calls), 1) if self.calls else None,
            "call_p50": _round(_pct(self.calls, 0.5)),
            "call_p95": _round(_pct(self.calls, 0.95)),
        }


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


async def _timed(coro: Any, window: float) -> float:
    """Run `coro` for at most `window` seconds (cancelled then); the seconds it ran."""
    started = time.monotonic()
    task = asyncio.ensure_future(coro)
    done, _ = await asyncio.wait({task}, timeout=window)
    elapsed = time.monotonic() - started
    if not done:
        task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    if done and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]
    return min(elapsed, window)


async def _steady_run(coro: Any, window: float, steady: SteadyWindow, sampler: MetricsSampler | None,
                      ) -> tuple[float, float, list[dict[str, float] | None]]:
    """Run `coro` until it ends, the steady window closes (/metrics read at its start and end,
    then `coro` cancelled) or `window` seconds pass; (seconds it ran, when it stopped, readings)."""
    started = time.monotonic()
    task = asyncio.ensure_future(coro)
    readings: list[dict[str, float] | None] = []

    async def watch() -> None:
        await steady.opened.wait()
        readings.append(await sampler.snapshot() if sampler else None)
        await steady.closed.wait()
        readings.append(await sampler.snapshot() if sampler else None)

    watcher = asyncio.ensure_future(watch())
    done, _ = await asyncio.wait({task, watcher}, timeout=window, return_when=asyncio.FIRST_COMPLETED)
    stopped = time.monotonic()
    if not watcher.done():
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    if len(readings) == 1:  # the end reading, at the time limit or the run's end (none: no window, or no start reading)
        readings.append(await sampler.snapshot() if sampler else None)
    if not task.done():
        task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    if task.done() and not task.cancelled() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]
    return min(stopped - started, window), stopped, readings


def steady_figures(steady: SteadyWindow, stopped: float, readings: list[dict[str, float] | None],
                   sampler: MetricsSampler | None) -> dict[str, Any] | None:
    """The steady window's row: steps/s and step times, and what the engine did in it."""
    figures = steady.summary(stopped)
    if figures is None:
        return None
    first, last = (readings + [None, None])[:2]
    figures.update(counter_figures(first, last, figures["steps"]))
    if sampler is not None and steady.t0 is not None:
        # to `stopped`: the window's end reading (taken just after it closed) counts among the samples
        figures.update(gauge_figures(sampler.timed(), steady.t0, max(steady.t1 or stopped, stopped)))
    return figures


async def surfer_level(config: Any, recordings: list[Any], concurrency: int | str, window: float, work: Path,
                       sessions: int | None = None, auto: dict[str, Any] | None = None, min_steps: int = 0,
                       sampler: MetricsSampler | None = None) -> tuple[dict[str, Any], list[SentRequest]]:
    """Run `sessions` replay tasks (default 2 × concurrency; with `min_steps`, one per session) with `concurrency` sessions (or "auto",
    with AutoConcurrency options `auto`) for at most `window` s; with `min_steps`, stop once the
    steady window closed (every session running after the ramp did that many more steps)."""
    from surfer.apps.batch import Batch, BatchTask
    from surfer.models.http import OpenAICompatibleBackend

    backend = RecordingBackend(OpenAICompatibleBackend(config.endpoint("policy")))
    # a steady window ends long before sessions of --session-steps do: one task per session is enough
    # (and halves the screenshots read and marked before the window); else twice as many, to keep slots full
    count = sessions or (int(concurrency) if min_steps else max(4, 2 * int(concurrency)))
    tasks = [BatchTask(id=f"s{k:04d}", task=_TASK, group=f"s{k:04d}") for k in range(count)]
    cohort = int((auto or {}).get("start", 1)) if concurrency == "auto" else int(concurrency)
    steady = SteadyWindow(min(cohort, count), min_steps)
    tally = LevelTally(steady=steady)
    batch = Batch(config, tasks, work, concurrency=concurrency, backend=backend, listeners=[tally], replay=recordings,
                  auto=auto if concurrency == "auto" else None)
    try:
        await backend.check()  # the HTTP client is made before the window, as the bare generator's is
        await batch.read_replays()  # and the screenshots read: the bare generator sends them ready-made
        steady.start = time.monotonic()
        seconds, stopped, readings = await _steady_run(batch.run(), window, steady, sampler)
    finally:
        await backend.aclose()
    finished = batch.index.read()
    statuses: dict[str, int] = {}
    for record in finished:
        statuses[record["status"]] = statuses.get(record["status"], 0) + 1
    result = {
        "steps": len(tally.steps),
        "steps_per_s": round(len(tally.steps) / seconds, 4),
        "step_p50": _round(_pct(tally.steps, 0.5)),
        "step_p95": _round(_pct(tally.steps, 0.95)),
        "sessions_finished": len(finished),
        "steps_per_session": round(sum(r["steps"] for r in finished) / len(finished), 2) if finished else None,
        "statuses": statuses,
        "unusable_outputs": tally.failed_calls,
        **tally.rates(seconds),
        "steady": steady_figures(steady, stopped, readings, sampler),
    }
    if batch.auto is not None:
        result["concurrency_control"] = batch.concurrency_report
    return result, backend.sent


async def bare_level(base_url: str, sent: list[SentRequest], concurrency: int, window: float,
                     timeout: float = 600.0) -> dict[str, Any]:
    """Replay `sent` (each session's requests in order, `concurrency` sessions at once) for at most `window` s."""
    httpx = _httpx()
    by_session: dict[str, list[dict[str, Any]]] = {}
    for item in sent:
        by_session.setdefault(item.session, []).append(item.body)
    queue: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue()
    for bodies in by_session.values():
        queue.put_nowait(bodies)
    tally = LevelTally()
    url = base_url.rstrip("/") + "/chat/completions"
    limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8)

    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        async def session() -> None:
            while not queue.empty():
                for body in queue.get_nowait():
                    started = time.perf_counter()
                    response = await client.post(url, json=body)
                    seconds = time.perf_counter() - started
                    response.raise_for_status()
                    usage = response.json().get("usage") or {}
                    tally.calls.append(seconds)
                    tally.prompt_tokens += usage.get("prompt_tokens") or 0
                    tally.completion_tokens += usage.get("completion_tokens") or 0

        async def everyone() -> None:
            await asyncio.gather(*(session() for _ in range(min(concurrency, len(by_session)))))

        seconds = await _timed(everyone(), window)
    return {"sessions": len(by_session), **tally.rates(seconds)}


_TASK = (
    "Register as a new library member named Ada Lovelace with the email ada@example.com, "
    "then report the confirmation code shown."
)


async def bench_levels(config: Any, recordings: list[Any], levels: list[int], window: float, *,
                       bare: bool = True, say: Any = print, out: list[dict[str, Any]] | None = None,
                       progress: Any = None, layouts: tuple[str, ...] = ("window",), auto: bool = False,
                       auto_interval: float = 5.0, auto_only: bool = False, variants: list[Variant] | None = None,
                       min_steps: int = 0) -> list[dict[str, Any]]:
    """Every variant (default: one per prompt layout) at every level against the server in `config`
    (surfer, then the bare replay of what it sent), plus `--concurrency auto` when `auto` (only that
    when `auto_only`: the levels then give its start and ceiling); a variant with a concurrency of
    its own runs at that only. Rows are appended to `out` as they finish, and `progress()` called after each."""
    from surfer.models.profiles import get_profile

    root = config.base_url.rstrip("/").removesuffix("/v1")
    out = [] if out is None else out
    profile = get_profile(config.profile)
    chosen = variant_runs(variants or [Variant(layout=layout) for layout in layouts], levels, auto, auto_only)
    top = max([*levels, *(v.concurrency for v in chosen if isinstance(v.concurrency, int))])
    # a cancelled session's file writes may still be finishing in their threads when the window ends
    with tempfile.TemporaryDirectory(prefix="surfer-gpu-", ignore_cleanup_errors=True) as tmp:
        for number, variant in enumerate(chosen):
            level = variant.concurrency
            assert level is not None
            reset = await reset_server_caches(root)
            run_config = config.model_copy(update=variant.config_update())
            options = {"start": min(levels), "maximum": top, "interval": auto_interval, "fallback": top}
            async with MetricsSampler(root) as sampler:
                surfer, sent = await surfer_level(run_config, recordings, level, window, Path(tmp) / f"run{number}-c{level}",
                                                  sessions=2 * top if level == "auto" else None, auto=options,
                                                  # auto runs the whole window: its controller needs the time to settle
                                                  min_steps=0 if level == "auto" else min_steps, sampler=sampler)
            row: dict[str, Any] = {"name": variant.label(), "variant": variant.resolved(profile), "layout": variant.layout,
                                   "concurrency": level, "caches_reset": reset, "surfer": surfer,
                                   "surfer_server": sampler.summary()}
            if bare and sent and level != "auto":
                await reset_server_caches(root)
                async with MetricsSampler(root) as sampler:
                    row["bare"] = await bare_level(config.base_url, sent, int(level), window, config.request_timeout)
                row["bare_server"] = sampler.summary()
                row["surfer_vs_bare"] = {
                    key: round(surfer[key] / row["bare"][key], 4) if row["bare"][key] else None
                    for key in ("calls_per_s", "prompt_tokens_per_s")
                }
            say(level_line(row))
            out.append(row)
            if progress:
                progress()
    return out


def level_line(row: dict[str, Any]) -> str:
    s = row["surfer"]
    line = (f"{row.get('name', row.get('layout', 'window'))} c={row['concurrency']:>4}  {s['steps_per_s']:.2f} steps/s  "
            f"{s['prompt_tokens_per_s']:.0f} prompt tok/s  "
            f"{s['completion_tokens_per_s']:.0f} gen tok/s  step p50 {s['step_p50']}s p95 {s['step_p95']}s")
    steady = s.get("steady")
    if steady:
        line += (f"  steady {_fmt(steady['steps_per_s'])} steps/s over {steady['seconds']:.0f} s"
                 f" ({steady['min_steps_per_session']}+ steps/session), computed {_fmt(steady.get('computed_prompt_tokens_per_step'), 0)} tok/step")
    if "surfer_vs_bare" in row:
        line += f"  surfer/bare calls/s {row['surfer_vs_bare']['calls_per_s']}"
    return line


# -- serving ---------------------------------------------------------------------------


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    base_url: str
    log: Path
    start_seconds: float  # from `vllm serve` starting to the server answering /v1/models


def serve_model(shape: str, model_dir: Path, port: int, max_concurrency: int, log: Path, timeout: float,
                extra: tuple[str, ...] = (), layout: str = "window", images: int | None = None) -> Served:
    """Start `surfer serve` for a dummy-weight model directory and wait until it answers;
    `images`: the most images one request may hold (default: what `layout` needs)."""
    httpx = _httpx()
    command = [
        sys.executable, "-m", "surfer", "serve", str(model_dir), "--profile", shape, "--port", str(port),
        "--max-concurrency", str(max_concurrency), "--timeout", str(timeout), "--prompt-layout", layout,
        *(["--max-images", str(images)] if images else []), "--",
        "--load-format", "dummy", "--structured-outputs-config", STRUCTURED, *extra,
    ]
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    handle = log.open("wb")
    process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + timeout
    launched: float | None = None
    while True:
        if launched is None and b"starting: " in log.read_bytes():
            launched = time.monotonic()
        if process.poll() is not None:
            raise RuntimeError(f"surfer serve exited with code {process.returncode}: {tail(log)}")
        try:
            if httpx.get(base_url + "/models", timeout=2).status_code == 200:
                return Served(process, base_url, log, time.monotonic() - (launched or time.monotonic()))
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            stop(process)
            raise RuntimeError(f"vLLM did not answer within {timeout:.0f} s: {tail(log)}")
        time.sleep(1.0)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def tail(log: Path, lines: int = 25) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


_LOG_FACTS = {
    "weights_gib": re.compile(r"Model loading took ([\d.]+) GiB"),
    "kv_cache_gib": re.compile(r"Available KV cache memory: ([\d.]+) GiB"),
    "kv_cache_tokens": re.compile(r"GPU KV cache size: ([\d,]+) tokens"),
    "max_concurrency_at_max_len": re.compile(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x"),
    "mamba_cache_mode": re.compile(r"mamba_cache_mode[=: ]+'?(\w+)"),
}


def log_facts(text: str) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for name, pattern in _LOG_FACTS.items():
        match = pattern.search(text)
        if match:
            value = match.group(1).replace(",", "")
            facts[name] = value if name == "mamba_cache_mode" else float(value)
    return facts


def gpu_memory() -> dict[str, Any] | None:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    out = subprocess.run([smi, "--query-gpu=name,memory.used,memory.total", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0 or not out.stdout.strip():
        return None
    name, used, total = [p.strip() for p in out.stdout.strip().splitlines()[0].split(",")]
    return {"gpu": name, "used_mib": int(used), "total_mib": int(total)}


# -- the table -----------------------------------------------------------------------------


def table(results: dict[str, Any]) -> str:
    several = len(results.get("layouts") or ["window"]) > 1 or bool(results.get("variants"))
    head = ("| model | " + ("variant | " if several else "") + "c | steps/s | prompt tok/s | gen tok/s | step p50 / p95 s | call p50 / p95 s | "
            "prefix hit | KV use mean / max | running / waiting (mean) | unusable replies | bare calls/s | surfer / bare |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for model in results["models"]:
        for row in model.get("levels", []):
            s, srv = row["surfer"], row.get("surfer_server") or {}
            kv = srv.get("kv_cache_usage") or {}
            running, waiting = srv.get("running") or {}, srv.get("waiting") or {}
            hit = srv.get("prefix_cache_hit_rate")
            bare = row.get("bare") or {}
            ratio = (row.get("surfer_vs_bare") or {}).get("calls_per_s")
            lines.append(
                f"| {model['name']} | " + (f"{row.get('name', row.get('layout', 'window'))} | " if several else "") +
                f"{row['concurrency']} | {s['steps_per_s']:.2f} | {s['prompt_tokens_per_s']:.0f} | "
                f"{s['completion_tokens_per_s']:.0f} | {_fmt(s['step_p50'])} / {_fmt(s['step_p95'])} | "
                f"{_fmt(s['call_p50'])} / {_fmt(s['call_p95'])} | {_fmt(hit)} | "
                f"{_fmt(kv.get('mean'))} / {_fmt(kv.get('max'))} | {_fmt(running.get('mean'), 1)} / "
                f"{_fmt(waiting.get('mean'), 1)} | {s.get('unusable_outputs', '-')} | {_fmt(bare.get('calls_per_s'))} | {_fmt(ratio, 3)} |"
            )
    return "\n".join(lines)


def _fmt(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def ratios(results: dict[str, Any], levels: tuple[int, ...] = (64, 128)) -> dict[str, Any]:
    """Hybrid (holotron) over transformer (holo2) at the given levels, where both ran."""
    by_name = {m["name"]: {r["concurrency"]: r["surfer"] for r in m.get("levels", []) if r.get("layout", "window") == "window"}
               for m in results["models"]}
    if "holotron" not in by_name or "holo2" not in by_name:
        return {}
    out = {}
    for level in levels:
        a, b = by_name["holotron"].get(level), by_name["holo2"].get(level)
        if a and b:
            out[str(level)] = {key: round(a[key] / b[key], 3) if b[key] else None
                               for key in ("steps_per_s", "prompt_tokens_per_s", "completion_tokens_per_s")}
    return out


def layout_gains(results: dict[str, Any], reference: str = "window") -> dict[str, Any]:
    """Per model: each layout's steps/s and prefix-hit rate over `reference`'s at each level,
    and `--concurrency auto`'s steps/s over the best fixed level's, per layout."""
    out: dict[str, Any] = {}
    for model in results["models"]:
        rows = model.get("levels", [])
        by = {(r.get("layout", "window"), r["concurrency"]): r for r in rows}
        gains: dict[str, Any] = {}
        for (layout, level), row in by.items():
            ref = by.get((reference, level))
            if layout == reference or ref is None:
                continue
            hit, ref_hit = ((x.get("surfer_server") or {}).get("prefix_cache_hit_rate") for x in (row, ref))
            gains[f"{layout}/{reference} c={level}"] = {
                "steps_per_s": _ratio(row["surfer"]["steps_per_s"], ref["surfer"]["steps_per_s"]),
                "prefix_hit": [ref_hit, hit]}
        for layout in {key[0] for key in by}:
            fixed = [r["surfer"]["steps_per_s"] for (lay, level), r in by.items() if lay == layout and level != "auto"]
            auto = by.get((layout, "auto"))
            if auto and fixed:
                gains[f"{layout} auto/best fixed"] = _ratio(auto["surfer"]["steps_per_s"], max(fixed))
        out[model["name"]] = gains
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def variant_gains(results: dict[str, Any]) -> dict[str, Any]:
    """Per model: each variant's steady steps/s and computed prompt tokens per agent step over the
    first variant's at the same concurrency (the first variant is the reference)."""
    out: dict[str, Any] = {}
    for model in results["models"]:
        rows = [r for r in model.get("levels", []) if "name" in r]
        if not rows:
            continue
        reference = rows[0]["name"]
        by_level = {r["concurrency"]: r for r in rows if r["name"] == reference}
        gains: dict[str, Any] = {}
        for row in rows:
            ref = by_level.get(row["concurrency"])
            if ref is None or row is ref:
                continue
            mine, theirs = (x["surfer"].get("steady") or {} for x in (row, ref))
            gains[f"{row['name']}/{reference} c={row['concurrency']}"] = {
                "steady_steps_per_s": _ratio(mine.get("steps_per_s"), theirs.get("steps_per_s")),
                "computed_tokens_per_step": [theirs.get("computed_prompt_tokens_per_step"), mine.get("computed_prompt_tokens_per_step")],
            }
        out[model["name"]] = gains
    return out


def steady_table(results: dict[str, Any]) -> str:
    """One line per run: the steady window's figures."""
    head = ("| model | variant | c | steady steps/s | step p50 / p95 s | steps/session | computed tok/step | "
            "prompt tok/step | prefix hit | KV use mean / max | running / waiting (mean) | preemptions | complete |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for model in results["models"]:
        for row in model.get("levels", []):
            st = row["surfer"].get("steady")
            if not st:
                lines.append(f"| {model['name']} | {row.get('name', row.get('layout'))} | {row['concurrency']} | "
                             "no steady window (a session never finished its first step) |" + " |" * 9)
                continue
            kv, running, waiting = (st.get(k) or {} for k in ("kv_cache_usage", "running", "waiting"))
            lines.append(
                f"| {model['name']} | {row.get('name', row.get('layout'))} | {row['concurrency']} | {_fmt(st['steps_per_s'])} | "
                f"{_fmt(st['step_p50'])} / {_fmt(st['step_p95'])} | {st['min_steps_per_session']}+ | "
                f"{_fmt(st.get('computed_prompt_tokens_per_step'), 0)} | {_fmt(st.get('prompt_tokens_per_step'), 0)} | "
                f"{_fmt(st.get('prefix_cache_hit_rate'))} | {_fmt(kv.get('mean'))} / {_fmt(kv.get('max'))} | "
                f"{_fmt(running.get('mean'), 1)} / {_fmt(waiting.get('mean'), 1)} | {_fmt(st.get('preemptions'), 0)} | "
                f"{'yes' if st['complete'] else 'no'} |"
            )
    return "\n".join(lines)


# -- the command -------------------------------------------------------------------------


def run_gpu_bench(models: list[tuple[str, str]], *, levels: list[int], window: float, replay: str,
                  base_url: str | None, port: int, serve_timeout: float, bare: bool, log_dir: Path,
                  extra: tuple[str, ...] = (), say: Any = print, progress: Any = None,
                  layouts: tuple[str, ...] = ("window",), auto: bool = False, auto_interval: float = 5.0,
                  auto_only: bool = False, variants: list[Variant] | None = None, min_steps: int = 0,
                  session_steps: int = 0) -> dict[str, Any]:
    """Serve and measure each model in turn (one server start per model, every variant inside it);
    `progress(results)` is called whenever a level or model is done."""
    from surfer.agent.config import AgentConfig
    from surfer.apps.options import replay_recordings
    from surfer.models.profiles import get_profile

    from surfer.tools.replay import lengthened

    recordings = [lengthened(r, session_steps) for r in replay_recordings("replay", replay)]
    results: dict[str, Any] = {"levels": levels, "layouts": list(layouts), "auto": auto, "window_seconds": window, "replay": replay,
                               "min_steps": min_steps, "session_steps": session_steps, "variants": [v.label() for v in variants] if variants else None,
                               "recordings": [r.name for r in recordings], "models": []}
    for shape, where in models:
        entry: dict[str, Any] = {"name": shape, "model": where, "levels": []}
        results["models"].append(entry)
        served: Served | None = None
        try:
            if base_url:
                url, model = base_url, where
            else:
                log_dir.mkdir(parents=True, exist_ok=True)
                say(f"{shape}: starting vLLM for {where} …")
                started = time.monotonic()
                everything = variants or [Variant(layout=layout) for layout in layouts]
                images = max(v.max_images(get_profile(shape)) for v in everything)
                top = max([*levels, *(v.concurrency for v in everything if isinstance(v.concurrency, int))])
                served = serve_model(shape, Path(where), port, top, log_dir / f"vllm-{shape}.log",
                                     serve_timeout, extra, layout="blocks" if "blocks" in layouts else "window", images=images)
                entry["engine_start_seconds"] = round(served.start_seconds, 1)
                entry["serve_seconds"] = round(time.monotonic() - started, 1)
                say(f"{shape}: vLLM answered after {served.start_seconds:.0f} s")
                url, model = served.base_url, where
            # one step more than the longest recording: a replay ends when its recording does, never with a final answer
            config = AgentConfig(base_url=url, model=model, profile=shape, request_timeout=600.0, max_seconds=3600,
                                 max_steps=max(30, *(len(r.frames) + 1 for r in recordings)))
            asyncio.run(bench_levels(config, recordings, levels, window, bare=bare, out=entry["levels"],
                                     say=lambda t, s=shape: say(f"{s}: {t}"),
                                     progress=lambda: progress and progress(results),
                                     layouts=layouts, auto=auto, auto_interval=auto_interval, auto_only=auto_only,
                                     variants=variants, min_steps=min_steps))
            entry["gpu_memory"] = gpu_memory()
        except (RuntimeError, OSError) as exc:
            entry["error"] = str(exc)
            say(f"{shape}: failed: {exc}")
        finally:
            if served is not None:
                stop(served.process)
                entry.update(log_facts(served.log.read_text(errors="replace")))
            if progress:
                progress(results)
    results["hybrid_over_transformer"] = ratios(results)
    results["layout_gains"] = layout_gains(results) if not variants else {}
    results["variant_gains"] = variant_gains(results)
    return results


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    gpu_app = typer.Typer(no_args_is_help=True, help="surfer driving vLLM on a GPU: dummy-weight models, session-shaped load.")
    bench_app.add_typer(gpu_app, name="gpu")

    @gpu_app.command("make-model")
    def make_model_command(
        shape: str = typer.Argument(..., help="holotron (NemotronH_Nano_VL_V2, Holotron-12B's shape) or holo2 (Qwen3-VL-8B)."),
        out: Path = typer.Argument(..., help="New directory to write (config, tokenizer, chat template, processor config)."),
    ) -> None:
        """Write a model directory that vLLM serves with --load-format dummy (random weights)."""
        from surfer.apps.gpu_models import make_model

        try:
            config = make_model(shape, out)
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"wrote {out} ({config['architectures'][0]})")

    @gpu_app.command("run")
    def run_command(
        model: list[str] = typer.Option(..., "--model", help="SHAPE=DIR (holotron=… / holo2=…); with --base-url, SHAPE=served model name."),
        levels_text: str = typer.Option(DEFAULT_LEVELS, "--levels", help="Concurrency levels, comma-separated."),
        window: float = typer.Option(60.0, "--window", help="Seconds each run (surfer, then bare) may take per level."),
        replay: str = typer.Option("demo", "--replay", help="Recorded runs to replay ('demo' = the shipped set)."),
        base_url: Optional[str] = typer.Option(None, "--base-url", help="Use this running server instead of starting vLLM."),
        port: int = typer.Option(8000, "--port", help="Port for the vLLM servers started."),
        serve_timeout: float = typer.Option(600.0, "--serve-timeout", help="Seconds to wait for vLLM to answer."),
        no_bare: bool = typer.Option(False, "--no-bare", help="Skip the bare load generator."),
        out: Path = typer.Option(Path("gpu-bench.json"), "--out", help="JSON results."),
        log_dir: Path = typer.Option(Path("gpu-bench-logs"), "--log-dir", help="vLLM logs."),
        vllm_args: Optional[str] = typer.Option(None, "--vllm-args", help="More `vllm serve` arguments, one string."),
        layouts_text: str = typer.Option("window", "--layouts", help="Prompt layouts to compare, comma-separated (window,blocks)."),
        auto: bool = typer.Option(False, "--auto", help="Also run --concurrency auto (up to the highest level) per layout."),
        auto_interval: float = typer.Option(5.0, "--auto-interval", help="Seconds between --concurrency auto's decisions."),
        auto_only: bool = typer.Option(False, "--auto-only", help="Run only --concurrency auto (starting at the lowest level, up to the highest)."),
        variants_text: Optional[str] = typer.Option(
            None, "--variants", help="Client-side variants compared in one server start: 'layout=window,continuation=off; "
            "layout=blocks,continuation=on,concurrency=64|128' or a .json/.toml file (see surfer/apps/gpu_variants.py)."),
        session_steps: int = typer.Option(
            30, "--session-steps", min=0, help="Replay each recording as a session of this many steps (its screenshots "
            "again from the first, marked per pass so none repeats); 0: the recording's length."),
        min_steps: int = typer.Option(
            5, "--min-steps", min=0, help="Steady window: after every session's first step, until each did this many more "
            "steps; the run then stops (--window is its time limit). 0: run the whole --window."),
    ) -> None:
        """Serve each model, run surfer batches over the replay environment and the bare generator; print a table."""
        import shlex

        try:
            levels = parse_levels(levels_text)
            from surfer.agent.layouts import check_layout

            layouts = tuple(check_layout(name.strip()) for name in layouts_text.split(",") if name.strip())
            from .gpu_variants import parse_variants

            variants = parse_variants(variants_text) if variants_text else None
            pairs = []
            for item in model:
                shape, _, where = item.partition("=")
                if shape not in ("holotron", "holo2") or not where:
                    raise ConfigError(f"--model takes holotron=DIR or holo2=DIR, got {item!r}")
                pairs.append((shape, where))
            results = run_gpu_bench(pairs, levels=levels, window=window, replay=replay, base_url=base_url, port=port,
                                    serve_timeout=serve_timeout, bare=not no_bare, log_dir=log_dir,
                                    extra=tuple(shlex.split(vllm_args or "")), layouts=layouts, auto=auto,
                                    auto_interval=auto_interval, auto_only=auto_only, variants=variants, min_steps=min_steps,
                                    session_steps=session_steps, progress=lambda partial: out.write_text(json.dumps(partial, indent=2)))
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        out.write_text(json.dumps(results, indent=2))
        typer.echo(table(results))
        typer.echo(steady_table(results))
        for level, values in results["hybrid_over_transformer"].items():
            typer.echo(f"holotron / holo2 at c={level}: {values}")
        for name, gains in [*results["layout_gains"].items(), *results["variant_gains"].items()]:
            for key, value in gains.items():
                typer.echo(f"{name} {key}: {value}")
        typer.echo(f"results: {out}")
        raise typer.Exit(1 if any("error" in m for m in results["models"]) else 0)
