"""The browser's settings (`[browser]` of a configuration file, `Agent(browser={...})`): one section
of the configuration (agent/config.py), kept apart for its size."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from surfer.core.errors import ConfigError
from surfer.core.observation import screenshot_too_large


def parse_viewport(value: Any) -> tuple[int, int]:
    if isinstance(value, str):
        parts = value.lower().replace("×", "x").split("x")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"viewport must look like 1280x800, got {value!r}")
        value = (int(parts[0]), int(parts[1]))
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer() for v in value)):
        raise ValueError(f'viewport must be "WxH" or [W, H] in whole pixels, got {value!r}')
    width, height = value
    if not (100 <= width <= 10_000 and 100 <= height <= 10_000):
        raise ValueError(f"viewport {width}x{height} is out of range (100..10000 per side)")
    return int(width), int(height)


class BrowserSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    headless: bool = Field(default=True, description="Run Chromium without a window (`--headful` turns it off).")
    viewport: tuple[int, int] = Field(default=(1280, 800), description='Viewport in CSS pixels, "WxH" or [W, H].')
    device_scale_factor: float = Field(
        default=1.0, gt=0, le=4, description="Device pixels per CSS pixel (a screenshot is at most 10000 device pixels a side).")
    settle_timeout: float = Field(
        default=3.0, ge=0, le=60, description="Upper bound on one settle wait after an action, seconds.",
    )
    settle_quiet: float = Field(
        default=0.08, ge=0, le=5, description="How long the DOM must stay quiet to count as settled, seconds.",
    )
    settle_ticking: float = Field(
        default=0.6, gt=0, le=60, description="A part of the page that keeps changing this long during a settle wait, "
        "at a steady pace and without growing (a clock, a progress bar, a carousel), stops holding it, seconds.",
    )
    screenshot_format: Literal["jpeg", "png"] = Field(
        default="jpeg", description="Format of the screenshots taken and sent.",
    )
    upload_files: list[str] = Field(default=[], description="Files the agent may upload (the upload action).")
    max_download_mb: float = Field(default=100.0, gt=0, description="Larger downloads are deleted and refused.")
    max_downloads: int = Field(default=20, ge=0, description="Downloads kept per run; later ones are cancelled.")
    allow_file_urls: bool = Field(default=False, description="Let the agent open file: URLs (refused by default).")
    ignore_https_errors: bool = Field(
        default=False, description="Open HTTPS sites whose certificate the browser does not trust (a test server's "
        "self-signed one); only for servers you control.",
    )
    trace: Literal["off", "on", "retain-on-failure"] = Field(
        default="off", description="Playwright trace of each run (screenshots, DOM snapshots, network) as trace.zip.",
    )
    storage_state: str | dict[str, Any] | None = Field(
        default=None, description="Start signed in: a Playwright storage-state JSON file (cookies, localStorage per "
        "origin; `surfer auth save`, --save-storage-state) loaded into each run's browser context. The SDK also takes "
        "the state itself (a dict, e.g. a previous RunResult.storage_state).",
    )
    save_storage_state: str | None = Field(
        default=None, description="Write the context's storage state to this file when a run ends (atomically, mode "
        "0600); by default only after a successful run.",
    )
    save_storage_state_on_failure: bool = Field(
        default=False, description="Write save_storage_state after a run that did not succeed too (failed, limit, error, interrupted).",
    )
    keep_storage_state: bool = Field(
        default=False, description="Return the context's storage state at each run's end as RunResult.storage_state "
        "(in memory only; also on whenever storage_state or save_storage_state is set).",
    )
    user_data_dir: str | None = Field(
        default=None, description="Run in this persistent Chromium profile (logins, extensions' data and preferences "
        "survive); one session at a time: a profile in use by another Chromium is an error.",
    )
    cdp_url: str | None = Field(
        default=None, description="Attach to a running Chromium/Chrome over the DevTools protocol (started with "
        "--remote-debugging-port), e.g. http://127.0.0.1:9222: the run is a new tab in its own context (the user's "
        "logins), or a new context with storage_state; the browser and its tabs are left running.",
    )
    browser_ws: str | None = Field(
        default=None, description="Connect to a Playwright browser server (chromium.launchServer(), `npx playwright "
        "run-server`), e.g. ws://127.0.0.1:3000/: each run is a new context there.",
    )

    @field_validator("viewport", mode="before")
    @classmethod
    def _viewport(cls, value: Any) -> tuple[int, int]:
        return parse_viewport(value)

    @field_validator("storage_state", "save_storage_state", "user_data_dir", "upload_files", mode="before")
    @classmethod
    def _paths(cls, value: Any) -> Any:
        """A `pathlib.Path` where a file is named, as Python code gives one (it was "Input should be a valid string")."""
        if isinstance(value, list):
            return [os.fspath(item) if isinstance(item, os.PathLike) else item for item in value]
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    @field_validator("upload_files")
    @classmethod
    def _upload_files(cls, value: list[str]) -> list[str]:
        from surfer.tools.transfers import check_upload_files

        try:
            return [str(p) for p in check_upload_files(value)]
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("storage_state")
    @classmethod
    def _storage_state(cls, value: Any) -> Any:
        if isinstance(value, dict):
            from surfer.tools.browser.state import state_problem

            problem = state_problem(value)
            if problem:
                raise ValueError(f"not a Playwright storage state: {problem}")
        return value

    @field_validator("cdp_url", "browser_ws")
    @classmethod
    def _remote_url(cls, value: str | None, info: Any) -> str | None:
        if value is not None:
            from surfer.tools.browser.remote import check_remote_url

            try:
                check_remote_url("--cdp-url" if info.field_name == "cdp_url" else "--browser-ws", value)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _one_browser(self) -> "BrowserSettings":
        chosen = [name for name in ("user_data_dir", "cdp_url", "browser_ws") if getattr(self, name)]
        if len(chosen) > 1:
            raise ValueError(f"choose one browser: {' and '.join(chosen)} contradict each other")
        if self.user_data_dir and self.storage_state is not None:
            raise ValueError("a persistent profile (user_data_dir) keeps its own state; storage_state does not go with it")
        if too_large := screenshot_too_large(self.viewport, self.device_scale_factor):
            raise ValueError(too_large)
        return self

    @property
    def attached(self) -> bool:
        """The browser is one surfer did not launch (cdp_url, browser_ws)."""
        return bool(self.cdp_url or self.browser_ws)
