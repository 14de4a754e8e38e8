"""`surfer qa FILES...`: run suites, show a live table, write JUnit and HTML.

Exit codes: 0 every case passed (flaky ones included), 1 a case failed,
2 a bad suite file or configuration, 3 the model server or the app under
test (the cases' start addresses, checked before any case) cannot be reached,
130 / 143 stopped by SIGINT / SIGTERM (finished cases reported)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

import typer

from surfer.apps import options

if TYPE_CHECKING:  # imported where used: building the CLI (`surfer --help`) loads none of them
    from surfer.qa.outcomes import CaseReport, QaSummary
    from surfer.qa.runner import QaRunner, SuiteRun
    from surfer.qa.suite import Case, Suite

DEFAULT_CACHE = "surfer-cache"  # next to the (first) suite file


class LiveTable:
    """A rich renderable: case, status, step, time."""

    STYLE = {"passed": "green", "flaky": "yellow", "failed": "red", "needs_approval": "magenta", "needs_input": "magenta", "error": "red", "running": "cyan", "queued": "dim", "unfinished": "yellow"}

    def __init__(self, runner: QaRunner) -> None:
        self.runner = runner

    def __rich__(self) -> Any:
        from rich.table import Table

        table = Table(box=None, padding=(0, 2), header_style="bold")
        for column in ("case", "status", "step", "time"):
            table.add_column(column)
        for case in self.runner.cases:
            style = self.STYLE.get(case.status, "")
            step = case.current_step if case.status in ("queued", "running") or case.last is None else steps_done(case)
            table.add_row(case.id, f"[{style}]{case.status}[/{style}]", step, f"{case.elapsed():.1f}s")
        return table


def steps_done(case: CaseReport) -> str:
    """A finished case's steps, as the live table and the progress lines say them."""
    last = case.last
    if last is None:
        return "0 step(s)"
    return f"{len(last.steps)} step(s), {last.cached_steps} from cache" + (f", {len(last.healed_steps)} healed" if last.healed_steps else "")


def progress_lines(console: Any) -> Any:
    """Off a terminal (a CI log): one plain line per case as it finishes, never wrapped, instead of the live
    table (which such a log would get once, at the end, cut to 80 columns)."""
    def said(case: CaseReport) -> None:
        options.say(console, case.status, LiveTable.STYLE.get(case.status, ""), f"{case.id}  ({steps_done(case)}, {case.seconds:.1f} s)")
    return said


def pattern(flag: str, text: Optional[str]) -> Optional["re.Pattern[str]"]:
    """--grep / --grep-invert as a regular expression, searched in a case's name ignoring case, as Playwright's
    --grep is (`(?-i:...)` for a case-sensitive part); a bad one is a usage error naming it."""
    import re

    from surfer.core.errors import ConfigError

    if not text:
        return None
    try:
        return re.compile(text, re.IGNORECASE)
    except re.error as exc:
        raise ConfigError(f"{flag} {text!r} is no regular expression: {exc}") from None


def selector(tags: list[str], grep: Optional[str], ids: Optional[set[str]] = None, grep_invert: Optional[str] = None) -> Any:
    """Cases with one of `tags`, whose name matches the regular expression `grep` and not `grep_invert`, and (given
    `ids`: `<suite>/<case>` ids) among those. A bad expression raises ConfigError."""
    chosen, left_out = pattern("--grep", grep), pattern("--grep-invert", grep_invert)

    def select(case: Case, case_id: Optional[str] = None) -> bool:
        if tags and not set(tags) & set(case.tags):
            return False
        if ids is not None and case_id not in ids:
            return False
        if left_out is not None and left_out.search(case.name):
            return False
        return chosen is None or chosen.search(case.name) is not None
    return select


def suite_config(config_file: Optional[Path], suite: Suite, flags: dict[str, Any], console: Any) -> Any:
    """file < environment < the suite's model settings < command-line flags."""
    overrides: dict[str, Any] = {**suite.model}
    browser = dict(overrides.get("browser") or {})
    if suite.viewport:
        browser["viewport"] = suite.viewport
    for key, value in flags.items():
        if key == "browser":
            browser.update({k: v for k, v in value.items() if v is not None})
        elif value is not None:
            overrides[key] = value
    overrides["browser"] = browser
    return options.load_cli_config(config_file, overrides, console)


