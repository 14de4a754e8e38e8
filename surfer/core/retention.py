"""What a run keeps for reading it later (`--trace`, `--video`): always, only
when it did not succeed, or nothing."""

from __future__ import annotations

MODES = ("off", "on", "retain-on-failure")


def keeps(mode: str, status: str) -> bool:
    """Whether a run that ended with `status` keeps its trace / video under `mode`."""
    return mode == "on" or (mode == "retain-on-failure" and status not in ("success", "passed"))
