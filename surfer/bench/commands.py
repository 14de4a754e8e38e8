"""`surfer bench ...`: every benchmark's command under one group, added to the
CLI through the entry point `bench = "surfer.bench.commands:register"`
(group `surfer.commands`), which the CLI reads only when asked for `bench`:
the commands in surfer/apps/ never import a benchmark. Also `python3 -m
surfer.bench ...` (__main__.py)."""

from __future__ import annotations

import importlib

import typer

# Benchmark modules that add a command to the group: each defines register(bench_app).
BENCH_MODULES = [
    "surfer.bench.overhead",
    "surfer.bench.miniwob",
    "surfer.bench.throughput",
    "surfer.bench.qa",
    "surfer.bench.gpu.bench",
    "surfer.bench.prompts",
    "surfer.bench.soak",
    "surfer.bench.tokens",
]


def bench_app() -> typer.Typer:
    """The `bench` group with every benchmark's command."""
    from surfer.apps.command_group import CommandGroup

    group = typer.Typer(no_args_is_help=True, cls=CommandGroup, help="Benchmarks: print figures and write JSON (not tests).")
    for name in BENCH_MODULES:
        importlib.import_module(name).register(group)

    return group


def register(app: typer.Typer) -> None:
    """The `surfer.commands` entry point: add `surfer bench` to the CLI."""
    app.add_typer(bench_app(), name="bench")
