"""A real Chromium driven through Playwright's async API.

One `BrowserEnvironment` is one isolated browser context (its own cookies and
tabs). It launches its own browser, or shares one passed in (`browser=`) so
many sessions run in one Chromium process. It may also start signed in: a
storage state loaded into its context (state.py), a persistent profile
(`user_data_dir`, profile.py), or a browser surfer did not launch (`cdp_url`,
`browser_ws`, remote.py), where it opens its own tab and leaves the rest.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Optional

from surfer.core.errors import BrowserCrashed, ConfigError, EnvironmentFailure
from surfer.core.observation import screenshot_too_large
from surfer.tools.browser.tracing import ContextTrace
from surfer.tools import dialogs
from surfer.tools.base import Environment
from surfer.tools.browser.actions import BrowserActions, normalize_url  # noqa: F401  (normalize_url: also imported from here)
from surfer.tools.browser.capture import BrowserCapture
from surfer.tools.browser.liveness import Liveness
from surfer.tools.browser.own_tabs import OwnTabs, page_script
from surfer.tools.browser.tabs import PageTabs
from surfer.tools.chromium import start_chromium
from surfer.tools.dialogs import PendingDialog
from surfer.tools.settle import MUTATION_TRACKER, BrowserReport, NetworkTracker, SettleConfig
from surfer.tools.transfers import DEFAULT_MAX_DOWNLOAD_BYTES, DEFAULT_MAX_DOWNLOADS, Downloads, UploadFiles
from surfer.tools.url_policy import UrlPolicy, check_start_url
from surfer.tools.widgets import widgets_script

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 10.0  # closing a context or browser that stopped answering must not hang the caller
STATE_TIMEOUT_S = 30.0  # reading a context's storage state (it may visit origins no tab shows)
CRASH_SIGNS = ("target crashed", "browser has been closed", "browser has disconnected")  # Playwright's words for a dead browser


class BrowserEnvironment(BrowserCapture, BrowserActions, PageTabs, OwnTabs, Liveness, Environment):
    """A browser the agent works in: one isolated context (its own cookies and tabs) in a Chromium it
    launches, or in `browser=`, a Playwright `Browser` of the async API you launched (many environments,
    one Chromium process); `close()` closes its context, and a Chromium it launched, never yours.

        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch()
            agent = Agent(environment=BrowserEnvironment(browser=browser), ...)

    An agent given an environment starts it at each run (opening the run's URL), keeps it open after
    the run, and runs one task at a time in it; close it yourself (`await env.close()`).
    `headless`, `viewport` (CSS pixels) and `device_scale_factor` shape the screen; `allowed_domains` /
    `blocked_domains`, `upload_files`, `storage_state`, `user_data_dir`, `cdp_url` / `browser_ws` are
    the settings of the same names (docs: browser, safety, signed-in)."""

    kind = "browser"

    def __init__(
        self,
        *,
        headless: bool = True,
        viewport: tuple[int, int] = (1280, 800),
        device_scale_factor: float = 1.0,
        settle: SettleConfig | None = None,
        screenshot_format: str = "jpeg",
        jpeg_quality: int = 85,
        navigation_timeout: float = 30.0,
        browser: Any = None,
        clip: tuple[float, float, float, float] | None = None,
        upload_files: Iterable[str | Path] = (),
        downloads_dir: str | Path | None = None,
        max_download_bytes: int = DEFAULT_MAX_DOWNLOAD_BYTES,
        max_downloads: int = DEFAULT_MAX_DOWNLOADS,
        allow_file_urls: bool = False,
        allowed_domains: tuple[str, ...] | list[str] = (),
        blocked_domains: tuple[str, ...] | list[str] = (),
        legacy_step: bool = False,
        early: Any = None,
        trace: str = "off",
        storage_state: str | Path | dict[str, Any] | None = None,
        save_storage_state: str | Path | None = None,
        save_state_on_failure: bool = False,
        keep_storage_state: bool = False,
        user_data_dir: str | Path | None = None,
        cdp_url: str | None = None,
        browser_ws: str | None = None,
        ignore_https_errors: bool = False,
    ) -> None:
        if viewport[0] <= 0 or viewport[1] <= 0:
            raise ConfigError(f"viewport must be positive, got {viewport[0]}x{viewport[1]}")
        if device_scale_factor <= 0:
            raise ConfigError("device scale factor must be positive")
        if too_large := screenshot_too_large(viewport, device_scale_factor):
            raise ConfigError(too_large)
        if screenshot_format not in ("jpeg", "png"):
            raise ConfigError("screenshot format must be 'jpeg' or 'png'")
        try:
            self.trace = ContextTrace(trace)  # `--trace`: Playwright's trace of each run (tracing.py)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if browser is not None and not inspect.iscoroutinefunction(getattr(browser, "new_context", None)):
            kind = type(browser)
            raise ConfigError(f"browser= takes a Playwright Browser of the async API (playwright.async_api), "
                              f"not a {kind.__module__}.{kind.__qualname__}")
        if sum(bool(x) for x in (user_data_dir, cdp_url, browser_ws)) > 1:
            raise ConfigError("choose one of a persistent profile (user_data_dir), cdp_url and browser_ws")
        if user_data_dir and storage_state is not None:
            raise ConfigError("a persistent profile keeps its own state: give user_data_dir or storage_state, not both")
        # Where the session starts signed in: a state loaded into its context, a profile, a browser elsewhere.
        self.storage_state = storage_state
        self.save_storage_state = Path(save_storage_state).expanduser() if save_storage_state else None
        self.save_state_on_failure = save_state_on_failure
        self.keep_storage_state = keep_storage_state or storage_state is not None or save_storage_state is not None
        self.user_data_dir = user_data_dir
        self.cdp_url, self.browser_ws = cdp_url, browser_ws
        # Over CDP without a state of its own, the run is a tab in the browser's own context: the user's logins.
        self.borrows_context = bool(cdp_url) and storage_state is None
        self._own_pages: list[Any] = []  # the tabs this session opened in a context that is not its own
        self.headless = headless
        self.viewport = viewport
        self.device_scale_factor = device_scale_factor
        self.settle_config = settle or SettleConfig()
        self.screenshot_format = screenshot_format
        self.jpeg_quality = jpeg_quality
        # The step path before issue 14 (Playwright's screenshot, key-by-key typing everywhere), kept so
        # `surfer bench throughput --compare-legacy` can measure both side by side in one run.
        self.legacy_step = legacy_step
        self.navigation_timeout = navigation_timeout
        # Asked right before a `type` sends its keys, with the origin of the frame that has the focus then: a
        # reason not to type (a secret bound to another site: the page moved the focus after the click), or None.
        self.keys_guard: Optional[Callable[[Optional[str], list[str]], Optional[str]]] = None
        # Set for a `type` of a secret: the field that took it draws dots, as a password field does (screenshots are
        # pixels, sent to the model server and recorded).
        self.hide_typed = False
        self._shared_browser = browser
        # An EarlyBrowser (surfer/tools/early_browser.py): a launch begun at process start, taken when it fits.
        self.ignore_https_errors = ignore_https_errors  # (a context option: a test server's self-signed certificate)
        self._early = early
        self._early_taken = False
        # Capture only this CSS rectangle (x, y, width, height); points map back through the origin.
        self.clip = clip
        self.url_policy = UrlPolicy(
            allow_file_urls=allow_file_urls, allowed_domains=allowed_domains, blocked_domains=blocked_domains,
        )
        self._proxy: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the event loop its Playwright objects belong to
        self._playwright: Any = None
        self._browser: Any = None
        self._context: Any = None
        self._page: Any = None
        self._tracker = NetworkTracker()
        self._navigations = 0
        self._crashed: str | None = None
        self._browser_gone = False
        self._died: asyncio.Event | None = None  # set when the browser or the current page dies
        self._hooked: set[int] = set()
        # Files the agent may hand to a page's file chooser; downloads go to `downloads_dir`, else <run dir>/downloads.
        self.uploads = UploadFiles(upload_files)
        self.downloads_dir = Path(downloads_dir) if downloads_dir else None
        self._downloads = Downloads(
            self._downloads_folder, max_bytes=max_download_bytes, max_count=max_downloads, approve=self._approve_download,
        )
        self._uploading = False
        self._chooser_report = BrowserReport()  # when the browser last reported a file chooser
        self._tab_report = BrowserReport()  # when the browser last reported a new tab
        # A JavaScript dialog freezes the page until answered (surfer/tools/dialogs.py).
        self._dialog: PendingDialog | None = None
        self._dialog_layout: dialogs.DialogLayout | None = None
        self._dialog_opened: asyncio.Event | None = None
        self._last_capture: tuple[bytes, str] | None = None
        self._area_shared: Any = None
        self._settled_title: tuple[Any, int, str] | None = None  # (page, navigations, title) the last settle saw
        self._asked_to_print = False  # the last settle wait saw the page call window.print()
        self._vanished: list[str] = []  # texts the last settle wait saw shown and then hidden (a toast)
        self._notices: list[str] = []
        # What the agent must know about the start before its first action (a start URL that is a file), shown with
        # every observation until then.
        self._start_notices: list[str] = []
        self._gone_listener: Any = None
        self._activated_at: float | None = None  # (monotonic) when the last action gave the page a user activation
        self._tabs_opened = 0  # tabs the page opened since then
        self._opening_tab = 0  # surfer's own new_page() calls under way (those tabs are not the page's popups)
        self.person_turn = False  # a person has the controls (surfer/tools/browser/person.py): their tabs are theirs

    # -- lifecycle ---------------------------------------------------------

    async def start(self, url: str | None = None) -> None:
        loop = asyncio.get_running_loop()
        if self._context is not None and self._loop is not loop:
            raise ConfigError(
                "this BrowserEnvironment's browser was opened in another event loop (an earlier run_sync() or "
                "asyncio.run(), or another thread's), and Playwright's objects work only in theirs: run its tasks in one "
                "event loop (await agent.run(...) inside one asyncio.run), or agent.session_sync(...) for tasks one "
                "after another in one browser; to set the browser up, Agent(browser={...}) opens one for each run")
        if self._dialog_opened is None:
            self._dialog_opened = asyncio.Event()
            self._died = asyncio.Event()
        if self._context is None:
            self._loop = loop
            self._gone_listener = lambda *_: self._on_browser_gone()
            if self.user_data_dir:
                pass  # the profile's context is the browser: launched with its options (_open_context)
            elif self._shared_browser is not None:
                self._browser = self._shared_browser
            elif self.attached:
                from .remote import connect_remote

                self._playwright, self._browser = await connect_remote(cdp_url=self.cdp_url, browser_ws=self.browser_ws)
            else:
                self._playwright, self._browser = await self._launch()
            if self._browser is not None:
                self._browser.on("disconnected", self._gone_listener)
                if not self._browser.is_connected():
                    self._on_browser_gone()
            await self._guard(self._open_context())
        if url:
            check_start_url(url, self.url_policy)
            mark = await self.mark()  # before the load: timers the page starts as it loads (a redirect in 300 ms) are waited for
            opened = await self._guard(self._run_action(lambda _: self._goto(url), None))
            await self._guard(self.settle(mark))
            arrived = self._downloads.take_new()  # (with no action to report them: told with the first look)
            if opened is False:
                self._start_notices.append(f"the start URL {url} is a file, not a page: it downloads (the tab is blank)")
            elif isinstance(opened, str):
                self._start_notices.append(opened)
            self._start_notices += [record.describe() for record in arrived]

    async def _launch(self) -> tuple[Any, Any]:
        """(playwright, browser) of this session's own: the early launch when it
        fits and succeeded, else a new one (whose error, if any, is the one reported)."""
        guarded = self.url_policy.has_domain_rules  # (its WebRTC held to the guard proxy: chromium.GUARDED_ARGS)
        launch = self._early.take(headless=self.headless, guarded=guarded) if self._early is not None else None
        if launch is not None:
            try:
                launched = await launch
            except Exception:  # noqa: BLE001 - launched again below, which reports the error
                pass
            else:
                self._early_taken = True
                return launched
        return await start_chromium(headless=self.headless, guarded=guarded)

    @property
    def attached(self) -> bool:
        """Whether the browser is one surfer did not launch (over CDP, or a Playwright server)."""
        return bool(self.cdp_url or self.browser_ws)

    async def _context_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.url_policy.has_domain_rules and not self.attached:
            # Every request of the context, loopback included, passes the domain check.
            from surfer.tools.guard_proxy import GuardProxy

            from surfer.tools.chromium import is_guarded

            if self._browser is not None and not is_guarded(self._browser):
                log.warning("this browser was not launched for domain rules: its WebRTC can reach hosts they refuse "
                            "(launch it with the flags in surfer.tools.chromium.GUARDED_ARGS)")
            self._proxy = await GuardProxy(self.url_policy.host_refusal, self.url_policy.on_refused_request).start()
            options = {"proxy": {"server": self._proxy.url, "bypass": "<-loopback>"}, "service_workers": "block"}
        elif self.url_policy.has_domain_rules:
            options = {"service_workers": "block"}  # (a worker's requests would pass no route)
            self.url_policy.routed = True
        if self.ignore_https_errors:
            options["ignore_https_errors"] = True
        if isinstance(self.storage_state, (str, Path)):
            from .state import loose_permissions, read_storage_state

            warning = await asyncio.to_thread(loose_permissions, self.storage_state)
            if warning:
                log.warning(warning)
            options["storage_state"] = await asyncio.to_thread(read_storage_state, self.storage_state)
        elif self.storage_state is not None:
            options["storage_state"] = self.storage_state
        if "storage_state" in options:
            from .state import secret_values

            self.trace.hidden = secret_values(options["storage_state"])
        return options

    async def _open_context(self) -> None:
        options = await self._context_options()
        size = {"width": self.viewport[0], "height": self.viewport[1]}
        page = None
        if self.user_data_dir:
            from .profile import launch_profile

            self._playwright, self._context = await launch_profile(
                self.user_data_dir, headless=self.headless, options={"viewport": size, "device_scale_factor": self.device_scale_factor, **options},
            )
            self._context.on("close", self._gone_listener)
            page = self._context.pages[0] if self._context.pages else None
        elif self.borrows_context:  # the browser's own context (the user's logins): a tab of surfer's in it
            self._context = self._browser.contexts[0] if self._browser.contexts else await self._browser.new_context(**options)
            page = await self._new_tab()
        else:
            early = self._early.take_page(viewport=self.viewport, scale=self.device_scale_factor, plain=not options) if self._early_taken else None
            if early is not None:
                try:
                    self._context, page = await early
                except Exception:  # noqa: BLE001 - opened again below, which reports the error
                    pass
            if page is None:
                self._context = await self._browser.new_context(viewport=size, device_scale_factor=self.device_scale_factor, **options)
        if not self.borrows_context:  # (a borrowed context's tabs get all this one by one: own_tabs.py)
            self._context.set_default_navigation_timeout(self.navigation_timeout * 1000)
            if self.legacy_step:
                await self._context.add_init_script(MUTATION_TRACKER)
                await self._context.add_init_script(widgets_script())
            else:
                await self._context.add_init_script(page_script())
            if self.attached and self.url_policy.has_domain_rules:
                from .remote import RouteGuard

                await RouteGuard(self.url_policy.refusal, self.url_policy.on_refused_request).install(self._context)
            self._tracker.attach(self._context)
            self._context.on("page", self._on_new_page)
        await self.trace.attach(self._context, shared=self.borrows_context)
        self._use(page or await self._open_own_tab())

    async def capture_storage_state(self) -> dict[str, Any] | None:
        """The context's storage state now (cookies, localStorage per origin); None when the browser is gone."""
        if self._context is None or self._browser_gone:
            return None
        try:
            return await asyncio.wait_for(self._context.storage_state(), STATE_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a context closing under the call
            log.warning("the browser's storage state could not be read: %s", str(exc).splitlines()[0] if str(exc) else repr(exc))
            return None

    async def _end_state(self, status: str) -> None:
        """At a run's end: the state kept for the result, and written to `save_storage_state` when asked."""
        self.kept_state = None
        save = self.save_storage_state is not None and (status == "success" or self.save_state_on_failure)
        if not (save or self.keep_storage_state):
            return
        state = await self.capture_storage_state()
        if state is None:
            return
        self.kept_state = state
        from .state import secret_values

        self.trace.hidden = sorted({*self.trace.hidden, *secret_values(state)})  # the next run's trace hides these too
        if save:
            from .state import write_storage_state

            try:
                await asyncio.to_thread(write_storage_state, state, self.save_storage_state)
            except OSError as exc:
                log.warning("the storage state could not be saved to %s: %s", self.save_storage_state, exc)

    async def _guard(self, awaitable: Awaitable[Any]) -> Any:
        """Await a call into the browser; when Chromium or the page dies under it
        (a killed browser never answers), raise BrowserCrashed at once instead."""
        try:
            self._check_alive()
        except BrowserCrashed:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()  # never to run: say so, or Python warns that it was never awaited
            raise
        if self._died is None:
            return await awaitable
        task = asyncio.ensure_future(awaitable)
        waiter = asyncio.ensure_future(self._died.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            waiter.cancel()
        if not task.done():
            task.cancel()
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            self._check_alive()
        try:
            return task.result()
        except BrowserCrashed:
            raise
        except Exception as exc:
            self._check_alive()  # a Playwright error because the browser died is a crash, not the step's error
            first = str(exc).splitlines()[0] if str(exc) else repr(exc)
            if any(sign in first.lower() for sign in CRASH_SIGNS):  # before the disconnect event arrives
                raise BrowserCrashed(self._gone_reason() if self.attached else f"the browser crashed ({first})") from None
            raise

    async def close(self) -> None:
        await self._downloads.cancel()
        try:
            if self._context is not None and not self._browser_gone:
                if self.borrows_context:  # the user's context: only surfer's own tabs close
                    for page in self._own_pages:
                        await asyncio.wait_for(page.close(), CLOSE_TIMEOUT_S)
                else:
                    await asyncio.wait_for(self._context.close(), CLOSE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - closing a crashed context can fail (or hang); nothing to save
            pass
        finally:
            self._context = self._page = None
            self._own_pages = []
            if self._browser is not None and self._gone_listener is not None:
                # a shared browser outlives its sessions: its listener must not keep this one alive
                self._browser.remove_listener("disconnected", self._gone_listener)
                self._gone_listener = None
            # a browser surfer did not launch goes on: stopping Playwright below only disconnects from it
            if self._shared_browser is None and self._browser is not None and not self.attached:
                try:
                    await asyncio.wait_for(self._browser.close(), CLOSE_TIMEOUT_S)
                except Exception:  # noqa: BLE001
                    pass
            self._browser = None
            if self._playwright is not None:
                await self._playwright.stop()
                self._playwright = None
            if self._proxy is not None:
                await self._proxy.close()
                self._proxy = None

    @property
    def context(self) -> Any:
        """The Playwright BrowserContext (cookies, routes, storage) of this session."""
        if self._context is None:
            raise EnvironmentFailure("the browser is not started")
        return self._context

    async def element_at(self, point: Any) -> Any:
        if self._page is None:
            return None
        from ..element_facts import element_at

        return await element_at(self._page, point.x, point.y)

    async def focused_element(self) -> Any:
        if self._page is None:
            return None
        from ..element_facts import focused_element

        return await focused_element(self._page)

    def hand_over_refusal(self) -> str | None:
        if self.headless and not self.attached:
            return "a person cannot take over a headless browser: run with --headful, or attach a browser with --cdp-url"
        return None

    def watch_person(self) -> Any:
        from surfer.tools.browser.person import BrowserPersonWatch

        return BrowserPersonWatch(self)

    @property
    def page(self) -> Any:
        if self._page is None:
            raise EnvironmentFailure("the browser is not started")
        return self._page

    def _use(self, page: Any) -> None:
        self._page = page
        if id(page) not in self._hooked:
            self._hooked.add(id(page))
            page.on("crash", lambda *_: self._on_crash(page))
            page.on("framenavigated", lambda frame: self._on_navigated(page, frame))
            page.on("dialog", lambda dialog: self._on_dialog(page, dialog))
            page.on("filechooser", self._on_file_chooser)
            page.on("download", self._downloads.on_download)
            self.url_policy.watch(page)

    def _on_navigated(self, page: Any, frame: Any) -> None:
        if page is self._page and frame == page.main_frame:
            self._navigations += 1
