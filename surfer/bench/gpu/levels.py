"""One load level of `surfer bench gpu`: surfer's sessions over the replay
environment for a time window, recording what they send, then the bare
generator replaying those request bodies at the same concurrency."""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from surfer.bench.throughput import percentile
from surfer.models.backend import ModelBackend, ModelRequest
from surfer.models.metrics import MetricsSampler

from .backends import WARM, NoEnding, RecordingBackend, SentRequest, WarmStart, bench_session
from .steady import SteadyWindow, counter_figures, gauge_figures
from .variants import Variant
from .variants import runs as variant_runs

if TYPE_CHECKING:  # imported where used: building the CLI (`surfer --help`) loads no pydantic model
    from surfer.agent.events import Event



def _httpx() -> Any:
    from surfer.models.json_http import http_library

    return http_library()


async def reset_server_caches(root: str) -> bool:
    """Empty the server's caches between runs: vLLM's prefix and multimodal caches (needs
    VLLM_SERVER_DEV_MODE=1), SGLang's radix cache (`/flush_cache`, which waits up to a minute for
    the server to be idle); False where refused."""
    from surfer.models.image_refs import server_emptied
    from surfer.models.metrics import engine_of, read_metrics

    httpx = _httpx()
    ok = True
    async with httpx.AsyncClient(timeout=90) as client:
        engine = engine_of(await read_metrics(client, root.rstrip("/") + "/metrics"))
        paths = ("/flush_cache?timeout=60",) if engine == "sglang" else ("/reset_prefix_cache", "/reset_mm_cache")
        for path in paths:
            try:
                ok &= (await client.post(root.rstrip("/") + path)).status_code == 200
            except httpx.HTTPError:
                ok = False
    server_emptied(root)  # the images surfer sent as uuids alone must go in full again
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
    session_errors: list[str] = field(default_factory=list)  # why each session that ended in an error did
    # (status, steps) of each session that ended on its own (not the ones the window's end cancelled), from its
    # Finished event: the batch's index may not hold the last ones yet when the steady window closes
    ended: list[tuple[str, int]] = field(default_factory=list)
    steady: SteadyWindow | None = None
    warm_steps: int = 0  # each session's first steps, answered by WarmStart: not counted

    def __call__(self, event: Event) -> None:
        from surfer.agent.events import Finished, ModelCalled, RunStarted, StepFinished

        if isinstance(event, RunStarted):
            bench_session.set(event.run_id)  # runs in the session's own task: tags its requests
            if self.steady is not None:
                self.steady.session_started(event.run_id)
        elif isinstance(event, Finished):
            if event.result.status != "interrupted":
                self.ended.append((str(event.result.status), int(event.result.steps)))
            if getattr(event.result, "status", None) == "error":
                self.session_errors.append(str(event.result.reason or "no reason given"))
            if self.steady is not None:
                self.steady.session_ended(bench_session.get())
        elif isinstance(event, StepFinished):
            if event.record.index <= self.warm_steps:
                return
            self.steps.append(event.record.timings.total)
            if self.steady is not None:
                self.steady.step_finished(bench_session.get(), event.record.timings.total)
        elif isinstance(event, ModelCalled):
            if event.call.structured == WARM:
                return
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
            "call_p50": _round(percentile(self.calls, 0.5)),
            "call_p95": _round(percentile(self.calls, 0.95)),
        }