@contextlib.contextmanager
def demo_servers(console: Any) -> Iterator[dict[str, str]]:
    """The bundled demo site and its oracle model, for the sample suite."""
    from surfer.apps.demo.static_site import StaticSite
    from surfer.models.profiles import get_profile
    from surfer.models.standin import StandInServer

    from surfer.apps.demo.qa_oracle import DEMO_SITE, measure_qa_targets, qa_oracle

    with StaticSite(DEMO_SITE) as site:
        centres = asyncio.run(measure_qa_targets(site.base_url))
        with StandInServer(qa_oracle(centres, get_profile("holotron").frame)) as server:
            console.print(f"demo: site {site.base_url} · oracle model {server.base_url}")
            yield {"demo_url": site.base_url, "base_url": server.base_url, "model": server.model}


def run_qa(runner: QaRunner, console: Any, quiet: bool) -> QaSummary:
    """Run with the live table; SIGINT / SIGTERM stop it like the other commands
    (`Interrupted`), the cases finished so far kept."""
    from rich.live import Live

    from surfer.apps.console import redraws
    from surfer.apps.signals import run_interruptible

    live = Live(LiveTable(runner), console=console, refresh_per_second=4, transient=False) if not quiet and redraws(console) else None
    if live:
        live.start()
    try:
        return run_interruptible(runner.run())
    finally:
        if live:
            live.stop()


def stopped_line(summary: QaSummary, junit: Path) -> str:
    """What a stopped run kept: the finished cases' results, or that none finished (no results.jsonl to name)."""
    results = summary.out_dir / "results.jsonl"
    if results.exists():
        return f"{summary.line()}; finished cases are in {results} and {junit}"
    return f"{summary.line()}; no case finished ({junit} lists them as skipped)"


def check_start_urls(runs: list[SuiteRun]) -> None:
    """Refused start URLs (file:, chrome:, ...) are a usage error before anything runs."""
    from surfer.agent.environments import check_start_url
    from surfer.core.errors import ConfigError

    for run in runs:
        for case in run.suite.cases:
            url = run.suite.resolve_url(case.url)
            if url and run.suite.environment == "browser":
                try:
                    check_start_url(url, run.config)
                except ConfigError as exc:
                    line = run.suite.lines.get(case.name, 1)
                    # ('/orders' with no base_url is a file path, refused as one: the suite's base_url was forgotten)
                    hint = (f"; if {case.url} is a page of your app, give the suite its base_url (base_url: "
                            "http://localhost:3000)") if case.url and case.url.startswith("/") and not run.suite.base_url else ""
                    raise ConfigError(f"{run.suite.path}:{line}: case {case.name!r}: {exc}{hint}") from None


def check_state_files(runs: list[SuiteRun], console: Any, chosen: Optional[set[str]] = None) -> None:
    """A storage-state file a case that runs (its id in `chosen`; None: every case) starts with must be readable
    now, unless a setup case of its suite writes it. Cases left out by --tag / --grep need none."""
    from surfer.core.errors import ConfigError
    from surfer.tools.browser.state import loose_permissions, read_storage_state

    for run in runs:
        cases = [c for c in run.suite.cases if chosen is None or run.suite.case_id(c) in chosen]
        written = {run.suite.setup_output(c) for c in run.suite.cases if c.setup}
        for path in {run.suite.state_file(c) for c in cases} - written - {None}:
            try:
                read_storage_state(path)  # type: ignore[arg-type]
            except ConfigError as exc:
                raise ConfigError(f"{run.suite.path}: {exc} (or add a setup case that signs in and writes it)") from None
            warning = loose_permissions(path)  # type: ignore[arg-type]
            if warning:
                options.say(console, "warning:", "yellow", warning)


