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
(surfer/fleet/concurrency.py, up to the highest level) per layout; the
results then hold blocks-over-window steps/s and prefix-hit ratios per
level, and auto's steps/s over the best fixed level's.
With `--variants` (surfer/bench/gpu/variants.py) each run is one variant of
the client-side settings (layout, role continuation, image budget, history
depth, sessions), all within one server start per model; the results then
hold each variant's steady steps/s and computed tokens per agent step over
the first variant's.

Every run also reports a steady-state window (surfer/bench/gpu/steady.py):
steps counted only after every session has finished its first step, until
each has done `--min-steps` more (the run then stops; `--window` is the time
limit), with the prompt tokens the engine computed per agent step from
vLLM's counters.

With `--base-url`, an already running server is used instead (no serving;
the tests use the stand-in server this way).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Optional

import typer

from surfer.bench.gpu.emulate import DEFAULT_VARIANT, auto_against_fixed, check_times, emulated_server
from surfer.bench.gpu.levels import bench_levels, fmt
from surfer.bench.gpu.serving import Served, gpu_memory, log_facts, serve_model, stop
from surfer.bench.gpu.variants import Variant
from surfer.bench.throughput import parse_levels
from surfer.core.errors import ConfigError

DEFAULT_LEVELS = "1,16,64,128"




# -- the table -----------------------------------------------------------------------------


def table(results: dict[str, Any]) -> str:
    several = len(results.get("layouts") or ["window"]) > 1 or bool(results.get("variants"))
    head = ("| model | " + ("variant | " if several else "") + "c | steps/s | prompt tok/s | gen tok/s | step p50 / p95 s | call p50 / p95 s | "
            "prefix / image cache hit | KV use mean / max | running / waiting (mean) | unusable replies | errored sessions | bare calls/s | surfer / bare |")
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
                f"{s['completion_tokens_per_s']:.0f} | {fmt(s['step_p50'])} / {fmt(s['step_p95'])} | "
                f"{fmt(s['call_p50'])} / {fmt(s['call_p95'])} | {fmt(hit)} / {fmt(srv.get('mm_cache_hit_rate'))} | "
                f"{fmt(kv.get('mean'))} / {fmt(kv.get('max'))} | {fmt(running.get('mean'), 1)} / "
                f"{fmt(waiting.get('mean'), 1)} | {s.get('unusable_outputs', '-')} | {s.get('sessions_errored', '-')} | {fmt(bare.get('calls_per_s'))} | {fmt(ratio, 3)} |"
            )
    return "\n".join(lines)


def error_warnings(results: dict[str, Any]) -> list[str]:
    """A line for each run in which errors ended sessions: sessions that end early change the load (fewer
    run, or shallower ones replace them), so its steps/s is not the level's as such (with random
    weights, e.g. NaN logits that the grammar rejects: HTTP 500)."""
    lines = []
    for model in results["models"]:
        for row in model.get("levels", []):
            s = row["surfer"]
            if s.get("sessions_errored"):
                lines.append(f"warning: {model['name']} {row.get('name', row.get('layout', 'window'))} c={row['concurrency']}: "
                             f"{s['sessions_errored']} of {s.get('sessions_finished')} sessions ended in an error, which "
                             f"changed the load; not a figure for the level as such (first: {s.get('session_error')})")
    return lines


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
            "prompt tok/step | prefix / image cache hit | KV use mean / max | running / waiting (mean) | preemptions | complete |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for model in results["models"]:
        for row in model.get("levels", []):
            st = row["surfer"].get("steady")
            if not st:
                lines.append(f"| {model['name']} | {row.get('name', row.get('layout'))} | {row['concurrency']} | "
                             f"no steady window ({row['surfer'].get('steady_missing') or 'a session never finished its first step'}) |"
                             + " |" * 9)
                continue
            kv, running, waiting = (st.get(k) or {} for k in ("kv_cache_usage", "running", "waiting"))
            lines.append(
                f"| {model['name']} | {row.get('name', row.get('layout'))} | {row['concurrency']} | {fmt(st['steps_per_s'])} | "
                f"{fmt(st['step_p50'])} / {fmt(st['step_p95'])} | {st['min_steps_per_session']}+ | "
                f"{fmt(st.get('computed_prompt_tokens_per_step'), 0)} | {fmt(st.get('prompt_tokens_per_step'), 0)} | "
                f"{fmt(st.get('prefix_cache_hit_rate'))} / {fmt(st.get('mm_cache_hit_rate'))} | {fmt(kv.get('mean'))} / {fmt(kv.get('max'))} | "
                f"{fmt(running.get('mean'), 1)} / {fmt(waiting.get('mean'), 1)} | {fmt(st.get('preemptions'), 0)} | "
                f"{'yes' if st['complete'] else 'no (' + st.get('closed_by', 'time limit') + ')'} |"
            )
    return "\n".join(lines)


