"""`surfer bench gpu emulate`: the seeds' regime in small, on CPU, for `--concurrency auto`.

A stand-in server (surfer.models.standin, in a child process) keeps a prefix
cache of `--prefix-capacity` tokens, least recently used blocks evicted first,
and makes each prompt token it misses cost `--token-seconds` on one shared
"GPU". Sessions start `warm_steps` screenshots deep (append-only history, role
continuation), so a few of them fill that cache; with more, every request
recomputes its history and steps/s fall, as on one H100 8 screenshots deep
(docs/benchmarks/gpu-sessions.md). The fixed levels and auto run side by side in
`surfer bench gpu run`'s tables and JSON (the command is in bench.py).
"""

from __future__ import annotations

from typing import Any

from surfer.core.errors import ConfigError

DEFAULT_VARIANT = "layout=blocks,continuation=on,block_images=32,warm_steps=6"


class ClickEverywhere:
    """The stand-in's model: the policy clicks a described target, the localizer points at the middle
    (picklable, for StandInProcess)."""

    def __call__(self, request: Any) -> dict[str, Any]:
        if request.role == "localizer":
            return {"x": 500, "y": 500}
        return {"thought": "click", "notes": "", "action": {"type": "click", "target": "the middle"}}


def check_times(window: float, auto_interval: float | None = None) -> None:
    """ConfigError for a `--window` (or, where auto runs, an `--auto-interval`) that is not more than 0 seconds."""
    if not window > 0:
        raise ConfigError(f"--window must be more than 0 seconds, got {window:g}")
    if auto_interval is not None and not auto_interval > 0:
        raise ConfigError(f"--auto-interval must be more than 0 seconds, got {auto_interval:g}")


def emulated_server(prefix_capacity: int, token_seconds: float) -> Any:
    """The stand-in, in a child process, with a bounded prefix cache and a per-token prefill cost."""
    from surfer.models.standin import StandInProcess

    options = {"kv_capacity": 10**9, "prefix_capacity": prefix_capacity, "token_seconds": token_seconds}
    return StandInProcess(ClickEverywhere, options=options)


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
