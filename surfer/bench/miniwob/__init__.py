"""MiniWoB++ for surfer: the environment (task pages served from the
installed `miniwob` package, seeded episodes, cropped screenshots, rewards),
a ground-truth oracle model double, and `surfer bench miniwob`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from surfer.apps.signals import run_command

from surfer.apps import options


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("miniwob")
    def miniwob(
        tasks: Optional[str] = typer.Option(
            None, "--tasks", help="Comma-separated task names, e.g. click-button,login-user."
        ),
        suite: Optional[str] = typer.Option(
            None, "--suite", help="A named suite: 'oracle' (default, 23 tasks) or 'smoke'."
        ),
        seeds: int = typer.Option(3, "--seeds", help="Episodes per task (seeds 0..N-1)."),
        concurrency: int = typer.Option(4, "--concurrency", "-c", help="Episodes running at once."),
        max_inflight: Optional[int] = typer.Option(None, "--max-inflight", help="Cap on model requests in flight."),
        oracle: bool = typer.Option(
            False, "--oracle", help="Answer with the ground-truth oracle (stand-in server) instead of a model."
        ),
        oracle_input: str = typer.Option(
            "keyboard", "--oracle-input",
            help="How the oracle works selects and date fields: 'keyboard' (typing) or 'pointer' (clicking their popups).",
        ),
        base_url: options.BaseUrl = None,
        model: options.Model = None,
        api_key: options.ApiKey = None,
        profile: options.Profile = None,
        max_steps: int = typer.Option(30, "--max-steps", help="Step limit per episode."),
        max_seconds: float = typer.Option(180.0, "--max-seconds", help="Time limit per episode."),
        out: Optional[Path] = typer.Option(None, "--out", help="JSON file to write (default .bench/miniwob.json)."),
    ) -> None:
        """MiniWoB++ success rates per task (seeded episodes, rewards read from the page)."""
        from rich.table import Table

        from surfer.core.errors import ConfigError

        from .bench import resolve_tasks, run_miniwob

        console = options.console()
        with options.setup_errors(console):
            if oracle and profile == "auto":
                raise ConfigError("--oracle answers in a profile's wire format: choose --profile explicitly")
            cfg = options.load_cli_config(
                None,
                {
                    "base_url": base_url,
                    "model": model,
                    "api_key": api_key,
                    "profile": profile,
                    "max_steps": max_steps,
                    "max_seconds": max_seconds,
                },
                console,
            )
            names = resolve_tasks(tasks, suite)
            report = run_command(
                run_miniwob(
                    cfg, names, seeds=seeds, concurrency=concurrency, oracle=oracle, max_inflight=max_inflight,
                    oracle_input=oracle_input,
                )
            )
        table = Table(title=f"MiniWoB++ · {'oracle' if oracle else cfg.model} · concurrency {concurrency}")
        for column in ("task", "success", "episodes", "mean steps", "errors"):
            table.add_column(column, justify="left" if column == "task" else "right")
        for name, row in report["tasks"].items():
            table.add_row(
                name, f"{row['success_rate']:.0%}", str(row["episodes"]), f"{row['mean_steps']:.1f}", str(row["errors"])
            )
        table.add_row(
            "[bold]all[/bold]",
            f"[bold]{report['success_rate']:.1%}[/bold]",
            str(report["episodes"]),
            f"{report['mean_steps']:.1f}",
            str(sum(r["errors"] for r in report["tasks"].values())),
        )
        console.print(table)
        target = out or Path(".bench/miniwob.json")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(report, indent=2))
        console.print(f"{report['episodes']} episodes in {report['seconds']:.1f} s · wrote {target}")