# -- the command -------------------------------------------------------------------------


def run_gpu_bench(models: list[tuple[str, str]], *, levels: list[int], window: float, replay: str,
                  base_url: str | list[str] | None, port: int, serve_timeout: float, bare: bool, log_dir: Path,
                  extra: tuple[str, ...] = (), say: Any = print, progress: Any = None,
                  layouts: tuple[str, ...] = ("window",), auto: bool = False, auto_interval: float = 5.0,
                  auto_only: bool = False, variants: list[Variant] | None = None, min_steps: int = 0,
                  session_steps: int = 0, engine: str = "vllm", placement: str = "session",
                  no_ending: bool = False) -> dict[str, Any]:
    """Serve and measure each model in turn (one server start per model, every variant inside it);
    `progress(results)` is called whenever a level or model is done. `base_url`: running servers instead
    (several: each session placed on one, or with `placement="round-robin-per-request"` each request to
    the next, as a load balancer without affinity would)."""
    from surfer.agent.config import AgentConfig
    from surfer.apps.options import replay_recordings
    from surfer.models.profiles import get_profile
    from surfer.tools.replay import lengthened

    check_times(window, auto_interval if auto else None)
    recordings = [lengthened(r, session_steps) for r in replay_recordings("replay", replay)]
    shortest = min(len(r.frames) for r in recordings)
    for variant in variants or []:
        if variant.warm_steps and variant.warm_steps + 1 + min_steps > shortest:
            raise ConfigError(f"--variants {variant.label()}: sessions of {shortest} steps cannot do {variant.warm_steps} "
                              f"warm-up steps and {1 + min_steps} measured ones; raise --session-steps "
                              f"to {variant.warm_steps + 1 + min_steps} or more")
    results: dict[str, Any] = {"levels": levels, "layouts": list(layouts), "auto": auto, "window_seconds": window, "replay": replay,
                               "min_steps": min_steps, "session_steps": session_steps, "no_ending": no_ending, "variants": [v.label() for v in variants] if variants else None,
                               "recordings": [r.name for r in recordings], "models": []}
    urls = [base_url] if isinstance(base_url, str) else list(base_url or [])
    if len(urls) > 1:
        results.update(servers=urls, placement=placement)
    for shape, where in models:
        entry: dict[str, Any] = {"name": shape, "model": where, "levels": []}
        results["models"].append(entry)
        served: Served | None = None
        try:
            if urls:
                url, model = urls[0], where
            else:
                log_dir.mkdir(parents=True, exist_ok=True)
                say(f"{shape}: starting {engine} for {where} …")
                started = time.monotonic()
                everything = variants or [Variant(layout=layout) for layout in layouts]
                images = max(v.max_images(get_profile(shape)) for v in everything)
                top = max([*levels, *(v.concurrency for v in everything if isinstance(v.concurrency, int))])
                served = serve_model(shape, Path(where), port, top, log_dir / f"{engine}-{shape}.log",
                                     serve_timeout, extra, layout="blocks" if "blocks" in layouts else "window", images=images,
                                     engine=engine)
                entry["engine_start_seconds"] = round(served.start_seconds, 1)
                entry["serve_seconds"] = round(time.monotonic() - started, 1)
                say(f"{shape}: {engine} answered after {served.start_seconds:.0f} s")
                url, model = served.base_url, where
            entry["engine"] = server_engine(url)  # what the server's /metrics say it is
            # one step more than the longest recording: a replay ends when its recording does, never with a final answer
            config = AgentConfig(base_url=url, model=model, profile=shape, request_timeout=600.0, max_seconds=3600,
                                 max_steps=max(30, *(len(r.frames) + 1 for r in recordings)),
                                 servers=urls if len(urls) > 1 else [], server_placement=placement)
            asyncio.run(_watched(bench_levels(config, recordings, levels, window, bare=bare, out=entry["levels"],
                                              say=lambda t, s=shape: say(f"{s}: {t}"),
                                              progress=lambda: progress and progress(results),
                                              layouts=layouts, auto=auto, auto_interval=auto_interval, auto_only=auto_only,
                                              variants=variants, min_steps=min_steps, no_ending=no_ending)))
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


def server_engine(base_url: str) -> str | None:
    """"vllm" or "sglang", as the server's /metrics page names its series (None: no such page)."""
    from surfer.models.json_http import http_library
    from surfer.models.metrics import engine_of, read_metrics

    async def read() -> str | None:
        async with http_library().AsyncClient(timeout=10) as client:
            return engine_of(await read_metrics(client, base_url.rstrip("/").removesuffix("/v1") + "/metrics"))

    return asyncio.run(read())


