"""`surfer batch`: the command line of surfer/fleet/batch/, kept apart so
that building the CLI (`surfer --help`) does not import the batch runner,
pydantic's models or the agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from surfer.apps import options
from surfer.core.errors import ConfigError


STYLE = {"success": "green", "failed": "red", "error": "red"}


def finished_lines(console: Any, stats: Any) -> Any:
    """One plain line per task as its results line is written, never wrapped: what a log that is not a terminal
    shows of a running batch (the live display redraws only on a terminal)."""
    def said(record: dict[str, Any]) -> None:
        steps, status = record.get("steps", 0), record["status"]
        why = "" if status == "success" or not record.get("reason") else " — " + " ".join(str(record["reason"]).split())[:200]
        options.say(console, status, STYLE.get(status, "yellow"), f"{record['id']}  ({steps} step{'' if steps == 1 else 's'}, "
                    f"{record.get('seconds', 0):.1f} s){why}  ·  done {stats.done + stats.skipped}/{stats.total}")
    return said


def said(console: Any) -> Any:
    """What the batch says as it runs (--concurrency auto's choices, a server out of placement): one line each, never
    folded at 80 columns in a log, its brackets not read as markup."""
    from rich.text import Text

    return lambda text: console.print(Text(str(text)), soft_wrap=True)


def register(app: typer.Typer) -> None:
    @app.command("batch")
    def batch(
        tasks_file: Path = typer.Argument(
            ..., help="JSON lines, one task per line: {task, url?, id?, max_steps?, max_seconds?, storage_state?, answers?, "
            "reward?, expect?, metadata?}."
        ),
        out: Path = typer.Option(..., "--out", help="Output directory (results.jsonl + runs/); rerun to resume."),
        concurrency: str = typer.Option(
            "8", "--concurrency", "-c", help="Sessions running at once, or 'auto': follow the server's /metrics (vLLM or SGLang: "
            "cache use, waiting requests) and steps/s; a server without /metrics gets a fixed 8."),
        max_inflight: Optional[int] = typer.Option(
            None, "--max-inflight", help="Cap on model requests in flight (default: no cap)."
        ),
        samples: int = typer.Option(1, "--samples", help="Rollouts per task (ids <id>#<k>), grouped in the export."),
        retry_errors: bool = typer.Option(
            False, "--retry-errors", help="On resume, also redo tasks that ended in error."
        ),
        base_url: options.BaseUrl = None,
        model: options.Model = None,
        api_key: options.ApiKey = None,
        profile: options.Profile = None,
        prompt_layout: options.PromptLayout = None,
        server_wait: options.ServerWait = None,
        record_tokens: options.RecordTokens = False,
        policy_version: options.PolicyVersion = None,
        max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Default step limit per task."),
        max_seconds: Optional[float] = typer.Option(None, "--max-seconds", help="Default time limit per task."),
        viewport: Optional[str] = typer.Option(None, "--viewport", help="Viewport WxH in CSS pixels."),
        scale: Optional[float] = typer.Option(None, "--device-scale-factor", help="Device scale factor."),
        no_validator: bool = typer.Option(False, "--no-validator", help="Accept answers without the validator."),
        upload_file: options.UploadFiles = None,
        allow_file_urls: options.AllowFileUrls = False,
        ignore_https_errors: options.IgnoreHttpsErrors = False,
        trace: options.Trace = None,
        video: options.Video = None,
        allow_domain: options.AllowDomain = None,
        block_domain: options.BlockDomain = None,
        secret: options.Secret = None,
        answers: options.BatchAnswers = None,
        approve_all: options.ApproveAll = False,
        approve_domain: options.ApproveDomain = None,
        storage_state: options.StorageState = None,
        user_data_dir: options.UserDataDir = None,
        cdp_url: options.CdpUrl = None,
        browser_ws: options.BrowserWs = None,
        config: options.ConfigFile = None,
        crash_retries: int = typer.Option(
            1, "--crash-retries", help="Reruns of a task whose browser or page crashed under it."
        ),
        quiet: bool = typer.Option(False, "--quiet", help="No live progress display."),
        dashboard: bool = typer.Option(False, "--dashboard", help="Serve the live page (surfer view) while the batch runs."),
        dashboard_port: int = typer.Option(8765, "--dashboard-port", min=0, max=65535, help="Port of --dashboard (on 127.0.0.1)."),
        env: str = typer.Option("browser", "--env", help="'browser' (one shared Chromium) or 'replay' (recorded screenshots, no browser)."),
        replay: options.Replay = None,
        policy: Optional[str] = typer.Option(
            None, "--policy", metavar="NAME@VERSION",
            help="The adapter (loaded on every server: `surfer policy load`) the sessions' calls go to, and its version, "
            "recorded with each call; `surfer policy switch` changes it for the sessions started after.",
        ),
        ray: Optional[str] = typer.Option(
            None, "--ray", metavar="ADDRESS",
            help="Run the sessions on a Ray cluster: auto (this machine's), an address, or local (start one here).",
        ),
    ) -> None:
        """Run many tasks concurrently in one browser; resumable; results.jsonl + run directories."""
        from rich.live import Live

        from surfer.apps.console import redraws
        from surfer.apps.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE
        from surfer.apps.signals import Interrupted, run_interruptible

        console = options.console(stderr=True)
        with options.setup_errors(console):
            options.check_artifact_modes(trace, video)
            cfg = options.load_cli_config(
                config,
                {
                    "base_url": base_url,
                    "model": model,
                    "api_key": api_key,
                    "profile": profile,
                    "prompt_layout": prompt_layout,
                    "server_wait": server_wait,
                    "record_tokens": True if record_tokens else None,
                    "policy_version": policy_version,
                    "video": video,
                    "max_steps": max_steps,
                    "max_seconds": max_seconds,
                    "validate_answers": False if no_validator else None,
                    **options.safety_overrides(allow_domain, block_domain, approve_all, approve_domain),
                    "browser": {
                        "viewport": viewport, "device_scale_factor": scale,
                        "allow_file_urls": True if allow_file_urls else None,
                        "ignore_https_errors": True if ignore_https_errors else None,
                        "upload_files": [str(f) for f in upload_file] if upload_file else None,
                        "trace": trace,
                        **options.signin_overrides(storage_state, user_data_dir=user_data_dir, cdp_url=cdp_url,
                                                   browser_ws=browser_ws),
                    },
                },
                console,
            )
            if env == "browser":
                options.check_browser(cfg, console)
            from surfer.agent.questions import PresetAnswers
            from surfer.fleet.batch import load_tasks, make_batch

            if env not in ("browser", "replay"):
                raise ConfigError(f"--env must be 'browser' or 'replay' for a batch, got {env!r}")
            recordings = options.replay_recordings(env, replay)
            items = load_tasks(tasks_file, samples)
            job = make_batch(cfg, items, out, concurrency=concurrency, max_inflight=max_inflight,
                             retry_errors=retry_errors, replay=recordings, secrets=options.secrets_from(secret, cfg, console),
                             ray_address=ray, crash_retries=crash_retries, say=said(console), policy=policy,
                             **({"answers": PresetAnswers.load(answers)} if answers else {}))
        live = Live(job.stats, console=console, refresh_per_second=4, transient=False) if not quiet and redraws(console) else None
        if not quiet and live is None:  # off a terminal (a CI log): a plain line per task as it finishes
            job.on_record = finished_lines(console, job.stats)

        async def main() -> Any:
            server = None
            if dashboard:
                from surfer.apps.view.server import ViewServer

                server = await ViewServer(out, port=dashboard_port).start()
                options.say(console, "dashboard:", "bold cyan", server.url)
            try:
                return await job.run()
            finally:
                if server is not None:
                    await server.stop()

        try:
            if live:
                live.start()
            # --ray: a cluster that cannot be joined or a worker that cannot start; --dashboard: a port in use
            with options.setup_errors(console):
                summary = run_interruptible(main())
        except Interrupted as stop:
            if live:
                live.stop()
            from surfer.fleet.sessions import BATCH_FILE

            if (out / BATCH_FILE).exists():
                options.say(
                    console, "interrupted", "yellow",
                    f"by {stop}: {job.stats.done} task(s) finished in this run are kept in {out}; run the same command again to resume.",
                )
            else:  # stopped before the batch had written anything
                options.say(console, "interrupted", "yellow", f"by {stop} before the batch started: nothing was recorded")
            raise typer.Exit(stop.exit_code) from None
        if live:
            live.stop()
        console.print(job.stats.line(), soft_wrap=True)  # (one line in a log too, never folded at 80 columns)
        if summary.statuses:
            options.say(console, "statuses:", "", f"{summary.statuses}  ·  results: {out / 'results.jsonl'}")
        else:  # no task of this batch has a final line: name no file that is not there
            written = (out / "results.jsonl").exists()
            options.say(console, "finished:", "yellow", "no task" + (
                f" of these ({out / 'results.jsonl'} holds other tasks' lines)" if written else ", so no results.jsonl was written"))
        if summary.unfinished:
            kinds = ", ".join(f"{n} {kind}" for kind, n in summary.unfinished.items())
            options.say(console, "not finished:", "yellow",
                        f"{sum(summary.unfinished.values())} attempt(s) ({kinds}), in {out / 'attempts.jsonl'}; "
                        "their tasks run again when the same command runs again")
        if summary.concurrency and summary.concurrency.get("decisions"):
            limits = [d["limit"] for d in summary.concurrency["decisions"]]
            console.print(f"concurrency auto: sessions {limits[0]} → {limits[-1]} (range {min(limits)}–{max(limits)})")
        if summary.stopped:
            options.say(console, "batch stopped:", "red", summary.stopped)
            raise typer.Exit({"unreachable": EXIT_UNREACHABLE, "storage": EXIT_FAILED}.get(summary.stopped_kind or "", EXIT_USAGE))
        raise typer.Exit(EXIT_OK if summary.finished + summary.skipped == summary.total else EXIT_FAILED)
