"""pytest plugin (entry point `pytest11`): a `surfer` fixture for browser tests
written in Python, on the same action cache, run directories and reports as
`surfer qa`.

    def test_orders(surfer):
        surfer.goto("http://127.0.0.1:8080/login.html")
        surfer.act("Sign in as alice with the password {{secret:SHOP_PASSWORD}}")
        surfer.expect("The orders page lists order #1044")
        surfer.expect(text="794.36")
        total = surfer.extract("the total of order #1044", schema=float)

Options: --surfer-base-url / --surfer-model (the model server, else the
SURFER_* environment or --surfer-config), --surfer-cache DIR (default
surfer-cache; `none` turns it off), --surfer-out DIR (run directories,
default surfer-runs/pytest). Each test is one case: its `act` calls are its
steps, cached after the test passes. One Chromium serves the whole session,
each test in its own browser context."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any, Coroutine, Iterator, Optional, TypeVar

import pytest

T = TypeVar("T")
CALL_TIMEOUT = 1800.0


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("surfer", "surfer browser tests in plain language")
    group.addoption("--surfer-base-url", default=None, help="OpenAI-compatible model endpoint (default $SURFER_BASE_URL).")
    group.addoption("--surfer-model", default=None, help="Model name served there (default $SURFER_MODEL).")
    group.addoption("--surfer-profile", default=None, help="Model family profile (default $SURFER_PROFILE or holotron).")
    group.addoption("--surfer-config", default=None, help="surfer TOML configuration file.")
    group.addoption("--surfer-cache", default="surfer-cache", help="Action cache directory; 'none' to run every step with the model.")
    group.addoption("--surfer-out", default="surfer-runs/pytest", help="Where each test's run directories and report go.")
    group.addoption("--surfer-headful", action="store_true", default=False, help="Show the browser.")
    group.addoption("--surfer-tracing", default=None, choices=("on", "retain-on-failure", "off"),
                    help="Playwright trace of each test as trace.zip in its directory (default off).")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.surfer_passed = report.passed


class _LoopThread:
    """An event loop of its own in a thread: the fixture's methods are sync and
    work from plain and from async tests alike."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="surfer-pytest", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        from surfer.core.surface import calling_from_pytest

        with calling_from_pytest():  # (the task takes this thread's context: its messages name the plugin's options)
            future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(CALL_TIMEOUT)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class SurferRuntime:
    """Per pytest session: configuration, one Chromium, shared model backends."""

    def __init__(self, options: Any) -> None:
        from surfer.agent.config import load_config
        from surfer.fleet.batch import shared_backends
        from surfer.fleet.browser_pool import SharedBrowser

        from .cache import ActionCache

        overrides = {
            "base_url": options.getoption("surfer_base_url"), "model": options.getoption("surfer_model"),
            "profile": options.getoption("surfer_profile"),
            "browser": {"headless": False if options.getoption("surfer_headful") else None,
                        "trace": options.getoption("surfer_tracing")},
        }
        from surfer.core.errors import ConfigError

        try:
            self.config = load_config(options.getoption("surfer_config"), overrides)
        except ConfigError as exc:
            raise pytest.UsageError(f"surfer: {exc}") from None
        cache = options.getoption("surfer_cache")
        self.cache = None if str(cache).lower() == "none" else ActionCache(cache)
        self.out = Path(options.getoption("surfer_out"))
        self.loop = _LoopThread()
        self.browser = SharedBrowser.of(self.config.browser, guarded=self.config.has_domain_rules)  # (a config file may attach to a browser elsewhere)
        self.backends = shared_backends(self.config, None)
        self._started = False

    async def browser_handle(self) -> Any:
        if not self._started:
            await self.browser.start()
            self._started = True
        return await self.browser.get()

    async def aclose(self) -> None:
        if self._started:
            await self.browser.close()
        for backend in {id(b): b for b in self.backends.values()}.values():
            await backend.aclose()

    def close(self) -> None:
        self.loop.run(self.aclose())
        self.loop.close()


