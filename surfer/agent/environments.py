"""Environments built from the configuration: the one place that turns
`AgentConfig` into a `BrowserEnvironment` and its URL policy, or into a
`DesktopEnvironment` (the agent's own runs, batches and QA suites all open
sessions through here)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import AgentConfig

if TYPE_CHECKING:
    from surfer.tools.browser import BrowserEnvironment
    from surfer.tools.desktop import DesktopEnvironment
    from surfer.tools.url_policy import UrlPolicy


def url_policy_of(config: AgentConfig) -> "UrlPolicy":
    from surfer.tools.url_policy import UrlPolicy

    return UrlPolicy(
        allow_file_urls=config.browser.allow_file_urls, allowed_domains=config.allowed_domains,
        blocked_domains=config.blocked_domains,
    )


def browser_environment(config: AgentConfig, browser: Any = None, early: Any = None) -> "BrowserEnvironment":
    """A browser session as configured; on `browser` (shared) or its own Chromium
    (the `early` launch, an EarlyBrowser, when it fits)."""
    from surfer.tools.browser import BrowserEnvironment
    from surfer.tools.settle import SettleConfig

    b = config.browser
    return BrowserEnvironment(
        browser=browser, headless=b.headless, viewport=b.viewport, device_scale_factor=b.device_scale_factor,
        settle=SettleConfig(timeout=b.settle_timeout, quiet=b.settle_quiet, ticking=b.settle_ticking),
        screenshot_format=b.screenshot_format,
        allow_file_urls=b.allow_file_urls, allowed_domains=config.allowed_domains, blocked_domains=config.blocked_domains,
        upload_files=b.upload_files, max_download_bytes=int(b.max_download_mb * 1024 * 1024), max_downloads=b.max_downloads,
        early=early, trace=b.trace, storage_state=b.storage_state, save_storage_state=b.save_storage_state,
        save_state_on_failure=b.save_storage_state_on_failure, keep_storage_state=b.keep_storage_state,
        user_data_dir=b.user_data_dir, cdp_url=b.cdp_url, browser_ws=b.browser_ws, ignore_https_errors=b.ignore_https_errors,
    )


def desktop_environment(config: AgentConfig, **options: Any) -> "DesktopEnvironment":
    """The desktop as configured (its settle wait, its fail-safe); `options`: DesktopEnvironment's own (display, monitor, ...)."""
    from surfer.tools.desktop import DesktopEnvironment
    from surfer.tools.settle import ScreenSettleConfig

    d = config.desktop
    settle = ScreenSettleConfig(timeout=d.settle_timeout, quiet=d.settle_quiet, ticking=d.settle_ticking)
    return DesktopEnvironment(settle=settle, failsafe=d.failsafe, **options)


def check_start_url(url: str, config: AgentConfig) -> None:
    """A refused start URL (local file, browser internals, refused domain) is a usage error."""
    from surfer.tools.url_policy import check_start_url as check

    check(url, url_policy_of(config))


def check_browser_start(config: AgentConfig) -> list[str]:
    """How and where the browser starts, checked before a run: ConfigError for a window without a display,
    a storage-state file that is missing or malformed, a profile that is a file or in use, a
    --save-storage-state path that is a directory; the warnings to show (a state file others can read)."""
    import os
    from pathlib import Path

    from surfer.core.errors import ConfigError
    from surfer.tools.browser.state import loose_permissions, read_storage_state
    from surfer.tools.chromium import check_display, find_chromium

    b = config.browser
    if not b.attached:  # (a browser surfer did not launch has its own display)
        check_display(b.headless)
        if os.environ.get("SURFER_CHROMIUM"):
            find_chromium(headless=b.headless)  # one that is not an executable file: refused before the run
    warnings: list[str] = []
    if isinstance(b.storage_state, str):
        read_storage_state(b.storage_state)
        warnings += filter(None, [loose_permissions(b.storage_state)])
    if b.user_data_dir:
        from surfer.tools.browser.profile import check_profile_dir

        check_profile_dir(b.user_data_dir)
    if b.save_storage_state:
        target = Path(b.save_storage_state).expanduser()
        if target.is_dir():
            raise ConfigError(f"--save-storage-state {target} is a directory; name a file, e.g. {target / 'state.json'}")
    return warnings

