"""Playwright traces of a run (`--trace on | retain-on-failure | off`): the
browser context is traced with screenshots and DOM snapshots from the moment
it opens; each agent step is a group named by its action ("step 3: click
'Submit'"), so `python -m playwright show-trace trace.zip` reads like the run;
the run's end saves the chunk as `trace.zip` in the run directory, or drops
it (retain-on-failure after a success, or no run directory). A secret's value
typed during the run is replaced by its placeholder in the saved file."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zipfile
from pathlib import Path
from typing import Any, AsyncIterator, Callable

log = logging.getLogger(__name__)

from surfer.core.retention import MODES as TRACE_MODES, keeps

TRACE_FILE = "trace.zip"
SAVE_TIMEOUT_S = 30.0


class ContextTrace:
    """The trace of one browser context, one chunk per run."""

    def __init__(self, mode: str = "off") -> None:
        if mode not in TRACE_MODES:
            raise ValueError(f"trace must be one of {', '.join(TRACE_MODES)}, got {mode!r}")
        self.mode = mode
        self._context: Any = None
        self._recording = False
        self._group_open = False

    @property
    def recording(self) -> bool:
        return self._recording

    async def attach(self, context: Any) -> None:
        """Start tracing a freshly opened context (nothing when off)."""
        if self.mode == "off":
            return
        self._context = context
        await context.tracing.start(screenshots=True, snapshots=True, sources=False)
        self._recording = True

    @contextlib.asynccontextmanager
    async def group(self, name: str) -> AsyncIterator[None]:
        """The Playwright calls inside are one group of the trace."""
        opened = False
        if self._recording and not self._group_open:
            with contextlib.suppress(Exception):  # a trace must never fail the step it records
                await self._context.tracing.group(name[:200])
                opened = self._group_open = True
        try:
            yield
        finally:
            if opened:
                self._group_open = False
                with contextlib.suppress(Exception):
                    await self._context.tracing.group_end()

    async def finish(self, run_dir: Path | None, status: str) -> Path | None:
        """End this run's chunk: saved as run_dir/trace.zip when kept, else dropped; then a new
        chunk starts for the context's next run. The path, when saved."""
        if not self._recording:
            return None
        target = run_dir / TRACE_FILE if run_dir is not None and keeps(self.mode, status) else None
        try:
            if target is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
            await asyncio.wait_for(self._context.tracing.stop_chunk(path=str(target) if target else None), SAVE_TIMEOUT_S)
            await self._context.tracing.start_chunk()
        except Exception as exc:  # noqa: BLE001 - a crashed browser has no trace to give
            log.warning("the trace could not be saved: %s", str(exc).splitlines()[0] if str(exc) else repr(exc))
            self._recording = False
            return None
        return target if target is not None and target.exists() else None


def scrub_archive(path: Path, scrub: Callable[[str], str]) -> None:
    """Rewrite a trace so that no secret's value is in it: every text member (the actions'
    parameters, DOM snapshots, network bodies) through `scrub`; images as they are. Blocking."""
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            try:
                data = scrub(data.decode("utf-8")).encode("utf-8")
            except UnicodeDecodeError:
                pass
            target.writestr(info, data)
    tmp.replace(path)
