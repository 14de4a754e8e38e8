"""A real Chromium driven through Playwright's async API.

One `BrowserEnvironment` is one isolated browser context (its own cookies and
tabs). It launches its own browser, or shares one passed in (`browser=`) so
many sessions run in one Chromium process.
"""

from __future__ import annotations

import io
import time
from urllib.parse import urljoin
from typing import Any

from surfer.core.actions import Click, CloseTab, Drag, Goto, Hover, PressKeys, Scroll, SwitchTab, TypeText
from surfer.core.coordinates import Size
from surfer.core.errors import ActionFailed, ConfigError, EnvironmentFailure, SurferError
from surfer.core.observation import Observation, Screenshot

from .base import ActionOutcome, Environment
from .chromium import LAUNCH_ARGS, find_chromium
from .settle import MUTATION_TRACKER, Mark, NetworkTracker, SettleConfig, settle_page
from .url_policy import UrlPolicy, check_start_url

WHEEL_NOTCH_PX = 100


def _image_size(data: bytes) -> Size:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:  # reads the header only
        return Size(*image.size)


def normalize_url(url: str, current: str = "") -> str:
    """Absolute URL for `url`: relative paths resolve against `current`, a bare
    host gets https://."""
    url = url.strip()
    if url.startswith(("/", "./", "../", "?", "#")) and current.startswith(("http://", "https://", "file:")):
        return urljoin(current, url)
    if "://" not in url and not url.startswith(("about:", "data:", "file:", "chrome:")):
        url = "https://" + url
    return url


async def launch_chromium(playwright: Any, *, headless: bool = True) -> Any:
    """Launch the Chromium surfer finds, with closed-network-safe flags."""
    executable = find_chromium(_playwright_default(playwright), headless=headless)
    try:
        return await playwright.chromium.launch(executable_path=executable, headless=headless, args=list(LAUNCH_ARGS))
    except Exception as exc:  # noqa: BLE001 - Playwright raises plain Error here
        hint = " (no display? use headless mode, or run under xvfb-run)" if not headless else ""
        raise EnvironmentFailure(f"could not launch Chromium at {executable}{hint}: {str(exc).splitlines()[0]}") from None


def _playwright_default(playwright: Any) -> str | None:
    try:
        return playwright.chromium.executable_path
    except Exception:  # noqa: BLE001
        return None