def check_outputs(out_dir: Path, reports: dict[str, Path]) -> None:
    """--out, --junit and --html are checked before anything runs (a directory where a file goes, a file where a
    directory goes, no permission): a run whose reports cannot be written at its end is refused at its start."""
    import os

    from surfer.core.errors import ConfigError

    def make(folder: Path, flag: str, path: Path) -> None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise ConfigError(f"{flag} {path}: a file is in the way of the folder {folder}") from None
        except OSError as exc:
            raise ConfigError(f"{flag} {path}: cannot create {folder}: {exc.strerror or exc}") from None
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ConfigError(f"{flag} {path}: {folder} is not writable")

    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {out_dir} is a file: name a directory")
    make(out_dir, "--out", out_dir)
    # a report written over another one, or over what the run writes in OUT, was lost at the end of the run (the JUnit
    # file CI reads held the HTML summary; results.jsonl, which --rerun-failed reads, the JUnit XML)
    own = {out_dir.resolve() / name: what for name, what in (
        ("results.jsonl", "the cases' results"), ("attempts.jsonl", "the unfinished cases"), ("cases", "the case directories"))}
    taken: dict[Path, str] = {}
    for flag, path in reports.items():
        where = path.resolve()
        if where in taken:
            raise ConfigError(f"{taken[where]} and {flag} would both write {path} (--junit defaults to OUT/junit.xml, "
                              "--html to OUT/index.html): give each report a file of its own")
        taken[where] = flag
        clash = next((what for mine, what in own.items() if where == mine or mine in where.parents), None)
        if clash is not None:
            raise ConfigError(f"{flag} {path}: the run writes {clash} there; name another file")
    for flag, path in reports.items():
        if path.is_dir():
            example = {"--junit": "junit.xml", "--html": "index.html"}.get(flag, "summary.md")
            raise ConfigError(f"{flag} {path} is a directory: name the file to write, e.g. {path / example}")
        make(path.parent, flag, path)


def check_caches(roots: list[Path]) -> None:
    """An action cache folder with a file where it (or a folder above it) goes is refused before the run: found
    when the first case passed, it ended the run in a traceback with no report written."""
    from surfer.core.errors import ConfigError

    for root in dict.fromkeys(roots):
        above = next((p for p in (root, *root.parents) if p.exists()), None)
        if above is not None and not above.is_dir():
            raise ConfigError(f"the action cache {root}: {above} is a file (--cache names a folder)")


def suite_files(paths: list[Path]) -> list[Path]:
    """The suite files the arguments name: a folder stands for its `*.yaml` and `*.yml` files, its subfolders' too
    (hidden ones left out), in name order; a file named twice runs once."""
    from surfer.core.errors import ConfigError

    found: list[Path] = []
    for path in paths:
        if not path.is_dir():
            found.append(path)
            continue
        inside = sorted(f for f in path.rglob("*") if f.suffix in (".yaml", ".yml") and f.is_file()
                        and not any(part.startswith(".") for part in f.relative_to(path).parts))
        if not inside:
            raise ConfigError(f"{path} is a folder with no suite file (*.yaml, *.yml) in it")
        found += inside
    once: dict[Path, Path] = {}
    for path in found:
        once.setdefault(path.resolve(), path)
    return list(once.values())


