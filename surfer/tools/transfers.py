"""Files in and out of the browser: uploads limited to the files the user
allowed, downloads saved into the run directory with a size and count cap.

Uploads: the user lists files (`--upload-file PATH`, `Agent(files=[...])`);
the `upload` action names one and only that file is ever handed to a page.
A name outside the list is refused before anything is read.

Downloads: each is saved as `<run dir>/downloads/<name>` (a number added
when the name is taken) and recorded; one larger than `max_bytes` is
deleted once it is complete (the browser gives no progress to stop it
earlier) and recorded as refused; after `max_count` files, further
downloads are cancelled.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable

from surfer.core.errors import ActionFailed, ConfigError
from surfer.tools.settle import BrowserReport

DEFAULT_MAX_DOWNLOAD_BYTES = 100 * 1024 * 1024
DEFAULT_MAX_DOWNLOADS = 20


def check_upload_files(paths: Iterable[str | Path]) -> tuple[Path, ...]:
    """Absolute paths of the allowed files; a missing one is a ConfigError."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.is_file():
            raise ConfigError(f"upload file {raw} does not exist or is not a file")
        out.append(path.resolve())
    return tuple(out)


class UploadFiles:
    def __init__(self, paths: Iterable[str | Path] = ()) -> None:
        self.paths = check_upload_files(paths)

    def __bool__(self) -> bool:
        return bool(self.paths)

    def listing(self) -> str:
        return ", ".join(str(p) for p in self.paths)

    def resolve(self, requested: str) -> Path:
        """The allowed file `requested` names (full path or file name)."""
        wanted = requested.strip()
        if not self.paths:
            raise ActionFailed("no files are allowed for upload (start the run with --upload-file PATH or files=[...])")
        for path in self.paths:
            if wanted == str(path) or os.path.abspath(os.path.expanduser(wanted)) == str(path):
                return path
        by_name = [p for p in self.paths if p.name == wanted]
        if len(by_name) == 1:
            return by_name[0]
        raise ActionFailed(f"{requested!r} is not an allowed upload file; allowed: {self.listing()}")


@dataclass
class DownloadRecord:
    name: str
    url: str
    status: str  # saved, too_large, over_count, failed, cancelled
    path: str | None = None
    bytes: int | None = None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        if self.status == "saved":
            where = f"saved as {self.path}" if self.path else "not kept (this run has no run directory)"
            return f"a file arrived: {self.name} ({_size(self.bytes)}), {where}"
        return f"download of {self.name} refused or failed: {self.detail}"


def _size(n: int | None) -> str:
    if n is None:
        return "? bytes"
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"


def safe_name(name: str) -> str:
    name = re.sub(r"[^\w.\- ]+", "_", Path(name).name).strip(" .") or "download"
    return name[:120]


class Downloads:
    """Saves the browser's downloads into `folder()` (the folder, and how to
    name it in records: "downloads" inside a run directory, which may move);
    `records` holds every one of this run, `take_new()` the ones not reported yet."""

    def __init__(
        self, folder: Callable[[], tuple[Path, str] | None], *, max_bytes: int = DEFAULT_MAX_DOWNLOAD_BYTES,
        max_count: int = DEFAULT_MAX_DOWNLOADS, approve: Callable[[str, str], Awaitable[bool]] | None = None,
    ) -> None:
        self.folder = folder
        # Asked (file name, URL) before a download is kept; a no cancels it.
        self.approve = approve
        self.max_bytes = max_bytes
        self.max_count = max_count
        self.records: list[DownloadRecord] = []
        self._reported = 0
        self._pending: set[asyncio.Task[None]] = set()
        self._started = 0
        self.report = BrowserReport()  # when the browser last reported a download

    def on_download(self, download: Any) -> None:
        self.report.arrived()
        self._started += 1
        task = asyncio.ensure_future(self._save(download, self._started))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _save(self, download: Any, number: int) -> None:
        name = safe_name(download.suggested_filename)
        record = DownloadRecord(name=name, url=download.url, status="failed")
        try:
            if number > self.max_count:
                await download.cancel()
                record.status, record.detail = "over_count", f"the run already has {self.max_count} downloads (the cap)"
                return
            if self.approve is not None and not await self.approve(name, download.url):
                await download.cancel()
                record.status, record.detail = "refused", "downloads need a confirmation, and this one was refused"
                return
            failure = await download.failure()
            if failure:
                record.detail = failure
                return
            temp, copied = await _local_file(download)
            record.bytes = temp.stat().st_size
            if record.bytes > self.max_bytes:
                await download.delete()
                await asyncio.to_thread(_remove_copy, temp, copied)
                record.status = "too_large"
                record.detail = f"{_size(record.bytes)} is over the {_size(self.max_bytes)} cap; deleted"
                return
            place = self.folder()
            if place is not None:
                folder, shown = place
                await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
                target = _free_path(folder / name)
                if copied:
                    await asyncio.to_thread(shutil.move, temp, target)
                else:
                    await download.save_as(target)
                record.name, record.path = target.name, f"{shown}/{target.name}"
            await asyncio.to_thread(_remove_copy, temp, copied)
            record.status = "saved"
        except asyncio.CancelledError:
            record.status, record.detail = "cancelled", "the session ended before it finished"
            raise
        except Exception as exc:  # noqa: BLE001 - Playwright: the context closed mid-download, disk errors
            record.detail = str(exc).splitlines()[0]
        finally:
            self.records.append(record)

    async def wait(self, timeout: float) -> None:
        """Wait (bounded) for downloads in progress to be saved."""
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=timeout)

    async def cancel(self) -> None:
        for task in list(self._pending):
            task.cancel()
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    def reset(self) -> None:
        """Start a new run's list (downloads still in progress stay with it)."""
        self.records, self._reported, self._started = [], 0, len(self._pending)

    def take_new(self) -> list[DownloadRecord]:
        new = self.records[self._reported:]
        self._reported = len(self.records)
        return new


async def _local_file(download: Any) -> tuple[Path, bool]:
    """The downloaded file on this machine: Playwright's own, or (a browser on another machine, reached
    through a Playwright server, keeps it there) a copy fetched into a temporary folder. (path, copied)."""
    try:
        return Path(await download.path()), False
    except Exception as exc:  # noqa: BLE001 - Playwright: "Path is not available when connecting remotely"
        if "remote" not in str(exc).lower():
            raise
    folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="surfer-download-"))
    copy = folder / "download"
    await download.save_as(copy)
    return copy, True


def _remove_copy(path: Path, copied: bool) -> None:
    if copied:
        shutil.rmtree(path.parent, ignore_errors=True)


def _free_path(path: Path) -> Path:
    if not path.exists():
        return path
    for n in range(2, 10_000):
        candidate = path.with_name(f"{path.stem} ({n}){path.suffix}")
        if not candidate.exists():
            return candidate
    raise ActionFailed(f"too many files named {path.name} in {path.parent}")