class BrowserEnvironment(Environment):
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
        allow_file_urls: bool = False,
        allowed_domains: tuple[str, ...] | list[str] = (),
        blocked_domains: tuple[str, ...] | list[str] = (),
    ) -> None:
        if viewport[0] <= 0 or viewport[1] <= 0:
            raise ConfigError(f"viewport must be positive, got {viewport[0]}x{viewport[1]}")
        if device_scale_factor <= 0:
            raise ConfigError("device scale factor must be positive")
        if screenshot_format not in ("jpeg", "png"):
            raise ConfigError("screenshot format must be 'jpeg' or 'png'")
        self.headless = headless
        self.viewport = viewport
        self.device_scale_factor = device_scale_factor
        self.settle_config = settle or SettleConfig()
        self.screenshot_format = screenshot_format
        self.jpeg_quality = jpeg_quality
        self.navigation_timeout = navigation_timeout
        self._shared_browser = browser
        # Capture only this CSS rectangle (x, y, width, height); points map back through the origin.
        self.clip = clip
        self.url_policy = UrlPolicy(
            allow_file_urls=allow_file_urls, allowed_domains=allowed_domains, blocked_domains=blocked_domains,
        )
        self._proxy: Any = None
        self._playwright: Any = None
        self._browser: Any = None
        self._context: Any = None
        self._page: Any = None
        self._tracker = NetworkTracker()
        self._navigations = 0
        self._crashed: str | None = None
        self._hooked: set[int] = set()

    # -- lifecycle ---------------------------------------------------------

    async def start(self, url: str | None = None) -> None:
        if self._context is None:
            if self._shared_browser is not None:
                self._browser = self._shared_browser
            else:
                from playwright.async_api import async_playwright

                self._playwright = await async_playwright().start()
                try:
                    self._browser = await launch_chromium(self._playwright, headless=self.headless)
                except BaseException:
                    await self._playwright.stop()
                    self._playwright = None
                    raise
            options: dict[str, Any] = {}
            if self.url_policy.has_domain_rules:
                # Every request of the context, loopback included, passes the domain check.
                from .guard_proxy import GuardProxy

                self._proxy = await GuardProxy(self.url_policy.host_refusal, self.url_policy.on_refused_request).start()
                options = {"proxy": {"server": self._proxy.url, "bypass": "<-loopback>"}, "service_workers": "block"}
            self._context = await self._browser.new_context(
                viewport={"width": self.viewport[0], "height": self.viewport[1]},
                device_scale_factor=self.device_scale_factor, **options,
            )
            self._context.set_default_navigation_timeout(self.navigation_timeout * 1000)
            await self._context.add_init_script(MUTATION_TRACKER)
            self._tracker.attach(self._context)
            self._context.on("page", self._on_new_page)
            self._use(await self._context.new_page())
        if url:
            check_start_url(url, self.url_policy)
            await self._goto(url)
            await self.settle(await self.mark())

    async def close(self) -> None:
        try:
            if self._context is not None:
                await self._context.close()
        except Exception:  # noqa: BLE001 - closing a crashed context can fail; nothing to save
            pass
        finally:
            self._context = self._page = None
            if self._shared_browser is None and self._browser is not None:
                try:
                    await self._browser.close()
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
            self.url_policy.watch(page)

    def _on_crash(self, page: Any) -> None:
        if page is self._page:
            self._crashed = page.url

    def _on_navigated(self, page: Any, frame: Any) -> None:
        if page is self._page and frame == page.main_frame:
            self._navigations += 1

    def _on_new_page(self, page: Any) -> None:
        # A click that opens a tab makes that tab current.
        self._use(page)

    def _check_alive(self) -> None:
        if self._crashed is not None:
            raise EnvironmentFailure(f"the page crashed (at {self._crashed or 'about:blank'})")

    # -- observe / settle ----------------------------------------------------

    async def observe(self) -> Observation:
        self._check_alive()
        page = self.page
        await self.url_policy.leave_refused(page)  # a refused page is never captured
        options: dict[str, Any] = {"type": self.screenshot_format, "timeout": 15_000}
        if self.screenshot_format == "jpeg":
            options["quality"] = self.jpeg_quality
        origin = (0.0, 0.0)
        if self.clip is not None:
            x, y, width, height = self.clip
            options["clip"] = {"x": x, "y": y, "width": width, "height": height}
            origin = (float(x), float(y))
        try:
            data = await page.screenshot(**options)
            title = await page.title()
        except Exception as exc:  # noqa: BLE001
            self._check_alive()
            raise EnvironmentFailure(f"screenshot failed: {str(exc).splitlines()[0]}") from None
        pages = self._context.pages
        return Observation(
            screenshot=Screenshot(data, f"image/{self.screenshot_format}", _image_size(data), self.device_scale_factor, origin),
            url=page.url, title=title, tabs=tuple(p.url for p in pages),
            active_tab=pages.index(page) if page in pages else 0,
        )

    async def mark(self) -> Mark:
        return Mark(time.time() * 1000, self._tracker.seq, self._navigations, self._page.url if self._page else "", len(self._context.pages))

    async def settle(self, mark: Mark) -> str:
        self._check_alive()
        return await settle_page(lambda: (self.page, self._navigations), mark, self._tracker, self.settle_config)

    async def perform(self, action: Any) -> ActionOutcome:
        self._check_alive()
        try:
            outcome = await super().perform(action)
        except (SurferError, ValueError):
            raise
        except Exception as exc:  # noqa: BLE001 - Playwright's plain Error: a crash, or an action the page refused
            message = str(exc).splitlines()[0] if str(exc) else repr(exc)
            self._check_alive()
            if "crashed" in message.lower():
                raise EnvironmentFailure(f"the page crashed (at {self._page.url if self._page else 'about:blank'})") from None
            raise ActionFailed(f"{action.type} failed: {message}") from None
        if await self.url_policy.leave_refused(self.page):
            outcome.settle_reason += "; left a refused page"
        notices = self.url_policy.take_notices()
        if notices:
            outcome.detail = "; ".join([outcome.detail, *notices]) if outcome.detail else "; ".join(notices)
        return outcome

    # -- actions -------------------------------------------------------------

    async def _act_click(self, action: Click) -> str:
        p = action.point
        await self.page.mouse.click(p.x, p.y, button=action.button, click_count=2 if action.double else 1)
        return f"{'double-' if action.double else ''}{action.button} click at {p}"

    async def _act_hover(self, action: Hover) -> str:
        await self.page.mouse.move(action.point.x, action.point.y)
        return f"hover at {action.point}"

    async def _act_type(self, action: TypeText) -> str:
        page = self.page
        if action.point is not None:
            await page.mouse.click(action.point.x, action.point.y)
        if action.clear:
            await page.keyboard.press("ControlOrMeta+A")
            await page.keyboard.press("Delete")
        await page.keyboard.type(action.text)
        if action.submit:
            await page.keyboard.press("Enter")
        return f"typed {len(action.text)} characters" + (" and pressed Enter" if action.submit else "")

    async def _act_press(self, action: PressKeys) -> str:
        try:
            await self.page.keyboard.press(action.keys)
        except Exception as exc:  # noqa: BLE001 - Playwright: 'Unknown key: ...'
            raise ActionFailed(f"cannot press {action.keys!r}: {str(exc).splitlines()[0]}") from None
        return f"pressed {action.keys}"

    async def _act_scroll(self, action: Scroll) -> str:
        page = self.page
        x, y = (action.point.x, action.point.y) if action.point else (self.viewport[0] / 2, self.viewport[1] / 2)
        await page.mouse.move(x, y)
        distance = action.amount * WHEEL_NOTCH_PX
        dx, dy = {"up": (0, -distance), "down": (0, distance), "left": (-distance, 0), "right": (distance, 0)}[action.direction]
        await page.mouse.wheel(dx, dy)
        return f"scrolled {action.direction} {distance} px at ({x:.0f}, {y:.0f})"

    async def _act_drag(self, action: Drag) -> str:
        mouse = self.page.mouse
        await mouse.move(action.point.x, action.point.y)
        await mouse.down()
        await mouse.move(action.to_point.x, action.to_point.y, steps=12)
        await mouse.up()
        return f"dragged {action.point} → {action.to_point}"

    async def _goto(self, url: str) -> None:
        current = self._page.url if self._page else ""
        self.url_policy.check(url, opener=current)  # before normalising: 'javascript:x' must not become 'https://javascript:x'
        target = normalize_url(url, current)
        self.url_policy.check(target, opener=current)
        try:
            await self.page.goto(target, wait_until="domcontentloaded")
        except Exception as exc:  # noqa: BLE001
            self._check_alive()
            raise ActionFailed(f"could not open {target}: {str(exc).splitlines()[0]}") from None

    async def _act_goto(self, action: Goto) -> str:
        await self._goto(action.url)
        return f"opened {self.page.url}"

    async def _history(self, name: str) -> str:
        try:
            response = await getattr(self.page, name)(wait_until="domcontentloaded")
        except Exception as exc:  # noqa: BLE001
            raise ActionFailed(f"{name.replace('_', ' ')} failed: {str(exc).splitlines()[0]}") from None
        if response is None and name != "reload":
            return f"{name.replace('_', ' ')}: no page in that direction (still at {self.page.url})"
        return f"now at {self.page.url}"

    async def _act_back(self, action: Any) -> str:
        return await self._history("go_back")

    async def _act_forward(self, action: Any) -> str:
        return await self._history("go_forward")

    async def _act_refresh(self, action: Any) -> str:
        return await self._history("reload")

    async def _act_switch_tab(self, action: SwitchTab) -> str:
        pages = self._context.pages
        if action.index >= len(pages):
            raise ActionFailed(f"there is no tab {action.index}; open tabs: 0..{len(pages) - 1}")
        self._use(pages[action.index])
        await self._page.bring_to_front()
        return f"switched to tab {action.index} ({self._page.url})"

    async def _act_close_tab(self, action: CloseTab) -> str:
        pages = self._context.pages
        index = pages.index(self._page) if action.index is None else action.index
        if index >= len(pages):
            raise ActionFailed(f"there is no tab {index}; open tabs: 0..{len(pages) - 1}")
        closing = pages[index]
        await closing.close()
        remaining = self._context.pages
        if not remaining:
            self._use(await self._context.new_page())
        elif closing is self._page:
            self._use(remaining[min(index, len(remaining) - 1)])
            await self._page.bring_to_front()
        return f"closed tab {index}; current tab is {self._page.url}"
