"""A persistent Chromium profile (`--user-data-dir`): logins, extensions' data
and preferences survive between runs. One Chromium at a time may hold a
profile (its `SingletonLock`, a link to "host-pid"); a profile in use is a
clear error before anything is launched, never a hang. The headless shell
takes no lock of its own: surfer holds one for it (this process's host-pid,
removed when the browser closes; a crash leaves a stale lock, taken over). The directory is the
user's: surfer reads it only through Chromium and never copies it.

Use a profile made for surfer (or by `surfer run --user-data-dir` itself), not
your everyday Chrome's: that one is locked while Chrome runs, and its cookies
are encrypted with a key from the desktop's keyring (attach to that browser
with --cdp-url instead)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, Callable

from surfer.core.errors import ConfigError, EnvironmentFailure

LOCK = "SingletonLock"
LAUNCH_TIMEOUT_S = 30.0


def lock_holder(directory: str | Path) -> str | None:
    """Who holds the profile (a description), or None when nobody does (no lock, or a stale one
    of a process of this host that is gone: Chromium takes that one over)."""
    lock = Path(directory).expanduser() / LOCK
    try:
        target = os.readlink(lock)
    except FileNotFoundError:
        return None
    except OSError:
        return "a lock file surfer cannot read" if lock.exists() else None
    host, _, pid = target.rpartition("-")
    if host == socket.gethostname() and pid.isdigit():
        return f"process {pid}" if _alive(int(pid)) else None
    return f"{target} (another machine, or a container)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_profile_dir(directory: str | Path) -> Path:
    """The profile directory, usable now: ConfigError (exit 2) when it is a file, cannot be made, or is in use."""
    path = Path(directory).expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--user-data-dir {path} is a file, not a directory (a storage state file goes to --storage-state)")
    if not path.exists() and not path.parent.is_dir():
        raise ConfigError(f"--user-data-dir {path}: its parent directory {path.parent} does not exist")
    holder = lock_holder(path)
    if holder is not None:
        raise in_use(path, holder)
    return path


def in_use(path: Path, holder: str) -> ConfigError:
    return ConfigError(f"the profile {path} is in use by another Chromium ({holder}; {LOCK}): close that browser, "
                       "or give another --user-data-dir; concurrent sessions share a state with --storage-state")


def hold_lock(path: Path) -> Callable[..., None]:
    """Take the profile's lock for a browser that takes none (the headless shell), as Chromium
    would: a link to this process's host-pid. ConfigError when another holds it; returns what
    releases it (only while it is still this process's)."""
    lock, mine = path / LOCK, f"{socket.gethostname()}-{os.getpid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    try:
        os.symlink(mine, lock)
    except FileExistsError:
        holder = lock_holder(path)
        if holder is not None:
            raise in_use(path, holder) from None
        lock.unlink(missing_ok=True)  # a stale lock of a process that is gone: taken over
        os.symlink(mine, lock)

    def release(*_: Any) -> None:
        try:
            if os.readlink(lock) == mine:
                lock.unlink()
        except OSError:
            pass

    return release


def _refused(path: Path, executable: str, exc: Exception) -> None:
    """Raise what a failed launch in the profile means: in use (ConfigError), else an EnvironmentFailure."""
    first = str(exc).splitlines()[0] if str(exc) else repr(exc)
    holder = lock_holder(path)
    if holder is not None or "singleton" in first.lower():
        raise ConfigError(f"the profile {path} is in use by another Chromium ({holder or first}): close that browser, "
                          "or give another --user-data-dir") from None
    raise EnvironmentFailure(f"could not open the profile {path} in {executable}: {first}") from None


async def launch_profile(directory: str | Path, *, headless: bool, options: dict[str, Any]) -> tuple[Any, Any]:
    """(playwright, context) of Chromium running in the profile; `options` are the context's
    (viewport, scale factor, proxy). The context is the browser: closing it ends Chromium."""
    import asyncio

    from surfer.tools.chromium import HEADLESS_SHELL_NAMES, _playwright_default, check_display, find_chromium, launch_args, with_playwright

    check_display(headless)
    path = await asyncio.to_thread(check_profile_dir, directory)

    async def launch(playwright: Any) -> Any:
        executable = find_chromium(_playwright_default(playwright), headless=headless)
        release = await asyncio.to_thread(hold_lock, path) if Path(executable).name in HEADLESS_SHELL_NAMES else None
        try:
            context = await playwright.chromium.launch_persistent_context(
                str(path), executable_path=executable, headless=headless, args=launch_args(executable, guarded="proxy" in options),
                timeout=LAUNCH_TIMEOUT_S * 1000, **options,
            )
        except BaseException as exc:
            if release is not None:
                release()
            if isinstance(exc, Exception):  # Playwright's plain Error
                _refused(path, executable, exc)
            raise
        if release is not None:
            context.on("close", release)
        return context

    return await with_playwright(launch)