async def _watched(work: Any) -> Any:
    """`work` with a watchdog that prints every thread's stack when the event loop is held for 30 s
    (a held loop stops every session and every time limit; on a GPU lease, the stacks say why)."""
    from surfer.core.watchdog import LoopWatchdog

    async with LoopWatchdog(after=30.0):
        return await work


def register(bench_app: typer.Typer) -> None:
    gpu_app = typer.Typer(no_args_is_help=True, help="surfer driving vLLM on a GPU: dummy-weight models, session-shaped load.")
    bench_app.add_typer(gpu_app, name="gpu")
    from surfer.bench.gpu.placement import register as register_placement

    register_placement(gpu_app, run_gpu_bench)  # emulate-servers

    @gpu_app.command("emulate")
    def emulate_command(
        levels_text: str = typer.Option("2,4,8", "--levels", help="Fixed levels; auto starts at the lowest, up to the highest."),
        prefix_capacity: int = typer.Option(20000, "--prefix-capacity", min=1, help="Tokens the stand-in's prefix cache keeps."),
        token_seconds: float = typer.Option(0.0001, "--token-seconds", min=0.0, help="Seconds per prompt token not in that cache."),
        window: float = typer.Option(30.0, "--window", help="Seconds each run may take."),
        auto_interval: float = typer.Option(1.0, "--auto-interval", help="Seconds between auto's decisions."),
        session_steps: int = typer.Option(30, "--session-steps", min=1, help="Steps per replayed session."),
        variant: str = typer.Option(DEFAULT_VARIANT, "--variant", help="The client-side variant (see `surfer bench gpu run --variants`)."),
        out: Path = typer.Option(Path("gpu-emulated.json"), "--out", help="JSON results."),
    ) -> None:
        """Fixed levels and --concurrency auto against a stand-in whose prefix cache keeps a few deep sessions (CPU)."""
        from surfer.bench.gpu.variants import parse_variants

        try:
            levels, variants = parse_levels(levels_text, "--levels"), parse_variants(variant)
            check_times(window, auto_interval)  # (before the stand-in starts)
            with emulated_server(prefix_capacity, token_seconds) as server:
                results = run_gpu_bench([("holo2", server.model)], levels=levels, window=window, replay="demo",
                                        base_url=server.base_url, port=0, serve_timeout=0, bare=False, log_dir=out.parent,
                                        auto=True, auto_interval=auto_interval, variants=variants, min_steps=0,
                                        session_steps=session_steps)
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        results["stand_in"] = {"prefix_capacity": prefix_capacity, "token_seconds": token_seconds}
        results["auto_vs_best_fixed"] = auto_against_fixed(results)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2))
        typer.echo(table(results))
        typer.echo(steady_table(results))
        for line in error_warnings(results):
            typer.echo(line, err=True)
        for row in results["auto_vs_best_fixed"]["rows"]:
            typer.echo(f"c={row['concurrency']}: {row['steps_per_s']} steps/s, prefix hit {row['prefix_hit']}")
        typer.echo(f"auto / best fixed: {results['auto_vs_best_fixed']['ratio']}")
        typer.echo(f"results: {out}")

    @gpu_app.command("make-model")
    def make_model_command(
        shape: str = typer.Argument(..., help="holotron (NemotronH_Nano_VL_V2, Holotron-12B's shape) or holo2 (Qwen3-VL-8B)."),
        out: Path = typer.Argument(..., help="New directory to write (config, tokenizer, chat template, processor config)."),
    ) -> None:
        """Write a model directory that vLLM serves with --load-format dummy (random weights)."""
        from surfer.bench.gpu.models import make_model

        try:
            config = make_model(shape, out)
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"wrote {out} ({config['architectures'][0]})")

    @gpu_app.command("flops")
    def flops_command(
        files: list[Path] = typer.Argument(..., help="JSON results of `surfer bench gpu run`."),
        peak: float = typer.Option(989.4, "--peak", help="The GPU's dense BF16 TFLOP/s (H100 and H200 SXM: 989.4)."),
        json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the rows as JSON here."),
    ) -> None:
        """FLOPs per agent step of every row (prefill of the tokens the engine computed, decode, the vision
        encoder on the step's new screenshot) and the TFLOP/s the GPU achieved: why one model or setting
        gives fewer steps/s than another."""
        from surfer.bench.gpu.flops import flops_table

        try:
            rows, text = flops_table(files, peak)
        except (OSError, ValueError, KeyError, ConfigError) as exc:
            typer.echo(f"error: cannot read the results: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(text)
        if json_out:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(rows, indent=2))
            typer.echo(f"rows: {json_out}")

    @gpu_app.command("run")
    def run_command(
        model: list[str] = typer.Option(..., "--model", help="SHAPE=DIR (holotron=… / holo2=…); with --base-url, SHAPE=served model name."),
        levels_text: str = typer.Option(DEFAULT_LEVELS, "--levels", help="Concurrency levels, comma-separated."),
        window: float = typer.Option(60.0, "--window", help="Seconds each run (surfer, then bare) may take per level."),
        replay: str = typer.Option("demo", "--replay", help="Recorded runs to replay ('demo' = the shipped set)."),
        base_url: Optional[list[str]] = typer.Option(
            None, "--base-url", help="Use this running server (vLLM or SGLang) instead of starting one; repeat for several "
            "(e.g. `surfer serve --gpus N`'s replicas): each session is placed on one."),
        placement: str = typer.Option(
            "session", "--placement", help="With several --base-url: session (each session keeps one server, surfer's "
            "placement) or round-robin-per-request (each request to the next server: a load balancer without affinity, "
            "for comparison). At one data-parallel endpoint: session keeps each session on one rank, "
            "round-robin-per-request asks for none (the engine spreads the requests)."),
        engine: str = typer.Option("vllm", "--engine", help="The engine to start (vllm or sglang), without --base-url."),
        port: int = typer.Option(8000, "--port", help="Port for the servers started."),
        serve_timeout: float = typer.Option(600.0, "--serve-timeout", help="Seconds to wait for the server to answer."),
        no_bare: bool = typer.Option(False, "--no-bare", help="Skip the bare load generator."),
        out: Path = typer.Option(Path("gpu-bench.json"), "--out", help="JSON results."),
        log_dir: Path = typer.Option(Path("gpu-bench-logs"), "--log-dir", help="The servers' logs."),
        vllm_args: Optional[str] = typer.Option(None, "--vllm-args", help="More engine arguments (`vllm serve` or SGLang's), one string."),
        layouts_text: str = typer.Option("window", "--layouts", help="Prompt layouts to compare, comma-separated (window,blocks,conversation)."),
        auto: bool = typer.Option(False, "--auto", help="Also run --concurrency auto (up to the highest level) per layout."),
        auto_interval: float = typer.Option(5.0, "--auto-interval", help="Seconds between --concurrency auto's decisions."),
        auto_only: bool = typer.Option(False, "--auto-only", help="Run only --concurrency auto (starting at the lowest level, up to the highest)."),
        variants_text: Optional[str] = typer.Option(
            None, "--variants", help="Client-side variants compared in one server start: 'layout=window,continuation=off; "
            "layout=blocks,continuation=on,concurrency=64|128' or a .json/.toml file (see surfer/bench/gpu/variants.py)."),
        session_steps: int = typer.Option(
            30, "--session-steps", min=0, help="Replay each recording as a session of this many steps (its screenshots "
            "again from the first, marked per pass so none repeats); 0: the recording's length."),
        min_steps: int = typer.Option(
            5, "--min-steps", min=0, help="Steady window: after every session's first step, until each did this many more "
            "steps; the run then stops (--window is its time limit). 0: run the whole --window."),
        no_ending: bool = typer.Option(
            False, "--no-ending", help="Leave the actions that end or pause a session (answer, fail, ask_user) out of the "
            "policy's schema: every session runs its --session-steps steps (a model with random weights otherwise ends "
            "most sessions within a few steps)."),
    ) -> None:
        """Serve each model, run surfer batches over the replay environment and the bare generator; print a table."""
        import shlex

        try:
            levels = parse_levels(levels_text, "--levels")
            from surfer.agent.layouts import check_layout

            layouts = tuple(check_layout(name.strip()) for name in layouts_text.split(",") if name.strip())
            from surfer.bench.gpu.variants import parse_variants

            variants = parse_variants(variants_text) if variants_text else None
            if engine not in ("vllm", "sglang"):
                raise ConfigError(f"--engine must be vllm or sglang, got {engine!r}")
            from surfer.models.servers import PLACEMENTS

            if placement not in PLACEMENTS:
                raise ConfigError(f"--placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
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
                                    session_steps=session_steps, engine=engine, placement=placement, no_ending=no_ending,
                                    progress=lambda partial: out.write_text(json.dumps(partial, indent=2)))
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        out.write_text(json.dumps(results, indent=2))
        typer.echo(table(results))
        typer.echo(steady_table(results))
        for line in error_warnings(results):
            typer.echo(line, err=True)
        for level, values in results["hybrid_over_transformer"].items():
            typer.echo(f"holotron / holo2 at c={level}: {values}")
        for name, gains in [*results["layout_gains"].items(), *results["variant_gains"].items()]:
            for key, value in gains.items():
                typer.echo(f"{name} {key}: {value}")
        typer.echo(f"results: {out}")
        raise typer.Exit(1 if any("error" in m for m in results["models"]) else 0)
