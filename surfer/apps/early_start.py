"""`surfer run` starts its browser at process start.

Before the CLI is imported (typer, pydantic, the agent: ~0.3 s of Python),
`begin` looks at the command line; for a browser run it starts an event loop
in a thread of its own and, on it, Playwright's driver (Node.js, ~0.2 s) and
Chromium (~0.1 s): they boot on the other core while Python imports. The run
then executes on that loop (`run`, used by signals.run_interruptible) and its
BrowserEnvironment takes the launch (surfer/tools/early_browser.py). Anything
else — `--help`, another command, `--env desktop` — starts nothing.

Only the standard library and surfer's light modules load here."""

from __future__ import annotations

from surfer.tools.chromium import spawn_driver

TYPE_CHECKING = False  # no typing import before the driver is spawned
if TYPE_CHECKING:
    import concurrent.futures
    from collections.abc import Coroutine
    from typing import Any, TypeVar

    T = TypeVar("T")


SHUTDOWN_TIMEOUT_S = 15.0
# A run in a persistent profile or in a browser surfer did not launch starts no Chromium of its own.
ELSEWHERE = ("--user-data-dir", "--cdp-url", "--browser-ws")

_current: EarlyLoop | None = None


class EarlyLoop:
    """An event loop running in its own thread, with a browser launch begun on it."""

    def __init__(self, *, headless: bool, driver: Any = None, guarded: bool = False) -> None:
        import asyncio  # (here: the driver is spawned before this ~30 ms import)
        import threading

        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="surfer-run-loop", daemon=True)
        self._thread.start()
        self.browser: Any = asyncio.run_coroutine_threadsafe(self._launch(headless, driver, guarded), self.loop)

    def _serve(self) -> None:
        import asyncio

        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            try:
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                self.loop.run_until_complete(self.loop.shutdown_default_executor())
            finally:
                self.loop.close()

    @staticmethod
    async def _launch(headless: bool, driver: Any, guarded: bool) -> Any:
        from surfer.tools.early_browser import EarlyBrowser

        return EarlyBrowser(headless=headless, driver=driver, guarded=guarded)

    def early_browser(self) -> Any:
        """The EarlyBrowser (its launch may still be under way); None if it could
        not even be made (the run then launches its own browser as usual)."""
        try:
            return self.browser.result(SHUTDOWN_TIMEOUT_S)
        except Exception:  # noqa: BLE001
            return None

    def submit(self, main: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        import asyncio

        return asyncio.run_coroutine_threadsafe(main, self.loop)

    def close(self) -> None:
        """Close an untaken launch, cancel what is left on the loop, stop the thread."""
        import asyncio

        async def shutdown() -> None:
            early = self.early_browser()
            if early is not None:
                await early.discard()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        if self.loop.is_closed():
            return
        try:
            self.submit(shutdown()).result(SHUTDOWN_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - leaving anyway; the driver exits with its pipe
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(SHUTDOWN_TIMEOUT_S)


def wants_early_browser(args: list[str]) -> bool | None:
    """For `surfer run ...` in the browser: whether headless (True) or not (False);
    None for anything that opens no browser of its own."""
    if not args or args[0] != "run" or any(a in ("--help", "-h") for a in args):
        return None
    for index, arg in enumerate(args):
        value = arg.split("=", 1)[1] if "=" in arg else (args[index + 1] if index + 1 < len(args) else "")
        if arg.startswith("--env") and value != "browser":
            return None
        if arg.startswith(("--replay", *ELSEWHERE)):
            return None
    return "--headful" not in args


def begin(args: list[str]) -> None:
    """Start the early loop and browser when `args` (sys.argv[1:]) is a browser run."""
    global _current
    headless = wants_early_browser(args)
    if headless is not None and _current is None:
        # (domain rules from a configuration file: the run launches its own browser with GUARDED_ARGS instead)
        guarded = any(a.startswith(("--allow-domain", "--block-domain")) for a in args)
        _current = EarlyLoop(headless=headless, driver=spawn_driver(), guarded=guarded)


def current() -> EarlyLoop | None:
    return _current


def end() -> None:
    global _current
    if _current is not None:
        _current.close()
        _current = None
