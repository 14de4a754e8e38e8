"""Playwright traces of a browser session, the one owner of tracing.

A trace is Playwright's own (`context.tracing`): screenshots, DOM snapshots
and network requests of the session's browser context, one group per agent
step, saved as a zip that `python -m playwright show-trace trace.zip` opens.

Whoever claims the trace first (`claim`) saves it (`save`): the agent loop
claims it for its run directory; a QA case claims it for the whole case
before its runs, whose own claims then come back False and leave it alone.
Recording starts when the context opens (or at once, when it is open), so
the start page's requests are in it. Modes: off, on, retain-on-failure
(written only when the owner says the run failed)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any, AsyncIterator

from surfer.core.errors import ConfigError

TRACE_MODES = ("off", "on", "retain-on-failure")
GROUP_TIMEOUT_S = 5.0  # a group call into a browser that stopped answering must not hold the step
SAVE_TIMEOUT_S = 60.0


def check_mode(value: str, what: str = "trace") -> str:
    """`value` when it is a recording mode (off, on, retain-on-failure); else a ConfigError naming `what`."""
    if value not in TRACE_MODES:
        raise ConfigError(f"{what} must be one of on, retain-on-failure, off; got {value!r}")
    return value


class Tracing:
    """The trace of one browser session (see the module's docstring)."""

    def __init__(self, mode: str = "off") -> None:
        self.mode = check_mode(mode)
        self._path: Path | None = None  # where the claimed trace goes
        self._context: Any = None  # the context being recorded

    @property
    def recording(self) -> bool:
        return self._context is not None

    def claim(self, path: str | Path) -> bool:
        """Ask for a trace saved at `path`; False when tracing is off or someone
        else holds the trace (it is theirs to save)."""
        if self.mode == "off" or self._path is not None:
            return False
        self._path = Path(path)
        return True

    async def attach(self, context: Any) -> None:
        """Start recording `context` when a trace is claimed and not yet recording."""
        if self._path is None or self._context is not None:
            return
        await context.tracing.start(screenshots=True, snapshots=True, title=self._path.parent.name)
        self._context = context

    @contextlib.asynccontextmanager
    async def group(self, name: str) -> AsyncIterator[None]:
        """Playwright's calls inside show under `name` in the trace (nothing when not recording)."""
        context = self._context
        opened = context is not None and await self._call(context.tracing.group(name))
        try:
            yield
        finally:
            if opened and context is self._context:
                await self._call(context.tracing.group_end())

    async def save(self, failed: bool) -> Path | None:
        """Stop recording and release the claim: the trace's path when it was written
        (mode on, or retain-on-failure and `failed`), else None. A browser that
        died under the run leaves no trace."""
        path, context = self._path, self._context
        self._path = self._context = None
        if context is None or path is None:
            return None
        keep = self.mode == "on" or failed
        try:
            if keep:
                await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
                await asyncio.wait_for(context.tracing.stop(path=str(path)), SAVE_TIMEOUT_S)
            else:
                await asyncio.wait_for(context.tracing.stop(), SAVE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - a crashed or closed context has nothing to save
            return None
        return path if keep and path.exists() else None

    @staticmethod
    async def _call(awaitable: Any) -> bool:
        try:
            await asyncio.wait_for(awaitable, GROUP_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - a trace is a record of the run, never a reason for it to fail
            return False
        return True
