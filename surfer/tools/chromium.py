"""Finding and launching a Chromium for Playwright, closed-network safe."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import weakref
from pathlib import Path

from surfer.core.errors import ChromiumNotLaunched, ConfigError, EnvironmentFailure

TYPE_CHECKING = False  # no typing import: spawn_driver runs before `surfer run` imports the rest
if TYPE_CHECKING:
    from typing import Any

SYSTEM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", "/usr/bin/google-chrome-stable")
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
# The old headless shell (Debian package `chromium-headless-shell`; Playwright's
# default for headless too): the same Blink without the browser UI. Measured
# here: a new context + page costs ~0.1 s of CPU against ~1.1 s with the full
# browser's headless mode, and a screenshot ~35 against ~50 ms — at many
# sessions per machine that is the difference (docs/benchmarks/throughput.md).
HEADLESS_SHELL_CANDIDATES = ("/usr/lib/chromium/chromium-headless-shell", "/usr/bin/chromium-headless-shell")
HEADLESS_SHELL_NAMES = ("chromium-headless-shell", "chrome-headless-shell")

# Without the background-networking flags Chromium keeps trying to reach the
# internet (BENCHMARKS.md).
# --deny-permission-prompts: a page's permission request (location, notifications, clipboard read, camera) is denied
# at once, as the headless shell does; with a window it waited on a prompt drawn outside the page, unseen by the agent.
LAUNCH_ARGS = (
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--no-first-run", "--disable-sync", "--disable-dev-shm-usage", "--disable-quic",
    "--disable-features=Translate,MediaRouter,OptimizationHints", "--deny-permission-prompts",
)

# A browser context held to domain rules sends its traffic through surfer's guard proxy, but WebRTC sends UDP
# (STUN, TURN, peer connections) to any host past every proxy: with these flags it uses no UDP that does not pass
# the proxy. A browser-wide switch (no context option exists), given to a Chromium launched for sessions with
# domain rules; the headless shell reads the first, the full browser the second.
GUARDED_ARGS = (
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp", "--webrtc-ip-handling-policy=disable_non_proxied_udp",
)
_guarded: "weakref.WeakSet[Any]" = weakref.WeakSet()  # browsers launched with GUARDED_ARGS

# Playwright turns on CDPScreenshotNewSurface: every capture draws the page into a new surface. It
# fixes captures that hang on focus-emulated pages in the full browser's headless mode (Playwright
# issue 33330); the headless shell does not need it, and without it a capture costs ~3.5 ms less of
# Chromium's CPU (~22 -> ~19 ms at 1280x800, 32 pages in parallel; docs/benchmarks/throughput.md).
HEADLESS_SHELL_ARGS = ("--disable-features=CDPScreenshotNewSurface",)

INSTALL_HINT = (
    "No Chromium found. On Debian/Ubuntu: `sudo apt-get install -y chromium`; "
    "or point SURFER_CHROMIUM at a Chromium/Chrome executable."
)


NO_DISPLAY = (
    "no display for a browser window: DISPLAY is not set. Start a virtual one with "
    "`Xvfb :99 -screen 0 1280x800x24 & export DISPLAY=:99` (or run surfer under `xvfb-run -a`), or run headless"
)


DRIVER_END_S = 5.0  # how long a stopped start waits for the driver's connection to end


def check_display(headless: bool) -> None:
    """A browser window (not `headless`) needs a display: on Linux without DISPLAY or WAYLAND_DISPLAY,
    ConfigError (exit 2) saying how to get one. Every headful launch, and the commands' checks before
    a run, ask here."""
    if headless or not sys.platform.startswith("linux"):
        return
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise ConfigError(NO_DISPLAY)


def _first_executable(paths: tuple[str, ...], names: tuple[str, ...]) -> str | None:
    for candidate in paths:
        if os.access(candidate, os.X_OK):
            return candidate
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def find_headless_shell() -> str | None:
    """A Chromium headless shell on this machine, or None."""
    return _first_executable(HEADLESS_SHELL_CANDIDATES, HEADLESS_SHELL_NAMES)


def find_chromium(playwright_default: str | None = None, *, headless: bool = False) -> str:
    """The executable to launch: $SURFER_CHROMIUM; for headless runs a
    Chromium headless shell when one is installed; a system Chromium; or
    Playwright's own browser when one is installed."""
    override = os.environ.get("SURFER_CHROMIUM")
    if override:
        path = Path(override)
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise ChromiumNotLaunched(f"SURFER_CHROMIUM={override} is not an executable file. {INSTALL_HINT}")
    if headless:
        shell = find_headless_shell()
        if shell:
            return shell
    found = _first_executable(SYSTEM_CANDIDATES, NAMES)
    if found:
        return found
    if playwright_default and os.access(playwright_default, os.X_OK):
        return playwright_default
    raise ConfigError(INSTALL_HINT)


