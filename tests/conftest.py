"""Shared fixtures: fixture sites on 127.0.0.1, the stand-in model server,
and the demo site's measured layout. No test talks to the internet."""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest

from surfer.apps.demo.oracle import DEMO_SITE
from surfer.apps.demo.static_site import StaticSite
from surfer.models.standin import StandInServer

pytest_plugins = ["pytester"]

# Node's compile cache for Playwright's driver: its ~12 MB of JavaScript compiled once, not at every start
# (~0.1 s of CPU less each time a driver starts, hundreds of times in a run: every browser a test, a `surfer`
# process or a Ray worker launches). Every process the tests start inherits it.
os.environ.setdefault("NODE_COMPILE_CACHE", os.path.join(tempfile.gettempdir(), "surfer-tests-node-compile-cache"))

# A developer's OpenAI settings (surfer reads them below its own) never reach the tests' runs and processes.
for _key in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
    os.environ.pop(_key, None)

PAGES = Path(__file__).with_name("pages")
XVFB_SCREEN = (1024, 768)


@pytest.fixture(scope="session", autouse=True)
def default_runs_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Runs given no directory of their own (the SDK's default, `surfer run` and
    `surfer demo` without --out, in this process) are recorded in a temporary
    folder, not in runs/ of the checkout. tests/test_readme.py checks the real default."""
    from surfer.agent import rundir

    saved, rundir.RUNS_ROOT = rundir.RUNS_ROOT, tmp_path_factory.mktemp("runs")
    yield rundir.RUNS_ROOT
    rundir.RUNS_ROOT = saved


# -- tests that run alone ------------------------------------------------------------
# scripts/test.sh runs the suite on two pytest-xdist workers. A test marked `serial`
# (it measures time or load, or loads the machine itself) runs while the other worker
# runs nothing: every test holds a shared lock on a file of this run, a serial one the
# exclusive lock. A second file is the gate: a serial test waiting for its turn holds
# it, so the other worker starts no new test meanwhile and the serial one is not starved.


@contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    with open(path, "a") as file:
        fcntl.flock(file, mode)
        try:
            yield
        finally:
            fcntl.flock(file, fcntl.LOCK_UN)


@contextmanager
def _turn(shared: Path, alone: bool) -> Iterator[None]:
    gate, lock = shared / "serial.gate", shared / "serial.lock"
    with _flock(gate, fcntl.LOCK_EX):
        held = open(lock, "a")
        fcntl.flock(held, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
    try:
        yield
    finally:
        fcntl.flock(held, fcntl.LOCK_UN)
        held.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # type: ignore[no-untyped-def]
    if not hasattr(item.config, "workerinput"):  # one process: every test runs alone anyway
        yield
        return
    shared = item.config._tmp_path_factory.getbasetemp().parent  # the workers' basetemps are popen-gw0, -gw1 in it
    with _turn(shared, alone=item.get_closest_marker("serial") is not None):
        yield


def pytest_deselected(items):  # type: ignore[no-untyped-def]
    """The files of the `serial` tests a run leaves out (the parallel phase's `-m "not serial"`), appended to
    $SURFER_SERIAL_FILES where set: scripts/test.sh hands the serial phase only those files to collect
    (~1.2 s less than collecting every file, in a phase that runs alone)."""
    record = os.environ.get("SURFER_SERIAL_FILES")
    files = sorted({item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("serial")})
    if record and files:
        with open(record, "a") as out:
            out.write("".join(f"{name}\n" for name in files))  # one write: the workers append side by side


# -- the longest files first ----------------------------------------------------------
# scripts/test.sh hands each pytest-xdist worker whole files, in collection order
# (--no-loadscope-reorder). The files that take longest (browsers, subprocesses, a Ray
# cluster: 15-110 s each on two cores) go first, so that no worker starts one of them
# while the others have run out of work. The rest keep their order.
LONGEST_FILES = ("test_qa_run.py", "test_batch_ray.py", "test_mcp.py", "test_soak.py", "test_view.py", "test_miniwob.py",
                 "test_inprocess_backends.py", "test_qa_pytest_plugin.py", "test_batch.py")


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    rank = {name: k for k, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # a stable sort


@pytest.fixture(scope="session")
def demo_site() -> Iterator[StaticSite]:
    with StaticSite(DEMO_SITE) as site:
        yield site


@pytest.fixture(scope="session")
def pages() -> Iterator[StaticSite]:
    """tests/pages served over HTTP."""
    with StaticSite(PAGES) as site:
        yield site


@pytest.fixture(scope="session")
def acme_site():
    """The login site of tests/login_site.py: pages behind a server-side session."""
    from login_site import AcmeSite

    with AcmeSite() as site:
        yield site


@pytest.fixture(scope="session")
async def acme_centres(acme_site, shared_browser):  # type: ignore[no-untyped-def]
    """Where its login form's fields are drawn at the signed-in tests' viewport."""
    from login_site import VIEWPORT, measure_login

    return await measure_login(acme_site, VIEWPORT, shared_browser)


@pytest.fixture
def standin() -> Iterator[Callable[..., StandInServer]]:
    """Factory: standin(responder, **options) -> a started StandInServer."""
    servers: list[StandInServer] = []

    def make(respond, **options) -> StandInServer:  # type: ignore[no-untyped-def]
        server = StandInServer(respond, **options).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
async def shared_browser():
    """One Chromium for the session; tests take isolated contexts from it. Launched as for sessions with domain
    rules (`guarded`: WebRTC held to the guard proxy), which tests of those rules need and no other test minds."""
    from playwright.async_api import async_playwright

    from surfer.tools.browser import launch_chromium

    async with async_playwright() as playwright:
        browser = await launch_chromium(playwright, guarded=True)
        yield browser
        await browser.close()


@pytest.fixture(scope="session")
def measure(shared_browser):  # type: ignore[no-untyped-def]
    """`await measure(site_url, viewport, **options)`: surfer.apps.demo.oracle.measure_targets in the shared
    browser (a context of its own) rather than a Playwright driver and a Chromium started for it."""
    from surfer.apps.demo.oracle import measure_targets

    async def measured(site_url: str, viewport: tuple[int, int], **options):  # type: ignore[no-untyped-def]
        return await measure_targets(site_url, viewport, browser=shared_browser, **options)

    return measured


@pytest.fixture
async def browser_env(shared_browser):
    """Factory for BrowserEnvironments on the shared browser, closed after the test."""
    from surfer.tools.browser import BrowserEnvironment

    made = []

    async def make(url: str | None = None, **options):  # type: ignore[no-untyped-def]
        env = BrowserEnvironment(browser=shared_browser, **options)
        await env.start(url)
        made.append(env)
        return env

    yield make
    for env in made:
        await env.close()


async def crash_page(page) -> None:  # type: ignore[no-untyped-def]
    """Crash a page's renderer from outside, as an out-of-memory kill would
    (chrome://crash is a refused URL, so a page cannot be sent there)."""
    import asyncio

    cdp = await page.context.new_cdp_session(page)
    try:
        await asyncio.wait_for(cdp.send("Page.crash"), 2)
    except Exception:  # noqa: BLE001 - the session dies with the renderer
        pass


@contextmanager
def private_xvfb(width: int, height: int, *more: str) -> Iterator[str]:
    """A private Xvfb of `width` x `height`, its display (":N") yielded, stopped on leaving; `-displayfd` makes
    it pick a free display number and write it once the server is ready to accept connections. `more`: other
    Xvfb arguments (`"-screen", "1", "640x480x24"`: a second X screen, ":N.1")."""
    read_end, write_end = os.pipe()
    server = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_end), "-screen", "0", f"{width}x{height}x24", *more, "-nolisten", "tcp"],
        pass_fds=(write_end,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], 20)
        number = os.read(read_end, 32).decode().strip() if ready else ""
        if not number:
            raise RuntimeError("Xvfb did not report a display within 20 s")
        yield f":{number}"
    finally:
        os.close(read_end)
        server.terminate()
        server.wait(10)


@pytest.fixture(scope="session")
def xvfb() -> Iterator[str]:
    """The session's private Xvfb (private_xvfb), of XVFB_SCREEN."""
    with private_xvfb(*XVFB_SCREEN) as display:
        yield display