def fmt(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


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
                       sampler: MetricsSampler | None = None, warm_steps: int = 0, no_ending: bool = False,
                       ) -> tuple[dict[str, Any], list[SentRequest]]:
    """Run `sessions` replay tasks (default 2 × concurrency) with
    `concurrency` sessions (or "auto", with AutoConcurrency options `auto`) for at most `window` s; with
    `min_steps`, stop once the steady window closed (every session running after the ramp did that many
    more steps). With `warm_steps`, each session's first steps are answered without the server
    (WarmStart) and not counted: the run measures sessions that already hold that much history. With
    `no_ending`, the policy cannot end or pause a session (NoEnding)."""
    from surfer.fleet.batch import Batch, BatchTask
    from surfer.models.http import OpenAICompatibleBackend

    generated: dict[int, dict[str, Any]] = {}

    def tap(request: ModelRequest, body: dict[str, Any]) -> None:
        generated[id(request)] = body

    http = OpenAICompatibleBackend(config.endpoint("policy"), on_generate=tap)
    callers = [http]  # the HTTP backends that make the calls (their request paths are reported)
    if config.placed("policy"):  # several servers: sessions placed (or each request to the next, as configured)
        from surfer.models.affinity import PlacedBackend

        callers = []

        def connect(endpoint: Any) -> Any:
            callers.append(OpenAICompatibleBackend(endpoint, on_generate=tap))
            return callers[-1]

        placed = PlacedBackend(config.server_specs(), connect, config.server_placement, model=config.policy.model,
                               api_key=config.policy.api_key)
        recording = RecordingBackend(placed, shaper=http, generated=generated)
    else:
        recording = RecordingBackend(http, generated=generated)
    backend: ModelBackend = WarmStart(recording, warm_steps) if warm_steps else recording
    if no_ending:
        backend = NoEnding(backend)
    # twice as many tasks as sessions keep the slots full: sessions also end before --session-steps (a
    # random-weight model gives up or answers), and one not replaced shrinks the load and closes the window
    count = sessions or max(4, 2 * int(concurrency))
    tasks = [BatchTask(id=f"s{k:04d}", task=_TASK, group=f"s{k:04d}") for k in range(count)]
    cohort = int((auto or {}).get("start", 1)) if concurrency == "auto" else int(concurrency)
    steady = SteadyWindow(min(cohort, count), min_steps, sessions_total=count)
    tally = LevelTally(steady=steady, warm_steps=warm_steps)
    batch = Batch(config, tasks, work, concurrency=concurrency, backend=backend, listeners=[tally], replay=recordings,
                  auto=auto if concurrency == "auto" else None)
    try:
        await backend.check()  # the HTTP client is made before the window, as the bare generator's is
        await batch.read_replays()  # and the screenshots read: the bare generator sends them ready-made
        steady.start = time.monotonic()
        seconds, stopped, readings = await _steady_run(batch.run(), window, steady, sampler)
    finally:
        await backend.aclose()
    finished = tally.ended
    statuses: dict[str, int] = {}
    for status, _ in finished:
        statuses[status] = statuses.get(status, 0) + 1
    result = {
        "steps": len(tally.steps),
        "steps_per_s": round(len(tally.steps) / seconds, 4),
        "step_p50": _round(percentile(tally.steps, 0.5)),
        "step_p95": _round(percentile(tally.steps, 0.95)),
        "sessions_finished": len(finished),
        "steps_per_session": round(sum(steps for _, steps in finished) / len(finished), 2) if finished else None,
        "statuses": statuses,
        "unusable_outputs": tally.failed_calls,
        # sessions that errors ended (the load changed as they did: fewer ran, or shallower ones replaced them)
        "sessions_errored": len(tally.session_errors),
        "session_error": tally.session_errors[0][:300] if tally.session_errors else None,
        **tally.rates(seconds),
        "steady": steady_figures(steady, stopped, readings, sampler),
        "steady_missing": None if steady.t0 is not None else steady.missing(stopped),
    }
    if batch.auto is not None:
        result["concurrency_control"] = batch.concurrency_report
    # the path the requests took (tokens in or chat, and why) and, by tokens in, how many continued their session's last
    # (several servers: the first one's path, and the chains of all of them summed)
    result["request_path"] = next((c.path.reason for c in callers if c.path is not None), None)
    chains = [c.generate.chain.stats.as_dict() for c in callers if c.generate is not None]
    if chains:
        result["tokens_in"] = summed(chains)
    return result, recording.sent


async def bare_level(base_url: str | list[str], sent: list[SentRequest], concurrency: int, window: float,
                     timeout: float = 600.0) -> dict[str, Any]:
    """Replay `sent` (each session's requests in order, `concurrency` sessions at once) for at most `window` s;
    with several servers, session k at server k mod n (each session's requests at one server)."""
    httpx = _httpx()
    by_session: dict[str, list[SentRequest]] = {}
    for item in sent:
        by_session.setdefault(item.session, []).append(item)
    urls = [u.rstrip("/") for u in ([base_url] if isinstance(base_url, str) else base_url)]
    queue: asyncio.Queue[tuple[str, list[SentRequest]]] = asyncio.Queue()
    for number, items in enumerate(by_session.values()):
        queue.put_nowait((urls[number % len(urls)], items))
    tally = LevelTally()
    limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8)

    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        async def session() -> None:
            while not queue.empty():
                url, items = queue.get_nowait()
                for item in items:
                    started = time.perf_counter()
                    response = await client.post(sent_url(url, item.path), json=item.body)
                    seconds = time.perf_counter() - started
                    response.raise_for_status()
                    prompt, completion = answer_usage(response.json())
                    tally.calls.append(seconds)
                    tally.prompt_tokens += prompt
                    tally.completion_tokens += completion

        async def everyone() -> None:
            await asyncio.gather(*(session() for _ in range(min(concurrency, len(by_session)))))

        seconds = await _timed(everyone(), window)
    return {"sessions": len(by_session), **tally.rates(seconds)}


