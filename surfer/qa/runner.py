"""Running suites: each case in its own browser context of one shared
Chromium, cases in parallel, steps in order (from the action cache when it
holds them), then the expectations.

    out/results.jsonl                          one line per case that ran to an outcome
    out/attempts.jsonl                         cases that got none (server unreachable, bad configuration, stopped)
    out/cases/<suite>/<case>/report.html       the case: attempts, steps, expectations
    out/cases/<suite>/<case>/attempt-1/step-01 the run directory of each step

A failing case is tried again up to `retries` times (passing on a retry makes
it flaky). A case that fails while replaying from the cache has its entry
dropped and runs once more with the model."""

from __future__ import annotations

import asyncio
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from surfer.agent.config import AgentConfig
from surfer.agent.environments import browser_environment, desktop_environment
from surfer.agent.events import Event, ModelCall, ModelCalled, StepStarted
from surfer.agent.video import make_video
from surfer.core.retention import keeps
from surfer.core.errors import ActionFailed, ConfigError, EnvironmentFailure, SurferError
from surfer.core import stopping
from surfer.fleet.batch import BATCH_STOPPING_ERRORS, ResultsIndex, drain, shared_backends
from surfer.models.affinity import model_session
from surfer.fleet.browser_pool import SharedBrowser
from surfer.models.backend import ModelBackend

from .anchors import url_pattern
from .cache import ActionCache, CachedStep, CaseEntry
from .executor import QaEnvironment
from .expectations import check_expectations
from .outcomes import AttemptReport, CaseReport, QaSummary, StepReport
from .replay import StepReplay
from .suite import AnswerExpectation, Suite, SuiteError, agent_goal, secret_names, secrets_for
from .out_dir import check_out_dir

STOPPING_ERRORS = BATCH_STOPPING_ERRORS | {"app_unreachable"}  # not a case's outcome: the run stops


@dataclass
class SuiteRun:
    """One suite with its configuration, model backends and (when it has one of
    its own) action cache."""

    suite: Suite
    config: AgentConfig
    backends: dict[str, ModelBackend] = field(default_factory=dict)
    cache: Optional[ActionCache] = None


class LazyAgent:
    """An Agent made on first use: a case replayed from the cache with
    deterministic expectations never needs one."""

    def __init__(self, make: Any) -> None:
        self._make = make
        self._agent: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._agent is None:
            self._agent = self._make()
        return getattr(self._agent, name)


async def run_goal(
    env: QaEnvironment, agent: Any, step: StepReport, cached: Optional[CachedStep], step_dir: Path, *,
    answer_must_show: bool = False,
) -> int:
    """Run one goal (a step, or a task): from the cache when it holds it, healing
    where the page changed, else (or when the replay stops) with the agent.
    Fills `step` (status, answer, the actions performed with their anchors) and
    returns the model calls made outside the agent's events (healing)."""
    env.take_log()
    calls = 0
    if cached is not None:
        replay = await StepReplay(env, agent.localizer, agent.profile, step_dir, step.goal).run(cached)
        calls += replay.model_calls
        step.run_dirs.append(str(step_dir))
        if replay.missed is None and answer_must_show and cached.answer:
            if " ".join(cached.answer.split()) not in await env.visible_text():
                replay.missed = f"the cached answer {cached.answer!r} is not on the screen any more"
        if replay.missed is None:
            step.source = "healed" if replay.healed else "cache"
            step.status, step.answer, step.healed = "success", cached.answer, replay.healed
            step.reason = "replayed from the action cache"
        else:
            step.source, step.healed = "healed", [f"replay stopped: {replay.missed}; the policy took over"]
    if step.status != "success":
        model_dir = step_dir / "model" if cached is not None else step_dir
        result = await agent.run(agent_goal(step.goal), None, out_dir=model_dir)
        if result.run_dir:  # (none when the model server was never reached)
            step.run_dirs.append(str(model_dir))
        step.status, step.answer, step.reason, step.error_kind = result.status, result.answer, result.reason, result.error_kind
    step.actions, step.end_url = env.take_log(), env.page_pattern()
    return calls


