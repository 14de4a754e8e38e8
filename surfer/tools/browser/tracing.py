"""Playwright traces of a run (`--trace on | retain-on-failure | off`): the
browser context is traced with screenshots and DOM snapshots from the moment
it opens; each agent step is a group named by its action ("step 3: click
'Submit'"), so `python -m playwright show-trace trace.zip` reads like the run;
the run's end saves the chunk as `trace.zip` in the run directory, or drops
it (retain-on-failure after a success, or no run directory). A secret's value
typed during the run is replaced by its placeholder in the saved file. Sign-in
credentials never stay in a saved trace: the network log loses its Cookie,
Set-Cookie and Authorization headers (and HAR cookie lists), and the values of
the storage state the session loaded are replaced wherever they appear."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import zipfile
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterable

log = logging.getLogger(__name__)

from surfer.core.retention import MODES as TRACE_MODES, keeps

TRACE_FILE = "trace.zip"
SAVE_TIMEOUT_S = 30.0
CREDENTIAL_HEADERS = frozenset({"cookie", "set-cookie", "authorization", "proxy-authorization"})
EVENT_MEMBERS = (".trace", ".network")  # the archive's JSON-lines logs (actions, network)
HIDDEN = "[hidden: sign-in state]"


class ContextTrace:
    """The trace of one browser context, one chunk per run."""

    def __init__(self, mode: str = "off") -> None:
        if mode not in TRACE_MODES:
            raise ValueError(f"trace must be one of {', '.join(TRACE_MODES)}, got {mode!r}")
        self.mode = mode
        self._context: Any = None
        self._recording = False
        self._group_open = False
        self.hidden: list[str] = []  # values (a loaded storage state's) replaced in every saved trace

    @property
    def recording(self) -> bool:
        return self._recording

    async def attach(self, context: Any, *, shared: bool = False) -> None:
        """Start tracing a freshly opened context (nothing when off). A `shared` context (a browser's own,
        borrowed over CDP) may be traced already by another session: then this one goes untraced, said in the log."""
        if self.mode == "off":
            return
        self._context = context
        try:
            await context.tracing.start(screenshots=True, snapshots=True, sources=False)
        except Exception as exc:  # noqa: BLE001 - Playwright: "Tracing has been already started"
            if not shared:
                raise
            log.warning("no trace for this session: the browser's own context is traced by another one (%s)",
                        str(exc).splitlines()[0] if str(exc) else repr(exc))
            return
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
        if target is None or not target.exists():
            return None
        await asyncio.to_thread(strip_credentials, target, self.hidden)
        return target


def strip_credentials(path: Path, hidden: Iterable[str] = ()) -> None:
    """Rewrite a saved trace without sign-in credentials: credential headers and cookie lists out of its
    logs, `hidden` values (longest first) replaced everywhere. Blocking."""
    values = sorted(set(v for v in hidden if v), key=len, reverse=True)

    def clean(name: str, text: str) -> str:
        if name.endswith(EVENT_MEMBERS):
            text = "\n".join(_without_credentials(line) for line in text.split("\n"))
        for value in values:
            text = text.replace(value, HIDDEN)
        return text

    rewrite_archive(path, clean)


def _without_credentials(line: str) -> str:
    if not line.strip():
        return line
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return line
    return json.dumps(_drop_credentials(event), separators=(",", ":"))


def _drop_credentials(value: Any) -> Any:
    if isinstance(value, list):
        return [_drop_credentials(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "cookies" and isinstance(item, list):
            out[key] = []
        elif key.lower() in CREDENTIAL_HEADERS:
            continue  # headers as a mapping
        elif key == "headers" and isinstance(item, list):
            out[key] = [h for h in item if not (isinstance(h, dict) and str(h.get("name", "")).lower() in CREDENTIAL_HEADERS)]
        else:
            out[key] = _drop_credentials(item)
    return out


def scrub_archive(path: Path, scrub: Callable[[str], str]) -> None:
    """Rewrite a trace so that no secret's value is in it: every text member (the actions'
    parameters, DOM snapshots, network bodies) through `scrub`; images as they are. Blocking."""
    rewrite_archive(path, lambda _name, text: scrub(text))


def rewrite_archive(path: Path, change: Callable[[str, str], str]) -> None:
    """Every text member of a zip through `change(name, text)`; images and other binary members as they are. Blocking."""
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            try:
                data = change(info.filename, data.decode("utf-8")).encode("utf-8")
            except UnicodeDecodeError:
                pass
            target.writestr(info, data)
    tmp.replace(path)