def launch_args(executable: str, *, legacy: bool = False, guarded: bool = False) -> list[str]:
    """Chromium's flags: LAUNCH_ARGS, and HEADLESS_SHELL_ARGS for a headless shell
    (not for `legacy`: the path before issue 14, `surfer bench throughput --compare-legacy`);
    GUARDED_ARGS for a browser whose sessions have domain rules."""
    shell = Path(executable).name in HEADLESS_SHELL_NAMES
    return [*LAUNCH_ARGS, *(HEADLESS_SHELL_ARGS if shell and not legacy else ()), *(GUARDED_ARGS if guarded else ())]


def is_guarded(browser: Any) -> bool:
    """Whether `browser` was launched here with GUARDED_ARGS (its WebRTC held to the proxy)."""
    try:
        return browser in _guarded
    except TypeError:
        return False


async def launch_chromium(playwright: Any, *, headless: bool = True, legacy: bool = False, guarded: bool = False) -> Any:
    """Launch the Chromium surfer finds, with closed-network-safe flags (`guarded`: for sessions with domain rules)."""
    check_display(headless)
    executable = find_chromium(_playwright_default(playwright), headless=headless)
    try:
        browser = await playwright.chromium.launch(
            executable_path=executable, headless=headless, args=launch_args(executable, legacy=legacy, guarded=guarded),
        )
    except Exception as exc:  # noqa: BLE001 - Playwright raises plain Error here
        why = launch_failure(str(exc))
        if os.environ.get("SURFER_CHROMIUM"):  # the user's own choice is what to fix
            raise ChromiumNotLaunched(
                f"SURFER_CHROMIUM={executable} does not start as Chromium ({why}): point SURFER_CHROMIUM at a "
                "Chromium or Chrome executable, or unset it"
            ) from None
        hint = " (no display? use headless mode, or run under xvfb-run)" if not headless else ""
        raise EnvironmentFailure(f"could not launch Chromium at {executable}{hint}: {why}") from None
    if guarded:
        _guarded.add(browser)
    return browser


def launch_failure(message: str) -> str:
    """What Playwright's error for a browser that did not start says of it, in one line: the program's last
    line on stderr and how it ended ("error while loading shared libraries: ..., it exited with code 127"),
    or the error's first line when its log says neither."""
    import re

    lines = message.splitlines()
    said = [m.group(1).strip() for m in (re.search(r"\]\[err\] (.*)", line) for line in lines) if m and m.group(1).strip()]
    ended = next((m for m in (re.search(r"process did exit: exitCode=(\w+), signal=(\w+)", line) for line in lines) if m), None)
    parts = said[-1:]
    if ended is not None:
        code, signal = ended.groups()
        parts.append(("it exited with code " + code if signal == "null" else "it was ended by " + signal)
                     + ("" if said else " before it answered as a browser"))
    return ", ".join(parts) if parts else (lines[0] if lines else "no reason given")


def use_node_compile_cache() -> None:
    """Let Playwright's driver (Node.js) keep its compiled code between runs:
    the driver then starts in ~0.3 instead of ~0.5 s (measured here). Node
    (>= 22.1) checks the cache against its version and the sources itself.
    A NODE_COMPILE_CACHE already set, or SURFER_NODE_COMPILE_CACHE=0, wins."""
    if "NODE_COMPILE_CACHE" in os.environ or os.environ.get("SURFER_NODE_COMPILE_CACHE") == "0":
        return
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "surfer" / "node-compile-cache"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return  # a read-only home: start without the cache
    os.environ["NODE_COMPILE_CACHE"] = str(folder)


def _playwright_default(playwright: Any) -> str | None:
    try:
        return playwright.chromium.executable_path
    except Exception:  # noqa: BLE001
        return None


async def start_chromium(
    *, headless: bool = True, driver: subprocess.Popen[bytes] | None = None, legacy: bool = False, guarded: bool = False,
) -> tuple[Any, Any]:
    """Start Playwright's driver (or connect to `driver`, from spawn_driver) and
    launch Chromium: (playwright, browser). The caller owns both (close the
    browser, then stop playwright)."""
    import asyncio

    if os.environ.get("SURFER_CHROMIUM"):
        find_chromium(headless=headless)  # one that is not an executable file: said before a driver is spawned for it
    playwright = None
    if driver is None:
        spawning = asyncio.ensure_future(asyncio.to_thread(_spawn_with_api))
        try:
            driver = await asyncio.shield(spawning)
        except asyncio.CancelledError:  # (a run stopped as it starts: the driver it spawns meanwhile is not left behind)
            spawning.add_done_callback(lambda done: done.cancelled() or done.exception() or _kill(done.result()))
            raise
    if driver is not None:
        try:
            playwright = await _connect_driver(driver)
        except Exception:  # noqa: BLE001 - Playwright's internals changed: start a driver as usual
            driver.kill()
        except BaseException:
            _kill(driver)
            raise
    if playwright is None:
        from playwright.async_api import async_playwright

        use_node_compile_cache()
        playwright = await async_playwright().start()
    try:
        return playwright, await launch_chromium(playwright, headless=headless, legacy=legacy, guarded=guarded)
    except BaseException:
        await playwright.stop()
        raise