class QaRunner:
    def __init__(
        self,
        suites: list[SuiteRun],
        out_dir: str | Path,
        *,
        concurrency: Optional[int] = None,
        retries: Optional[int] = None,
        cache: Optional[ActionCache] = None,
        update_cache: bool = False,
        backend: Optional[ModelBackend] = None,
        environ: Optional[Mapping[str, str]] = None,
        select: Any = None,
        on_finish: Optional[Callable[[CaseReport], None]] = None,
    ) -> None:
        """`on_finish`: called with each case's report once it is recorded (its outcome, or unfinished)."""
        import os

        self.suites = suites
        self.out_dir = Path(out_dir)
        self.concurrency = concurrency or max(s.suite.concurrency for s in suites)
        if any(s.suite.environment == "desktop" for s in suites):
            self.concurrency = 1  # one screen, one mouse
        self.retries = retries
        self.cache = cache
        self.update_cache = update_cache
        self.cache_problems: list[str] = []  # cache entries that could not be written (the cases' outcomes stand)
        self._backend = backend
        environ = os.environ if environ is None else environ
        self.cases: list[CaseReport] = []
        self._runs: dict[str, SuiteRun] = {}
        for run in suites:
            chosen = {run.suite.case_id(c) for c in run.suite.cases if select is None or select(c, run.suite.case_id(c))}
            if any(not c.setup and run.suite.case_id(c) in chosen for c in run.suite.cases):
                # the cases chosen start with what their suite's setup cases save: those run too (--tag, --grep,
                # --rerun-failed leaving them out ran the others on a state file that was never written)
                chosen |= {run.suite.case_id(c) for c in run.suite.cases if c.setup}
            for case in run.suite.cases:
                case_id = run.suite.case_id(case)
                if case_id not in chosen:
                    continue
                self.cases.append(CaseReport(run.suite.name, case, case_id, self.out_dir / "cases" / case_id))
                self._runs[case_id] = run
        for report in self.cases:  # the secrets of the cases that run must be set (others' need not be)
            unset = self._runs[report.id].suite.unset_secrets.get(report.case.name)
            if unset is not None:
                raise SuiteError(unset)
        self._secrets = secrets_for([g for c in self.cases for g in c.case.goals], environ)
        self._browser = SharedBrowser.of(suites[0].config.browser, self.concurrency, guarded=any(
            s.config.has_domain_rules for s in suites)) if suites else SharedBrowser()
        self._stopped: Optional[str] = None
        self._stopped_kind: Optional[str] = None
        self._failed_setup: dict[str, str] = {}  # suite name -> why its setup case did not pass
        self.index = ResultsIndex(self.out_dir / "results.jsonl")
        self._on_finish = on_finish

    # -- the run -------------------------------------------------------------------------

    def warn_unbound_secrets(self, say: Callable[[str], None]) -> None:
        """Say once, before the cases run, that the suites' secrets may be typed on any site when a suite that
        types one has no allowed domains (with them, its secrets are bound to those)."""
        typing = {self._runs[r.id].suite.name for r in self.cases if any(secret_names(g) for g in r.case.goals)}
        unbound = [s for s in self.suites if s.suite.name in typing and not s.config.allowed_domains]
        if unbound:
            self._secrets.warn_unbound((), say, how=(
                f"give {'these suites' if len(unbound) > 1 else 'the suite'} allowed domains (--allow-domain, "
                "or allowed_domains in its model settings) to keep them to those sites"))
        else:
            self._secrets.warned = True  # every suite that types one keeps it to its allowed domains

    def _clear_previous(self) -> None:
        """An --out directory reused: the previous run's results give way to this one's (a directory that holds
        something else there is refused, never cleared: a batch's results, a project's own cases/ folder)."""
        check_out_dir(self.out_dir)
        shutil.rmtree(self.out_dir / "cases", ignore_errors=True)
        self.index.path.unlink(missing_ok=True)
        self.index.attempts_path.unlink(missing_ok=True)

    async def run(self) -> QaSummary:
        started = time.monotonic()
        await asyncio.to_thread(self._clear_previous)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for run in self.suites:
            if not run.backends:
                run.backends = shared_backends(run.config, None, self._backend)
        try:
            await self._check_apps()
            if self._stopped is None and any(self._runs[c.id].suite.environment == "browser" for c in self.cases):
                await self._browser.start()
            keep_going = lambda: self._stopped is None  # noqa: E731
            # setup cases first, one at a time (Playwright's setup projects): the others start with what they saved
            await drain([c for c in self.cases if c.case.setup], 1, self.run_case, keep_going)
            await drain([c for c in self.cases if not c.case.setup], self.concurrency, self.run_case, keep_going)
            if self._stopped is not None:
                await self._record_not_started("unfinished", f"not started: the run stopped ({self._stopped})")
        except asyncio.CancelledError:
            await asyncio.shield(self._record_not_started("interrupted", stopping.interrupted_reason()))
            raise
        finally:
            await asyncio.shield(self._browser.close())
            if self._backend is None:
                closed: set[int] = set()
                for run in self.suites:
                    for backend in run.backends.values():
                        if id(backend) not in closed:
                            closed.add(id(backend))
                            await asyncio.shield(backend.aclose())
        return QaSummary(self.out_dir, self.cases, time.monotonic() - started, self._stopped, self._stopped_kind)

    async def _check_apps(self) -> None:
        """The app under test is checked once, before any case: down, the run stops and no case starts (each
        is recorded unfinished, the reason in its JUnit error), rather than every case failing on its own."""
        from .preflight import same_origin, unreachable_app

        if self._browser.attached:  # a browser on another machine reaches what it reaches
            return
        bases = {}  # the base URL of each suite with a case that starts there
        for case in self.cases:
            suite = self._runs[case.id].suite
            if suite.environment == "browser" and same_origin(suite.resolve_url(case.case.url), suite.base_url):
                bases.setdefault(suite.base_url, None)
        down = await unreachable_app(list(bases))
        if down is not None:
            self._stopped, self._stopped_kind = down, "app_unreachable"
            for report in self.cases:
                report.status = "unfinished"

    async def _record_not_started(self, status: str, why: str) -> None:
        """The cases a stopped run never started go to attempts.jsonl as the stopped ones do (with no attempt), so
        that a re-run of what did not pass (--rerun-failed) runs them too."""
        for report in self.cases:
            if report.status == "queued" or (report.status == "unfinished" and not report.attempts):
                await self.index.append_attempt({**report.to_record(self.out_dir), "status": status, "failure": why})

    async def run_case(self, report: CaseReport) -> None:
        run = self._runs[report.id]
        report.status, report.started = "running", time.monotonic()
        if run.suite.name in self._failed_setup and not report.case.setup:
            await self._skip(report, self._failed_setup[run.suite.name])
            return
        retries = self.retries if self.retries is not None else (report.case.retries if report.case.retries is not None else run.suite.retries)
        entry = None
        cache = run.cache or self.cache
        if cache is not None and not self.update_cache:
            entry = await asyncio.to_thread(cache.load, report.id)
            if entry is not None and entry.start_url != self._start_pattern(run, report):
                entry = None  # the case starts somewhere else now: its recorded steps do not apply
        failed_before = False
        for number in range(1, retries + 2):
            try:
                attempt = await self._attempt(run, report, entry, "retry" if number > 1 else "try")
            except asyncio.CancelledError:  # stopped: the case has no outcome; its attempts are recorded, and its
                # report written (the summary links it; an earlier attempt's failure, trace and video are read there)
                from .reports import write_case_report

                report.seconds = time.monotonic() - (report.started or time.monotonic())  # (how long it ran)
                await asyncio.shield(self.index.append_attempt(
                    {**report.to_record(self.out_dir), "status": "interrupted", "failure": stopping.interrupted_reason()}))
                await asyncio.shield(asyncio.to_thread(write_case_report, report, "interrupted"))
                raise
            if attempt.error_kind == "environment":
                await self._app_gone(run, report, attempt)
            if attempt.status != "passed" and attempt.used_cache and attempt.error_kind not in STOPPING_ERRORS:
                # a cache entry that replays into a failure is dropped; the case runs with the model once more
                report.cache_dropped, entry = True, None
                if cache is not None:
                    await self._in_cache(cache.drop, report.id)
                attempt = await self._attempt(run, report, None, "cache-dropped")
            if attempt.status in ("passed", "needs_approval", "needs_input") or attempt.error_kind in STOPPING_ERRORS:
                break  # a refusal is not luck: trying again asks for the same approval
            failed_before = True
        last = report.last
        assert last is not None
        if last.status == "passed":
            report.status = "flaky" if failed_before else "passed"
            if cache is not None:
                report.cache_written = bool(await self._in_cache(cache.store, self._entry(run, report)))
        else:
            report.status = last.status if last.status in ("error", "needs_approval", "needs_input") else "failed"
            if last.error_kind in STOPPING_ERRORS:  # not the case's outcome: the run stops, the case is not finished
                report.status = "unfinished"
                if self._stopped is None:
                    self._stopped, self._stopped_kind = last.failure, last.error_kind
        if report.case.setup and not report.passed:
            self._failed_setup.setdefault(run.suite.name, f"its setup case {report.case.name!r} did not pass ({report.failure})")
        await self._finish(report)

    async def _in_cache(self, change: Callable[..., Any], *args: Any) -> Any:
        """A change to the action cache; one that cannot be made (a read-only checkout, a full disk) is noted for
        the command to say, and the case's outcome stands: it ended the run in a traceback, no report written."""
        try:
            return await asyncio.to_thread(change, *args)
        except OSError as exc:
            self.cache_problems.append(f"{getattr(change, '__name__', 'change')}: {exc}")
            return None

    async def _app_gone(self, run: SuiteRun, report: CaseReport, attempt: AttemptReport) -> None:
        """A case whose page did not open: if the app went away (it crashed mid-suite), the run stops here
        rather than every case after it failing (and retrying) on its own with the same error."""
        from .preflight import same_origin, unreachable_app

        if self._browser.attached or not (attempt.failure or "").startswith("could not open "):
            return
        if not same_origin(run.suite.resolve_url(report.case.url), run.suite.base_url):
            return  # a page of another host: the case's own failure
        down = await unreachable_app([run.suite.base_url])
        if down is not None:
            attempt.error_kind, attempt.failure = "app_unreachable", down

    async def _skip(self, report: CaseReport, why: str) -> None:
        """A case whose suite's setup case did not pass: recorded as an error, never run signed out."""
        attempt = AttemptReport(1, str(report.dir / "attempt-1"), "try")
        attempt.status, attempt.error_kind, attempt.failure = "error", "environment", f"not run: {why}"
        report.attempts.append(attempt)
        report.status = "error"
        await self._finish(report)

    async def _finish(self, report: CaseReport) -> None:
        from .reports import write_case_report

        report.seconds = time.monotonic() - (report.started or time.monotonic())
        report.current_step = ""
        await asyncio.to_thread(write_case_report, report)
        if report.status == "unfinished":
            await self.index.append_attempt(report.to_record(self.out_dir))
        else:
            await self.index.append(report.to_record(self.out_dir))
        if self._on_finish is not None:
            self._on_finish(report)

    def _entry(self, run: SuiteRun, report: CaseReport) -> CaseEntry:
        last = report.last
        assert last is not None
        steps = [CachedStep(s.goal, s.actions, s.answer, s.end_url) for s in last.steps]
        return CaseEntry(report.id, self._start_pattern(run, report), steps)

    @staticmethod
    def _start_pattern(run: SuiteRun, report: CaseReport) -> str:
        start = run.suite.resolve_url(report.case.url) or ""
        return url_pattern(start, run.suite.base_url) if start else ""

    # -- one attempt ---------------------------------------------------------------------

    async def _attempt(self, run: SuiteRun, report: CaseReport, entry: Optional[CaseEntry], kind: str) -> AttemptReport:
        number = len(report.attempts) + 1
        attempt = AttemptReport(number, str(report.dir / f"attempt-{number}"), kind)
        report.attempts.append(attempt)
        started = time.monotonic()
        for retry in (1, 2):
            browser = await self._browser.get() if run.suite.environment == "browser" else None
            env = QaEnvironment(self._environment(run, browser, report.case), self._secrets, run.suite.base_url)
            try:
                with model_session(f"{run.suite.slug}/{report.id}"):  # the case's steps and checks: one model server
                    await self._steps(run, report, attempt, env, entry)
                await self._save_setup_state(run, report, attempt, env)
            except asyncio.CancelledError:
                attempt.status, attempt.failure = "error", "interrupted"
                raise
            except ConfigError as exc:  # the environment cannot start (the desktop's display went away): the run stops
                attempt.status, attempt.error_kind, attempt.failure = "error", "config", str(exc)
            except Exception as exc:  # noqa: BLE001 - recorded for this case; the run goes on
                attempt.status, attempt.error_kind = "error", "internal"
                attempt.failure = f"internal error: {exc!r}"
            finally:
                if browser is None or self._browser.alive(browser):
                    await asyncio.shield(env.save_trace(Path(attempt.dir), attempt.status))
                await asyncio.shield(env.close())
                if keeps(run.config.video, attempt.status):
                    sources = [Path(d) for s in attempt.steps for d in s.run_dirs]
                    await asyncio.shield(asyncio.to_thread(make_video, attempt.dir, sources))
            if attempt.status == "error" and browser is not None and not self._browser.alive(browser) and retry == 1:
                # the shared browser died under this case: not the case's fault
                await self._browser.relaunch(browser)
                attempt.steps, attempt.status, attempt.failure = [], "running", None
                continue
            break
        attempt.seconds = round(time.monotonic() - started, 3)
        return attempt

    def _environment(self, run: SuiteRun, browser: Any, case: Any) -> Any:
        config = run.config
        if run.suite.environment == "desktop":
            return desktop_environment(config)
        state = run.suite.state_file(case)
        if state is not None or case.setup:  # a setup case starts signed out; the others with its state
            browser_settings = config.browser.model_copy(update={"storage_state": str(state) if state else None})
            config = config.model_copy(update={"browser": browser_settings})
        return browser_environment(config, browser)

    async def _save_setup_state(self, run: SuiteRun, report: CaseReport, attempt: AttemptReport, env: QaEnvironment) -> None:
        """A setup case that passed writes its browser's storage state for the cases after it."""
        target = run.suite.setup_output(report.case)
        capture = getattr(env.inner, "capture_storage_state", None)
        if target is None or attempt.status != "passed" or capture is None:
            return
        from surfer.tools.browser.state import write_storage_state

        state = await capture()
        if state is None:
            attempt.status, attempt.error_kind = "error", "environment"
            attempt.failure = "the browser's storage state could not be read after the setup case"
            return
        await asyncio.to_thread(write_storage_state, state, target)

    async def _steps(self, run: SuiteRun, report: CaseReport, attempt: AttemptReport, env: QaEnvironment, entry: Optional[CaseEntry]) -> None:
        from surfer.agent.loop import Agent

        case = report.case

        def count(event: Event) -> None:
            if isinstance(event, ModelCalled):
                attempt.model_calls += 1
            elif isinstance(event, StepStarted):
                report.current_step = report.current_step.split(" ·")[0] + f" · action {event.index}"

        confirm = run.suite.confirm_settings(case)
        if "approve_domains" in confirm:
            confirm["approve_domains"] = [*run.config.approve_domains, *confirm["approve_domains"]]
        # the case's video is made from all its steps when the attempt ends (_attempt), not one per step
        config = run.config.model_copy(update={"max_seconds": run.suite.timeouts.step, "video": "off", **confirm})
        agent = LazyAgent(lambda: Agent(config, environment=env, backends=run.backends, listeners=[count], secrets=self._secrets))
        start_url = run.suite.resolve_url(case.url)
        try:
            await env.start(start_url)
        except (ActionFailed, EnvironmentFailure) as exc:
            said = str(exc)  # (the browser's own error names the address already)
            attempt.status, attempt.error_kind = "error", "environment"
            attempt.failure = said if said.startswith("could not open ") else f"could not open {start_url}: {said}"
            return
        goals = case.goals
        answer_checked = any(isinstance(e, AnswerExpectation) for e in case.expect)
        answer: Optional[str] = None
        for index, goal in enumerate(goals, 1):
            step = StepReport(index, goal)
            attempt.steps.append(step)
            cached = entry.step(index - 1, goal) if entry is not None else None
            attempt.used_cache |= cached is not None
            report.current_step = f"{index}/{len(goals)}" + (" (cache)" if cached is not None else "")
            healing_calls = await run_goal(
                env, agent, step, cached, Path(attempt.dir) / f"step-{index:02d}",
                answer_must_show=answer_checked and index == len(goals),
            )
            attempt.model_calls += healing_calls  # (after the await: the agent's calls are counted during it)
            if step.status != "success":
                attempt.status = step.status if step.status in ("error", "needs_approval", "needs_input") else "failed"
                attempt.error_kind = step.error_kind
                attempt.failure = f"step {index} ({goal}) ended {step.status}: {step.reason or 'no reason given'}"
                return
            answer = step.answer
        report.current_step = "expectations"

        async def sink(call: ModelCall) -> None:
            attempt.model_calls += 1

        try:
            attempt.expectations = await check_expectations(
                case.expect, env, answer=answer, timeout=run.suite.timeouts.expect,
                validator=agent.validator, profile=agent.profile, sink=sink,
            )
        except SurferError as exc:
            from surfer.agent.loop import _error_kind

            attempt.status, attempt.error_kind, attempt.failure = "error", _error_kind(exc), f"checking the expectations: {exc}"
            return
        except Exception as exc:  # noqa: BLE001 - StepFailed (validator output unusable) and the like
            attempt.status, attempt.error_kind, attempt.failure = "error", "model", f"checking the expectations: {exc}"
            return
        failed = [e for e in attempt.expectations if not e.passed]
        if failed:
            attempt.status = "failed"
            attempt.failure = "; ".join(f"expected {e.expectation}: {e.detail}" for e in failed)
        else:
            attempt.status = "passed"
