"""A persistent Chromium profile (`--user-data-dir`): logins, extensions' data
and preferences survive between runs. One Chromium at a time may hold a
profile (its `SingletonLock`, a link to "host-pid"); a profile in use is a
clear error before anything is launched, never a hang. The directory is the
user's: surfer reads it only through Chromium and never copies it.

Use a profile made for surfer (or by `surfer run --user-data-dir` itself), not
your everyday Chrome's: that one is locked while Chrome runs, and its cookies
are encrypted with a key from the desktop's keyring (attach to that browser
with --cdp-url instead)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

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
        raise ConfigError(f"the profile {path} is in use by another Chromium ({holder}; {LOCK}): close that browser, "
                          "or give another --user-data-dir; concurrent sessions share a state with --storage-state")
    return path


async def launch_profile(directory: str | Path, *, headless: bool, options: dict[str, Any]) -> tuple[Any, Any]:
    """(playwright, context) of Chromium running in the profile; `options` are the context's
    (viewport, scale factor, proxy). The context is the browser: closing it ends Chromium."""
    import asyncio

    from surfer.tools.chromium import _playwright_default, check_display, find_chromium, launch_args, with_playwright

    check_display(headless)
    path = await asyncio.to_thread(check_profile_dir, directory)

    async def launch(playwright: Any) -> Any:
        executable = find_chromium(_playwright_default(playwright), headless=headless)
        try:
            return await playwright.chromium.launch_persistent_context(
                str(path), executable_path=executable, headless=headless, args=launch_args(executable),
                timeout=LAUNCH_TIMEOUT_S * 1000, **options,
            )
        except Exception as exc:  # noqa: BLE001 - Playwright's plain Error
            first = str(exc).splitlines()[0] if str(exc) else repr(exc)
            holder = lock_holder(path)
            if holder is not None or "singleton" in first.lower():
                raise ConfigError(f"the profile {path} is in use by another Chromium ({holder or first}): close that browser, "
                                  "or give another --user-data-dir") from None
            raise EnvironmentFailure(f"could not open the profile {path} in {executable}: {first}") from None

    return await with_playwright(launch)