async def with_playwright(open_with: Any) -> tuple[Any, Any]:
    """(playwright, what `await open_with(playwright)` opens) on a Playwright started for it, stopped
    again when opening fails: a profile's context, a browser attached to."""
    from playwright.async_api import async_playwright

    use_node_compile_cache()
    playwright = await async_playwright().start()
    try:
        return playwright, await open_with(playwright)
    except BaseException:
        await playwright.stop()
        raise


def _spawn_with_api() -> subprocess.Popen[bytes] | None:
    """spawn_driver(), and Playwright's async API imported while the driver boots (~0.3 s of Python): both off
    the event loop, which an application's other tasks share (its first run held them up that long)."""
    driver = spawn_driver()
    try:
        importlib.import_module("playwright.async_api")
    except BaseException:
        _kill(driver)
        raise
    return driver


def _kill(driver: subprocess.Popen[bytes] | None) -> None:
    """A driver nobody will use: ended, and its pipes closed."""
    if driver is not None:
        driver.kill()
        for pipe in (driver.stdin, driver.stdout):
            if pipe is not None:
                pipe.close()
        driver.wait()


def spawn_driver() -> subprocess.Popen[bytes] | None:
    """Playwright's driver (Node.js) started now, without importing Playwright
    (~0.1 s of Python): it boots (~0.2 s) while Python does other work, and
    `start_chromium(driver=...)` connects to it. None where Playwright or its
    bundled Node.js is not found (start_chromium then starts one as usual)."""
    spec = importlib.util.find_spec("playwright")
    if spec is None or not spec.submodule_search_locations:
        return None
    driver = Path(next(iter(spec.submodule_search_locations))) / "driver"
    node, cli = os.environ.get("PLAYWRIGHT_NODEJS_PATH") or str(driver / "node"), driver / "package" / "cli.js"
    if not (os.access(node, os.X_OK) and cli.is_file()):
        return None
    from playwright._repo_version import version  # (light: a constant)

    use_node_compile_cache()
    env = {**os.environ, "PW_LANG_NAME": "python", "PW_CLI_DISPLAY_VERSION": version,
           "PW_LANG_NAME_VERSION": f"{sys.version_info.major}.{sys.version_info.minor}"}  # as playwright's _driver.py
    try:
        # Its own session: a signal to surfer's process group (Ctrl-C at a terminal, GNU `timeout`) is surfer's
        # to handle, and the browser stays up while the run writes its record. When surfer's process ends,
        # however it ends, the driver's stdin closes and the driver closes the browser and exits.
        return subprocess.Popen([node, str(cli), "run-driver"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                start_new_session=True)
    except OSError:
        return None


async def _connect_driver(driver: subprocess.Popen[bytes]) -> Any:
    """The Playwright object over a driver from `spawn_driver`. This uses
    Playwright's internals (its pipe transport and client), which are not API:
    any mismatch raises, and start_chromium starts a driver as usual."""
    import asyncio

    from playwright._impl import out_of_process
    from playwright._impl.transport import PipeTransport
    from playwright.async_api import Playwright
    from playwright.async_api._context_manager import PlaywrightContextManager

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=32768, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), driver.stdout)
    sink, protocol = await loop.connect_write_pipe(lambda: asyncio.streams.FlowControlMixin(loop=loop), driver.stdin)
    writer = asyncio.StreamWriter(sink, protocol, None, loop)

    class Process:  # what the transport uses of an asyncio subprocess
        stdin, stdout = writer, reader

        @staticmethod
        async def communicate() -> tuple[None, None]:
            await asyncio.to_thread(driver.wait)
            return None, None

    # The client's own transport, told to use this driver: its connection starts at the loop's next turn, after
    # this. (No patch of Playwright's module: one, made and undone around the client's making, raced another
    # thread's start — run_sync from threads at once — and left Playwright patched for good.)
    client = out_of_process.PlaywrightClient()
    transport = getattr(client, "_transport", None)
    if type(transport) is not PipeTransport:
        client._playwright.cancel()  # (before it began: it spawns no driver of its own)
        raise TypeError(f"Playwright's client transport is a {type(transport).__name__}")

    async def connect() -> None:
        transport._stopped_future = loop.create_future()
        transport._proc, transport._output = Process, writer  # type: ignore[assignment]

    transport.connect = connect  # type: ignore[method-assign]
    connecting = client._playwright
    try:
        connected = await asyncio.shield(connecting)
    except BaseException:
        # Stopped (or failed) while the connection initialises: the driver ends and its reader, seeing the pipe
        # close, ends the connection's tasks (the connection's close promise: the reader's end). Cancelled instead,
        # they stayed pending for good, and asyncio logged "Task was destroyed but it is pending!" twice when they
        # were collected.
        driver.kill()
        # bounded: a stop must never wait on the driver's pipes (one held open elsewhere would hold it for good)
        await asyncio.wait([connecting, client._close_promise], timeout=DRIVER_END_S)
        if connecting.done() and not connecting.cancelled():
            connecting.exception()  # (retrieved: it is the stop's or the failure's, raised below)
        sink.close()
        raise
    manager = PlaywrightContextManager()
    manager._client = client
    playwright = Playwright(connected)
    playwright.stop = manager.__aexit__  # type: ignore[method-assign]
    return playwright
