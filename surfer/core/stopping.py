"""A stop the process was asked for, visible to the layers below the commands.

The commands' signal handling (surfer/apps/signals.py) says here, at once and
before the run's cancellation reaches it, that a stop signal came. When every
process of the group or cgroup is signalled together (systemd, CI runners), the
browser and Playwright's driver die at the same moment: the errors that follows
in the run are part of the stop, and the run records `interrupted`, not a crash.
Nothing in the SDK sets it; a process that embeds surfer asks through
cancellation (RunHandle.cancel)."""

from __future__ import annotations

_reason: str | None = None


def request(reason: str) -> None:
    """Say that the process is stopping (`reason`: e.g. "stopped by SIGTERM")."""
    global _reason
    if _reason is None:
        _reason = reason


def requested() -> str | None:
    """Why the process is stopping, or None."""
    return _reason


def interrupted_reason() -> str:
    """The reason a run stopped by cancellation records."""
    return f"interrupted: {_reason}" if _reason else "interrupted (Ctrl-C, SIGTERM or cancelled)"


def clear() -> None:
    global _reason
    _reason = None