def register(app: typer.Typer) -> None:
    @app.command("qa")
    def qa(
        files: list[Path] = typer.Argument(..., help="Suite files (YAML), or folders of them (their *.yaml and *.yml files)."),
        concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c", help="Cases at once (default: the suite's, 4)."),
        tag: list[str] = typer.Option([], "--tag", help="Run only cases with this tag (repeatable)."),
        grep: Optional[str] = typer.Option(
            None, "--grep", "-g", metavar="REGEX", help="Run only cases whose name matches this regular expression (any case)."),
        grep_invert: Optional[str] = typer.Option(
            None, "--grep-invert", metavar="REGEX", help="Leave out cases whose name matches this regular expression (any case)."),
        var: list[str] = typer.Option([], "--var", help="Variable NAME=VALUE for {{NAME}} (repeatable)."),
        junit: Optional[Path] = typer.Option(None, "--junit", help="JUnit XML file (default OUT/junit.xml)."),
        html: Optional[Path] = typer.Option(None, "--html", help="HTML summary (default OUT/index.html)."),
        markdown: Optional[Path] = typer.Option(
            None, "--markdown", help="A Markdown summary too (e.g. $GITHUB_STEP_SUMMARY): the totals and a row a case."),
        retries: Optional[int] = typer.Option(None, "--retries", help="Extra tries of a failing case (default: the suite's)."),
        cache: Optional[Path] = typer.Option(None, "--cache", help=f"Action cache directory (default {DEFAULT_CACHE}/ next to each suite file)."),
        no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the action cache."),
        update_cache: bool = typer.Option(False, "--update-cache", help="Run every step with the model and rewrite the cache."),
        out: Optional[Path] = typer.Option(None, "--out", help="Output directory (default qa-runs/<timestamp>)."),
        rerun_failed: Optional[Path] = typer.Option(
            None, "--rerun-failed", metavar="DIR", help="Run only the cases that did not pass in an earlier run's output "
            "directory (failed, errors, not finished); none: exit 0. With --tag/--grep: those among them."),
        demo: bool = typer.Option(False, "--demo", help="Serve the bundled demo site and its oracle model (sets {{demo_url}}); no GPU."),
        base_url: options.BaseUrl = None,
        model: options.Model = None,
        api_key: options.ApiKey = None,
        profile: options.Profile = None,
        server_wait: options.ServerWait = None,
        record_tokens: options.RecordTokens = False,
        policy_version: options.PolicyVersion = None,
        headful: bool = typer.Option(False, "--headful", help="Show the browser windows."),
        allow_file_urls: options.AllowFileUrls = False,
        ignore_https_errors: options.IgnoreHttpsErrors = False,
        trace: options.Trace = None,
        video: options.Video = None,
        allow_domain: options.AllowDomain = None,
        block_domain: options.BlockDomain = None,
        approve_all: options.ApproveAll = False,
        approve_domain: options.ApproveDomain = None,
        storage_state: options.StorageState = None,
        user_data_dir: options.UserDataDir = None,
        cdp_url: options.CdpUrl = None,
        browser_ws: options.BrowserWs = None,
        config: options.ConfigFile = None,
        quiet: bool = typer.Option(False, "--quiet", help="No live table."),
    ) -> None:
        """Run QA suites written in plain language: cases in parallel, JUnit + HTML reports, an action cache."""

        from surfer.apps.console import redraws
        from surfer.apps.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE
        from surfer.apps.signals import Interrupted, writing_record
        from surfer.core.errors import ConfigError

        from surfer.qa.cache import ActionCache
        from surfer.qa.outcomes import QaSummary, failed_in
        from surfer.qa.reports import write_reports
        from surfer.qa.runner import QaRunner, SuiteRun
        from surfer.qa.suite import load_suite, parse_vars

        console = options.console(stderr=True)
        out_dir = out or Path("qa-runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
        with contextlib.ExitStack() as stack, options.setup_errors(console):
            if no_cache and update_cache:
                raise ConfigError("--no-cache and --update-cache contradict each other")
            if retries is not None and retries < 0:
                raise ConfigError(f"--retries must be at least 0, got {retries}")
            if concurrency is not None and concurrency < 1:
                raise ConfigError(f"--concurrency must be at least 1, got {concurrency}")
            pattern("--grep", grep), pattern("--grep-invert", grep_invert)  # a bad one refused before anything starts
            variables = parse_vars(var)
            if demo:
                served = stack.enter_context(demo_servers(console))
                variables.setdefault("demo_url", served["demo_url"])
                base_url, model = base_url or [served["base_url"]], model or served["model"]
                profile = profile or "holotron"
            files = suite_files(files)
            suites = [load_suite(f, variables) for f in files]
            named: dict[str, tuple[str, Path]] = {}
            for suite, path in zip(suites, files):
                if suite.slug in named:
                    other, where = named[suite.slug]
                    if other != suite.name:  # ('🚀' and '🛒' are both 'run')
                        raise ConfigError(f"{path}: the suite names {other!r} ({where}) and {suite.name!r} differ only in "
                                          f"punctuation or symbols, and would share the directory {suite.slug!r} (case ids, "
                                          "outputs and cache entries would collide): give them names that differ in letters or digits")
                    raise ConfigError(f"{path}: the suite name {suite.name!r} is already used by {where} "
                                      "(case ids, outputs and cache entries would collide)")
                named[suite.slug] = (suite.name, path)
            options.check_artifact_modes(trace, video)
            flags = {"base_url": base_url, "model": model, "api_key": api_key, "profile": profile, "server_wait": server_wait,
                     "record_tokens": True if record_tokens else None, "policy_version": policy_version,
                     "video": video, **options.safety_overrides(allow_domain, block_domain, approve_all, approve_domain),
                     "browser": {"headless": False if headful else None, "allow_file_urls": True if allow_file_urls else None,
                                 "ignore_https_errors": True if ignore_https_errors else None,
                                 "trace": trace, **options.signin_overrides(
                                     storage_state, user_data_dir=user_data_dir, cdp_url=cdp_url, browser_ws=browser_ws)}}
            runs = [
                SuiteRun(s, suite_config(config, s, flags, console),
                         cache=None if no_cache or cache else ActionCache(path.parent / DEFAULT_CACHE))
                for s, path in zip(suites, files)
            ]
            check_start_urls(runs)
            for run in runs:
                options.check_browser(run.config, console)
            again = failed_in(rerun_failed) if rerun_failed is not None else None
            if again is not None and not again:
                options.say(console, "nothing to re-run:", "green", f"every case passed in {rerun_failed}")
                raise typer.Exit(EXIT_OK)
            runner = QaRunner(runs, out_dir, concurrency=concurrency, retries=retries,
                              cache=ActionCache(cache) if cache and not no_cache else None,
                              update_cache=update_cache, select=selector(tag, grep, again, grep_invert),
                              on_finish=None if quiet or redraws(console) else progress_lines(console))
            if not runner.cases:
                raise ConfigError(f"no case of these suites failed in {rerun_failed}" + (" and matches --tag/--grep" if tag or grep or grep_invert else "")
                                  if again else "no case matches --tag/--grep/--grep-invert")
            check_state_files(runs, console, {c.id for c in runner.cases})
            check_caches([c.root for c in (runner.cache, *(r.cache for r in runs)) if c is not None])
            runner.warn_unbound_secrets(lambda text: options.say(console, "warning:", "yellow", text))
            if {c.suite for c in runner.cases} & {r.suite.name for r in runs if r.suite.environment == "desktop"}:
                from surfer.tools.desktop_display import check_display

                check_display()  # no display, or one that does not answer: refused once, not an error per case
            from surfer.qa.out_dir import check_out_dir

            check_out_dir(out_dir)  # (before the note: never replace what another command wrote)
            if (out_dir / "results.jsonl").exists() or (out_dir / "cases").exists():
                options.say(console, "note:", "yellow", f"{out_dir} holds an earlier run's results: this run replaces them")
            junit_path, html_path = junit or out_dir / "junit.xml", html or out_dir / "index.html"
            check_outputs(out_dir, {"--junit": junit_path, "--html": html_path, **({"--markdown": markdown} if markdown else {})})
            started = time.monotonic()
            try:
                summary = run_qa(runner, console, quiet)
            except Interrupted as stop:
                stopped = QaSummary(out_dir, runner.cases, time.monotonic() - started, f"interrupted by {stop}", "interrupted")
                write_reports(stopped, junit_path, html_path, markdown)
                options.say(console, "interrupted", "yellow", f"by {stop}: {stopped_line(stopped, junit_path)}")
                raise typer.Exit(stop.exit_code) from None
            with writing_record():  # (a stop as they are written ends the command once they are)
                write_reports(summary, junit_path, html_path, markdown)
        if runner.cache_problems:
            options.say(console, "warning:", "yellow", f"{len(runner.cache_problems)} change(s) to the action cache could "
                        f"not be made, the first: {runner.cache_problems[0]}")
        console.print(summary.line(), soft_wrap=True)
        for case in summary.cases:
            if case.status in ("failed", "needs_approval", "needs_input", "error"):
                options.say(console, case.status, "red", f"{case.id}: {case.failure}  ({case.dir / 'report.html'})")
            elif case.status == "flaky":
                options.say(console, "flaky", "yellow", f"{case.id}: passed on attempt {len(case.attempts)}")
        console.print(f"JUnit: {junit_path} · HTML: {html_path}" + (f" · Markdown: {markdown}" if markdown else ""), soft_wrap=True)
        if summary.stopped:
            options.say(console, "stopped:", "red", summary.stopped)
            raise typer.Exit(EXIT_UNREACHABLE if summary.stopped_kind in ("unreachable", "app_unreachable") else EXIT_USAGE)
        raise typer.Exit(EXIT_OK if summary.ok else EXIT_FAILED)
