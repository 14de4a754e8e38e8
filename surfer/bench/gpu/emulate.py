"""`surfer bench gpu emulate`: the seeds' regime in small, on CPU, for `--concurrency auto`.

A stand-in server (surfer.models.standin, in a child process) keeps a prefix
cache of `--prefix-capacity` tokens, least recently used blocks evicted first,
and makes each prompt token it misses cost `--token-seconds` on one shared
"GPU". Sessions start `warm_steps` screenshots deep (append-only history, role
continuation), so a few of them fill that cache; with more, every request
recomputes its history and steps/s fall, as on one H100 8 screenshots deep
(README, "The seeds' regime"). The fixed levels and auto run side by side in
`surfer bench gpu run`'s tables and JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

DEFAULT_VARIANT = "layout=blocks,continuation=on,block_images=32,warm_steps=6"


class ClickEverywhere:
    """The stand-in's model: the policy clicks a described target, the localizer points at the middle
    (picklable, for StandInProcess)."""

    def __call__(self, request: Any) -> dict[str, Any]:
        if request.role == "localizer":
            return {"x": 500, "y": 500}
        return {"thought": "click", "notes": "", "action": {"type": "click", "target": "the middle"}}


def register(gpu_app: typer.Typer) -> None:
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
        from surfer.bench.gpu.bench import run_gpu_bench, steady_table, table
        from surfer.bench.gpu.variants import parse_variants
        from surfer.bench.throughput import parse_levels
        from surfer.core.errors import ConfigError
        from surfer.models.standin import StandInProcess

        try:
            levels = parse_levels(levels_text)
            variants = parse_variants(variant)
            options = {"kv_capacity": 10**9, "prefix_capacity": prefix_capacity, "token_seconds": token_seconds}
            with StandInProcess(ClickEverywhere, options=options) as server:
                results = run_gpu_bench([("holo2", server.model)], levels=levels, window=window, replay="demo",
                                        base_url=server.base_url, port=0, serve_timeout=0, bare=False, log_dir=out.parent,
                                        auto=True, auto_interval=auto_interval, variants=variants, min_steps=0,
                                        session_steps=session_steps)
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        results["stand_in"] = options
        results["auto_vs_best_fixed"] = auto_against_fixed(results)
        out.write_text(json.dumps(results, indent=2))
        typer.echo(table(results))
        typer.echo(steady_table(results))
        for row in results["auto_vs_best_fixed"]["rows"]:
            typer.echo(f"c={row['concurrency']}: {row['steps_per_s']} steps/s, prefix hit {row['prefix_hit']}")
        typer.echo(f"auto / best fixed: {results['auto_vs_best_fixed']['ratio']}")
        typer.echo(f"results: {out}")


def auto_against_fixed(results: dict[str, Any]) -> dict[str, Any]:
    """Each run's steps/s and prefix-cache hit rate (whole window), and auto's steps/s over the best fixed level's."""
    rows = [{"concurrency": row["concurrency"], "steps_per_s": row["surfer"]["steps_per_s"],
             "prefix_hit": (row.get("surfer_server") or {}).get("prefix_cache_hit_rate")}
            for model in results["models"] for row in model.get("levels", [])]
    fixed = [row for row in rows if row["concurrency"] != "auto"]
    auto = next((row for row in rows if row["concurrency"] == "auto"), None)
    best = max(fixed, key=lambda row: row["steps_per_s"], default=None)
    ratio = round(auto["steps_per_s"] / best["steps_per_s"], 3) if auto and best and best["steps_per_s"] else None
    return {"rows": rows, "best_fixed": best, "ratio": ratio}