class SurferFixture:
    """The `surfer` fixture: goto, act, expect, extract on one browser context."""

    def __init__(self, runtime: SurferRuntime, node_id: str) -> None:
        import os
        import shutil

        from surfer.agent.loop import slugify

        from .outcomes import AttemptReport, CaseReport
        from .suite import Case

        self.runtime = runtime
        self.case_id = "pytest/" + slugify(node_id.replace("::", "-"), 120, distinct=True)
        self.dir = runtime.out / slugify(node_id.replace("::", "-"), 120, distinct=True)
        shutil.rmtree(self.dir, ignore_errors=True)  # this test's record from an earlier session is replaced
        self.report = CaseReport("pytest", Case(name=node_id, task=node_id), self.case_id, self.dir, status="running")
        self.attempt = AttemptReport(1, str(self.dir / "attempt-1"))
        self.report.attempts.append(self.attempt)
        self.report.started = time.monotonic()
        self.entry = runtime.cache.load(self.case_id) if runtime.cache is not None else None
        self._environ = os.environ
        self._env: Any = None
        self._agent: Any = None
        self._goals: list[str] = []
        self._runs = 0

    # -- plumbing ------------------------------------------------------------

    async def _session(self, goal: str = "") -> tuple[Any, Any]:
        """This test's browser context and an agent that knows the secrets typed so far."""
        from surfer.agent.environments import browser_environment
        from surfer.agent.events import ModelCalled
        from surfer.agent.loop import Agent
        from surfer.core.errors import ConfigError

        from .executor import QaEnvironment
        from .suite import secrets_for

        if self._env is None:
            self._env = QaEnvironment(browser_environment(self.runtime.config, await self.runtime.browser_handle()), None, None)
        if goal:
            self._goals.append(goal)
            try:
                secrets = secrets_for(self._goals, self._environ)
            except ConfigError as exc:
                raise pytest.UsageError(str(exc)) from None
            if secrets.names != self._env.secrets.names:
                self._env.secrets, self._agent = secrets, None
        if self._agent is None:
            def count(event: Any) -> None:
                if isinstance(event, ModelCalled):
                    self.attempt.model_calls += 1

            self._agent = Agent(self.runtime.config, environment=self._env, backends=self.runtime.backends,
                                listeners=[count], secrets=self._env.secrets)
        return self._env, self._agent

    def _next_dir(self, kind: str) -> Path:
        self._runs += 1
        return Path(self.attempt.dir) / f"{self._runs:02d}-{kind}"

    def _last_report(self) -> str:
        for step in reversed(self.attempt.steps):
            if step.run_dirs:
                return str(Path(step.run_dirs[-1]) / "report.html")
        return str(self.dir / "report.html")

    # -- the API ---------------------------------------------------------------

    def goto(self, url: str) -> None:
        """Open `url` in this test's browser context."""
        async def go() -> None:
            env, _ = await self._session()
            await env.start(url)
        self.runtime.loop.run(go())

    def act(self, goal: str) -> Optional[str]:
        """Do `goal` (a sub-goal in plain language) and return the agent's answer;
        fails the test when it cannot be done. Replays from the cache when it can."""
        from .outcomes import StepReport
        from .runner import run_goal

        async def act() -> StepReport:
            env, agent = await self._session(goal)
            step = StepReport(len(self.attempt.steps) + 1, goal)
            self.attempt.steps.append(step)
            cached = self.entry.step(step.index - 1, goal) if self.entry is not None else None
            self.attempt.used_cache |= cached is not None
            healing_calls = await run_goal(env, agent, step, cached, self._next_dir("act"))
            self.attempt.model_calls += healing_calls
            return step

        step = self.runtime.loop.run(act())
        if step.status != "success":
            self.attempt.failure = f"act({goal!r}) ended {step.status}: {step.reason}"
            raise AssertionError(f"{self.attempt.failure}\nrun report: {self._last_report()}")
        return step.answer

    def expect(self, statement: Optional[str] = None, *, text: Optional[str] = None, url: Optional[str] = None) -> None:
        """Check the page now: a statement judged by the validator on the screen,
        or visible `text`, or a `url` regular expression."""
        from .expectations import check_expectations
        from .suite import TextExpectation, UrlExpectation

        given = [e for e in (statement, TextExpectation(text=text) if text else None, UrlExpectation(url=url) if url else None) if e]
        if len(given) != 1:
            raise TypeError("expect() takes one statement, or text=..., or url=...")

        async def check() -> Any:
            env, agent = await self._session()

            async def sink(call: Any) -> None:
                self.attempt.model_calls += 1

            return (await check_expectations(given, env, answer=None, timeout=3.0, validator=agent.validator,
                                             profile=agent.profile, sink=sink))[0]

        result = self.runtime.loop.run(check())
        self.attempt.expectations.append(result)
        if not result.passed:
            self.attempt.failure = f"expected {result.expectation}: {result.detail}"
            raise AssertionError(f"{self.attempt.failure}\nrun report: {self._last_report()}")

    def extract(self, what: str, schema: Any = str) -> Any:
        """Read `what` off the screen with the agent, as data of `schema`: a
        pydantic model, a JSON Schema dict, or a plain type such as `float`
        (the agent's typed answers, `answer_schema`)."""
        from pydantic import BaseModel, create_model

        wrapped = not isinstance(schema, dict) and not (isinstance(schema, type) and issubclass(schema, BaseModel))
        answer_schema = create_model("Extracted", value=(schema, ...)) if wrapped else schema

        async def run() -> Any:
            _, agent = await self._session()
            return await agent.run(f"Read {what} from the screen and give it as the answer's data.", None,
                                   out_dir=self._next_dir("extract"), answer_schema=answer_schema)

        result = self.runtime.loop.run(run())
        if result.status != "success" or result.data is None:
            raise AssertionError(f"extract({what!r}) ended {result.status}: {result.reason}\nrun report: {result.run_dir}/report.html")
        return result.data.value if wrapped else result.data

    # -- end of the test -------------------------------------------------------------

    def finish(self, passed: bool) -> None:
        from .cache import CachedStep, CaseEntry
        from .reports import write_case_report

        self.attempt.status = "passed" if passed else "failed"
        if self._env is not None:
            self.runtime.loop.run(self._env.save_trace(self.dir, self.attempt.status))
            self.runtime.loop.run(self._env.close())
        self.report.status = self.attempt.status
        self.report.seconds = self.attempt.seconds = time.monotonic() - (self.report.started or time.monotonic())
        cache = self.runtime.cache
        if passed and cache is not None and self.attempt.steps:
            steps = [CachedStep(s.goal, s.actions, s.answer, s.end_url) for s in self.attempt.steps]
            self.report.cache_written = cache.store(CaseEntry(self.case_id, "", steps))
        elif not passed and cache is not None and self.attempt.used_cache:
            cache.drop(self.case_id)  # a test cannot be re-run from here: its next run goes to the model
            self.report.cache_dropped = True
        write_case_report(self.report)


@pytest.fixture(scope="session")
def surfer_runtime(pytestconfig: Any) -> Iterator[SurferRuntime]:
    runtime = SurferRuntime(pytestconfig)
    yield runtime
    runtime.close()


@pytest.fixture
def surfer(surfer_runtime: SurferRuntime, request: Any) -> Iterator[SurferFixture]:
    fixture = SurferFixture(surfer_runtime, request.node.nodeid)
    yield fixture
    fixture.finish(getattr(request.node, "surfer_passed", False))
