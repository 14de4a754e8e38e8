"""`run_suite`: a QA suite file run as `surfer qa` runs it (the same
configuration merge, start-URL checks, action cache and reports), its
summary returned to the MCP client."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

from .runs import ServerSettings


STOPPED = "interrupted: the MCP client cancelled run_suite, or the server closed"


class SuiteRefused(Exception):
    """A suite the server will not run (missing file, bad YAML, bad settings, server down): the tool's error."""


def _prepare(settings: ServerSettings, path: Path, tags: list[str], grep: Optional[str], variables: dict[str, str],
             concurrency: Optional[int], no_cache: bool, grep_invert: Optional[str] = None) -> Any:
    """Load the suite and build its runner (blocking: files, and `--profile auto` asks the server)."""
    from surfer.apps import options
    from surfer.agent.rundir import claim_run_dir
    from surfer.apps.qa_command import DEFAULT_CACHE, check_start_urls, selector, suite_config
    from surfer.core.errors import ConfigError, ModelServerUnreachable
    from surfer.qa.cache import ActionCache
    from surfer.qa.runner import QaRunner, SuiteRun
    from surfer.qa.suite import load_suite

    if path.is_dir():
        raise SuiteRefused(f"{path} is a directory: give a suite file (YAML) in it")
    if not path.is_file():
        raise SuiteRefused(f"suite file {path} does not exist (paths are relative to {Path.cwd()})")
    if concurrency is not None and concurrency < 1:
        raise SuiteRefused(f"concurrency must be at least 1, got {concurrency}")
    try:
        suite = load_suite(path, dict(variables))
        config = suite_config(settings.config_file, suite, settings.flags, options.console(stderr=True))
        run = SuiteRun(suite, config, cache=None if no_cache else ActionCache(path.parent / DEFAULT_CACHE))
        check_start_urls([run])
        select = selector(tags, grep, grep_invert=grep_invert)
    except (ConfigError, ModelServerUnreachable) as exc:
        raise SuiteRefused(str(exc)) from None
    out_dir = settings.qa_root / f"{datetime.now().strftime('%Y%m%d-%H%M%S-%f')}-{suite.slug}"
    try:  # --qa-dir removed for a file, or made read-only, since the start: the reason, not a bare tool crash
        claim_run_dir(out_dir, "QA output")
    except ConfigError as exc:
        raise SuiteRefused(str(exc)) from None
    runner = QaRunner([run], out_dir, concurrency=concurrency, select=select)
    if not runner.cases:
        raise SuiteRefused("no case matches tags/grep/grep_invert")
    return runner


async def run_suite_file(settings: ServerSettings, path: Path, *, tags: list[str], grep: Optional[str],
                         variables: dict[str, str], concurrency: Optional[int], no_cache: bool,
                         grep_invert: Optional[str] = None) -> dict[str, Any]:
    from surfer.qa.reports import write_reports

    runner = await asyncio.to_thread(_prepare, settings, path, tags, grep, variables, concurrency, no_cache, grep_invert)
    junit, html = runner.out_dir / "junit.xml", runner.out_dir / "index.html"
    started = time.monotonic()
    try:
        summary = await runner.run()
    except asyncio.CancelledError:  # the client cancelled the call, or the server closes: the reports say so, as surfer qa's
        from surfer.qa.outcomes import QaSummary

        stopped = QaSummary(runner.out_dir, runner.cases, time.monotonic() - started, STOPPED, "interrupted")
        await asyncio.shield(asyncio.to_thread(write_reports, stopped, junit, html))
        raise
    await asyncio.to_thread(write_reports, summary, junit, html)
    if summary.stopped and summary.stopped_kind == "unreachable":
        raise SuiteRefused(f"model server unreachable: {summary.stopped} (reports in {runner.out_dir})")
    if summary.stopped and summary.stopped_kind == "app_unreachable":
        ran = "no case ran" if all(c.status in ("queued", "unfinished") for c in summary.cases) else summary.line()
        raise SuiteRefused(f"{summary.stopped} (the run stopped: {ran}; reports in {runner.out_dir})")
    return {
        "ok": summary.ok, "summary": summary.line(),
        "passed": summary.count("passed", "flaky"), "failed": summary.count("failed"),
        "needs_approval": summary.count("needs_approval"), "needs_input": summary.count("needs_input"), "errors": summary.count("error"),
        "stopped": summary.stopped,
        "cases": [{"id": case.id, "case": case.case.name, "status": case.status, "failure": case.failure,
                   "report": str(case.dir / "report.html")} for case in summary.cases],
        "junit": str(junit), "html": str(html), "out_dir": str(runner.out_dir),
    }
