"""Which Chromium surfer launches: $SURFER_CHROMIUM, else the headless shell
for headless runs, else a full Chromium; and the full one still works."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from surfer.core.errors import ChromiumNotLaunched, ConfigError
from surfer.tools import chromium


def _fake(path: Path) -> str:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def fakes(tmp_path, monkeypatch):
    shell, full = _fake(tmp_path / "chromium-headless-shell"), _fake(tmp_path / "chromium")
    monkeypatch.delenv("SURFER_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.setattr(chromium, "HEADLESS_SHELL_CANDIDATES", (shell,))
    monkeypatch.setattr(chromium, "SYSTEM_CANDIDATES", (full,))
    return shell, full


def test_headless_runs_prefer_the_headless_shell(fakes):
    shell, full = fakes
    assert chromium.find_chromium(headless=True) == shell
    assert chromium.find_chromium(headless=False) == full  # a window needs the full browser


def test_without_a_shell_headless_runs_use_the_full_browser(fakes, monkeypatch):
    _, full = fakes
    monkeypatch.setattr(chromium, "HEADLESS_SHELL_CANDIDATES", ())
    assert chromium.find_headless_shell() is None
    assert chromium.find_chromium(headless=True) == full


def test_override_wins_and_a_bad_one_is_refused(fakes, tmp_path, monkeypatch):
    _, full = fakes
    monkeypatch.setenv("SURFER_CHROMIUM", full)
    assert chromium.find_chromium(headless=True) == full
    monkeypatch.setenv("SURFER_CHROMIUM", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="SURFER_CHROMIUM=.*missing is not an executable"):
        chromium.find_chromium(headless=True)


def test_names_on_path_and_nothing_found(tmp_path, monkeypatch):
    monkeypatch.delenv("SURFER_CHROMIUM", raising=False)
    monkeypatch.setattr(chromium, "HEADLESS_SHELL_CANDIDATES", ())
    monkeypatch.setattr(chromium, "SYSTEM_CANDIDATES", ())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(ConfigError, match="apt-get install -y chromium"):
        chromium.find_chromium(headless=True)
    shell = _fake(bin_dir / "chrome-headless-shell")
    assert chromium.find_chromium(headless=True) == shell


FULL = shutil.which("chromium") or "/usr/bin/chromium"


def _children() -> dict[int, str]:
    import psutil

    found = {}
    for proc in psutil.Process().children(recursive=True):
        try:
            found[proc.pid] = proc.cmdline()[0]
        except (psutil.Error, IndexError):
            continue
    return found


def _launched_since(before: dict[int, str]) -> set[str]:
    """Executables of the processes started since `before` (other tests' shared browser excluded)."""
    return {path for pid, path in _children().items() if pid not in before}


@pytest.mark.skipif(not os.access(FULL, os.X_OK), reason="no full Chromium installed")
async def test_the_full_browser_still_runs_a_session(pages, monkeypatch):
    from surfer.tools.browser import BrowserEnvironment

    monkeypatch.setenv("SURFER_CHROMIUM", FULL)
    assert chromium.find_chromium(headless=True) == FULL
    env = BrowserEnvironment()
    before = _children()
    try:
        await env.start(pages.url("settle.html"))
        observation = await env.observe()
        assert observation.screenshot.size.width == 1280 and observation.title == "Settle"
        launched = _launched_since(before)
        assert "/usr/lib/chromium/chromium" in launched or any(p.endswith("chromium") for p in launched), launched
        assert not any("headless-shell" in path for path in launched), launched
    finally:
        await env.close()


@pytest.mark.skipif(not os.access(FULL, os.X_OK), reason="no full Chromium installed")
async def test_headful_runs_open_a_window_with_the_full_browser(pages, xvfb, monkeypatch):
    from surfer.core.actions import Click, CssPoint
    from surfer.tools.browser import BrowserEnvironment

    monkeypatch.delenv("SURFER_CHROMIUM", raising=False)
    monkeypatch.setenv("DISPLAY", xvfb)
    env = BrowserEnvironment(headless=False, viewport=(800, 600))
    before = _children()
    try:
        await env.start(pages.url("settle.html"))
        outcome = await env.perform(Click(target="late", point=CssPoint(x=95, y=40)))
        assert outcome.settle_reason.endswith("quiet") and await env.page.text_content("#out") == "late done"
        assert (await env.observe()).screenshot.size.width == 800
        launched = _launched_since(before)
        assert launched and not any("headless-shell" in path for path in launched), launched
        assert "HeadlessChrome" not in await env.page.evaluate("navigator.userAgent")  # a real window
    finally:
        await env.close()


def test_the_headless_shell_captures_without_a_new_surface_each_time(fakes) -> None:
    shell, full = fakes
    assert "--disable-features=CDPScreenshotNewSurface" in chromium.launch_args(shell)
    assert "--disable-features=CDPScreenshotNewSurface" not in chromium.launch_args(full)  # the full browser needs it
    assert chromium.launch_args(shell, legacy=True) == list(chromium.LAUNCH_ARGS)


async def test_parallel_captures_show_the_change_just_made(browser_env, pages) -> None:
    """Without a new surface per capture, a screenshot still shows what the page drew just
    before it, with many pages capturing at once (the headless shell, as the tests launch it)."""
    import asyncio
    import io

    from PIL import Image

    envs = await asyncio.gather(*(browser_env(pages.url("settle.html")) for _ in range(6)))
    for round_, colour in enumerate(((255, 0, 0), (0, 0, 255))):
        await asyncio.gather(*(e.page.evaluate(f"document.body.style.background = 'rgb{colour}'") for e in envs))
        shots = await asyncio.gather(*(e.page.screenshot(type="png", caret="initial") for e in envs))
        for shot in shots:
            assert Image.open(io.BytesIO(shot)).convert("RGB").getpixel((3, 797)) == colour, round_


async def test_a_start_stopped_while_its_driver_spawns_leaves_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """`asyncio.timeout()` around a run, shorter than the browser's start: the driver spawned in a thread
    meanwhile was left running (one Node.js process more each time, for as long as the program ran)."""
    import asyncio
    import sys
    import threading

    import playwright
    import psutil

    # Playwright's API is imported there too, off the event loop an application shares (it held the loop ~0.3 s)
    importing: list[bool] = []

    class Spy:
        def find_spec(self, name: str, *_: object) -> None:
            if name == "playwright.async_api":
                importing.append(threading.current_thread() is threading.main_thread())

    if "playwright.async_api" in sys.modules:  # (an earlier test's import: imported again here, then put back)
        monkeypatch.setattr(playwright, "async_api", sys.modules["playwright.async_api"])
        monkeypatch.delitem(sys.modules, "playwright.async_api")
    monkeypatch.setattr(sys, "meta_path", [Spy(), *sys.meta_path])
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    starting = asyncio.ensure_future(chromium.start_chromium())
    await asyncio.sleep(0)  # in the spawning thread now
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    deadline = asyncio.get_running_loop().time() + 3
    while ((left := {p.pid for p in me.children(recursive=True)} - before) or not importing) and (
            asyncio.get_running_loop().time() < deadline):  # (until the spawning thread has done its work)
        await asyncio.sleep(0.05)
    assert not left and importing == [False]

    # stopped while Playwright's connection to the driver initialises: its reader and its start were left pending
    # for good, and asyncio logged "Task was destroyed but it is pending!" twice when they were collected
    import subprocess

    mute = subprocess.Popen(["sleep", "60"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # a driver that never answers
    others = asyncio.all_tasks()
    starting = asyncio.ensure_future(chromium.start_chromium(driver=mute))
    while len(connection := asyncio.all_tasks() - others - {starting}) < 3:
        await asyncio.sleep(0)  # its start, reader and initialisation (held: a task collected leaves all_tasks)
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert mute.returncode is not None and all(task.done() for task in connection | asyncio.all_tasks() - others)



async def test_a_surfer_chromium_that_is_no_browser_is_a_usage_error_naming_it(shared_browser, tmp_path, monkeypatch):
    """A SURFER_CHROMIUM that runs and exits (not a browser, one missing its libraries) ended the run as an
    environment error (exit 1) saying only "Target page, context or browser has been closed"."""
    from types import SimpleNamespace

    broken = tmp_path / "chromium"
    broken.write_text("#!/bin/sh\necho 'error while loading shared libraries: libnss3.so' >&2\nexit 127\n")
    broken.chmod(0o755)
    monkeypatch.setenv("SURFER_CHROMIUM", str(broken))
    with pytest.raises(ChromiumNotLaunched) as refused:  # (a ConfigError: exit 2, and the run leaves no directory)
        await chromium.launch_chromium(SimpleNamespace(chromium=shared_browser.browser_type))
    assert str(refused.value) == (f"SURFER_CHROMIUM={broken} does not start as Chromium (error while loading shared libraries: "
                                  "libnss3.so, it exited with code 127): point SURFER_CHROMIUM at a Chromium or Chrome executable, or unset it")


def test_a_run_whose_surfer_chromium_is_no_executable_leaves_no_run_directory(pages, tmp_path, monkeypatch):
    """It left a run directory of 0 steps; `surfer run` refuses it before the run (exit 2), as the SDK's run does
    before a driver is spawned for it."""
    from surfer import Agent, ScriptedModel
    from surfer.agent.config import AgentConfig
    from surfer.agent.environments import check_browser_start

    monkeypatch.setenv("SURFER_CHROMIUM", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="SURFER_CHROMIUM=.*missing is not an executable"):
        check_browser_start(AgentConfig())
    result = Agent(backend=ScriptedModel(), max_steps=1).run_sync("x", url=pages.url("index.html"), out_dir=tmp_path / "run")
    assert (result.status, result.error_kind, result.run_dir) == ("error", "config", None), result
    assert "missing is not an executable file" in result.reason and not (tmp_path / "run").exists()
async def test_a_start_changes_nothing_of_playwrights_that_another_thread_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    """`run_sync` from several threads at once (an app's worker threads): each start swapped Playwright's
    transport class in its module around making its client, so a start in another thread meanwhile — or the
    application's own Playwright — got that class, bound to this start's driver and event loop
    (TargetClosedError: the run ended `error`), and one swap undone over another left it swapped for good."""
    import asyncio
    import subprocess

    from playwright._impl import out_of_process
    from playwright._impl.transport import PipeTransport

    seen: list[type] = []
    made = out_of_process.Connection

    def connection(*args: object, **kwargs: object) -> object:  # made while the client is: what a thread sees then
        seen.append(out_of_process.PipeTransport)
        return made(*args, **kwargs)

    monkeypatch.setattr(out_of_process, "Connection", connection)
    mute = subprocess.Popen(["sleep", "60"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # a driver that never answers
    starting = asyncio.ensure_future(chromium.start_chromium(driver=mute))
    while not seen:
        await asyncio.sleep(0)
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert seen == [PipeTransport] and out_of_process.PipeTransport is PipeTransport