def summed(counts: list[dict[str, Any]]) -> dict[str, Any]:
    """Counters of the same shape added up, key by key (nested dicts too)."""
    out: dict[str, Any] = {}
    for count in counts:
        for key, value in count.items():
            out[key] = summed([out.get(key, {}), value]) if isinstance(value, dict) else out.get(key, 0) + value
    return out


def sent_url(base_url: str, path: str) -> str:
    """Where a recorded request goes: chat completions under the OpenAI base URL, SGLang's /generate at
    the server's root."""
    if path == "generate":
        return base_url.removesuffix("/v1") + "/generate"
    return f"{base_url}/{path}"


def answer_usage(answer: Any) -> tuple[int, int]:
    """(prompt, completion) tokens of a chat completion's or a /generate answer."""
    if isinstance(answer, list):  # /generate answers a list for a batch of inputs
        answer = answer[0] if answer else {}
    usage = answer.get("usage") or answer.get("meta_info") or {}
    return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)


_TASK = (
    "Register as a new library member named Ada Lovelace with the email ada@example.com, "
    "then report the confirmation code shown."
)


async def bench_levels(config: Any, recordings: list[Any], levels: list[int], window: float, *,
                       bare: bool = True, say: Any = print, out: list[dict[str, Any]] | None = None,
                       progress: Any = None, layouts: tuple[str, ...] = ("window",), auto: bool = False,
                       auto_interval: float = 5.0, auto_only: bool = False, variants: list[Variant] | None = None,
                       min_steps: int = 0, no_ending: bool = False) -> list[dict[str, Any]]:
    """Every variant (default: one per prompt layout) at every level against the server in `config`
    (surfer, then the bare replay of what it sent), plus `--concurrency auto` when `auto` (only that
    when `auto_only`: the levels then give its start and ceiling); a variant with a concurrency of
    its own runs at that only. Rows are appended to `out` as they finish, and `progress()` called after each."""
    from surfer.models.profiles import get_profile

    urls = [spec.endpoint.base_url for spec in config.server_specs()]
    roots = [url.rstrip("/").removesuffix("/v1") for url in urls]
    out = [] if out is None else out
    profile = get_profile(config.profile)
    chosen = variant_runs(variants or [Variant(layout=layout) for layout in layouts], levels, auto, auto_only)
    top = max([*levels, *(v.concurrency for v in chosen if isinstance(v.concurrency, int))])
    # a cancelled session's file writes may still be finishing in their threads when the window ends
    with tempfile.TemporaryDirectory(prefix="surfer-gpu-", ignore_cleanup_errors=True) as tmp:
        for number, variant in enumerate(chosen):
            level = variant.concurrency
            assert level is not None
            reset = all([await reset_server_caches(root) for root in roots])
            run_config = config.model_copy(update=variant.config_update())
            options = {"start": min(levels), "maximum": top, "interval": auto_interval, "fallback": top}
            async with MetricsSampler(roots) as sampler:
                surfer, sent = await surfer_level(run_config, recordings, level, window, Path(tmp) / f"run{number}-c{level}",
                                                  sessions=2 * top if level == "auto" else None, auto=options,
                                                  # auto runs the whole window: its controller needs the time to settle
                                                  min_steps=0 if level == "auto" else min_steps, sampler=sampler,
                                                  warm_steps=variant.warm_steps or 0, no_ending=no_ending)
            row: dict[str, Any] = {"name": variant.label(), "variant": variant.resolved(profile), "layout": variant.layout,
                                   "concurrency": level, "caches_reset": reset, "surfer": surfer,
                                   "surfer_server": sampler.summary()}
            if bare and sent and level != "auto":
                for root in roots:
                    await reset_server_caches(root)
                async with MetricsSampler(roots) as sampler:
                    row["bare"] = await bare_level(urls, sent, int(level), window, config.request_timeout)
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
        line += (f"  steady {fmt(steady['steps_per_s'])} steps/s over {steady['seconds']:.0f} s"
                 f" ({steady['min_steps_per_session']}+ steps/session), computed {fmt(steady.get('computed_prompt_tokens_per_step'), 0)} tok/step")
    if "surfer_vs_bare" in row:
        line += f"  surfer/bare calls/s {row['surfer_vs_bare']['calls_per_s']}"
    return line


