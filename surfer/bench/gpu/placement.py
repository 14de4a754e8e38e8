"""`surfer bench gpu emulate-servers`: several servers in small, on CPU — per-session
placement against a load balancer that sends each request to the next server.

Stand-in servers (surfer.models.standin, each in a child process) keep a prefix
cache of `--prefix-capacity` tokens (least recently used evicted) and make each
prompt token they miss cost `--token-seconds` on their one "GPU", as in
`surfer bench gpu emulate`. The same sessions run three ways: on one server; on
two with surfer's placement (each session keeps its server, so each cache holds
half the sessions' prefixes); on two with `round-robin-per-request` (every
server sees every session, so each cache must hold all their prefixes and, past
its capacity, recomputes them). This is an emulation of what prefix caching
does to a placement, not a GPU figure: docs/benchmarks/servers.md says how to
measure the real thing.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import typer

from surfer.core.errors import ConfigError

from .emulate import DEFAULT_VARIANT, check_times, emulated_server

RUNS = (("one server", 1, "session"), ("two servers, per-session placement", 2, "session"),
        ("two servers, round-robin per request", 2, "round-robin-per-request"))


def emulate_placement(run_gpu_bench: Any, sessions: int, prefix_capacity: int, token_seconds: float, window: float,
                      session_steps: int, variant: str) -> dict[str, Any]:
    """Each of RUNS at `sessions` sessions (through bench.py's `run_gpu_bench`): steps/s and the servers'
    prefix-cache hit rate."""
    from surfer.bench.gpu.variants import parse_variants

    variants = parse_variants(variant)
    check_times(window)  # (before the stand-ins start)
    rows = []
    with ExitStack() as stack:
        servers = [stack.enter_context(emulated_server(prefix_capacity, token_seconds)) for _ in range(2)]
        for name, count, placement in RUNS:
            used = servers[:count]
            results = run_gpu_bench([("holo2", used[0].model)], levels=[sessions], window=window, replay="demo",
                                    base_url=[s.base_url for s in used], port=0, serve_timeout=0, bare=False,
                                    log_dir=Path("."), variants=variants, session_steps=session_steps,
                                    placement=placement)
            row = results["models"][0]["levels"][0]
            steady = row["surfer"].get("steady") or {}
            rows.append({"run": name, "servers": count, "placement": placement, "sessions": sessions,
                         "steps_per_s": row["surfer"]["steps_per_s"], "steady_steps_per_s": steady.get("steps_per_s"),
                         "prefix_hit": (row.get("surfer_server") or {}).get("prefix_cache_hit_rate"),
                         "computed_tokens_per_step": steady.get("computed_prompt_tokens_per_step")})
    return {"emulation": "CPU stand-in servers (surfer.models.standin), not a GPU measurement",
            "stand_in": {"prefix_capacity": prefix_capacity, "token_seconds": token_seconds},
            "window_seconds": window, "session_steps": session_steps, "variant": variant, "rows": rows}


def register(gpu_app: typer.Typer, run_gpu_bench: Any) -> None:
    @gpu_app.command("emulate-servers")
    def emulate_servers_command(
        sessions: int = typer.Option(4, "--sessions", min=2, help="Sessions in each run."),
        prefix_capacity: int = typer.Option(20000, "--prefix-capacity", min=1, help="Tokens each stand-in's prefix cache keeps."),
        token_seconds: float = typer.Option(0.0001, "--token-seconds", min=0.0, help="Seconds per prompt token not in that cache."),
        window: float = typer.Option(30.0, "--window", help="Seconds each run may take."),
        session_steps: int = typer.Option(30, "--session-steps", min=1, help="Steps per replayed session."),
        variant: str = typer.Option(DEFAULT_VARIANT, "--variant", help="The client-side variant (see `surfer bench gpu run --variants`)."),
        out: Path = typer.Option(Path("servers-emulated.json"), "--out", help="JSON results."),
    ) -> None:
        """One server, two with per-session placement, two with round-robin per request: stand-ins on CPU whose
        prefix caches keep a few deep sessions (an emulation, not a GPU figure)."""
        try:
            results = emulate_placement(run_gpu_bench, sessions, prefix_capacity, token_seconds, window, session_steps, variant)
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2))
        for row in results["rows"]:
            typer.echo(f"{row['run']}: {row['steps_per_s']} steps/s (steady {row['steady_steps_per_s']}), "
                       f"prefix hit {row['prefix_hit']}, computed tokens/step {row['computed_tokens_per_step']}")
        typer.echo(f"results: {out}")
