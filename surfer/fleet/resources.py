"""What a machine running sessions spends: memory of this process and its
descendants (Chromium, Playwright's driver), the machine's memory in use,
and which part of the harness each process is. Read with psutil
(`pip install 'surfer-agent[bench]'`); used by the Ray workers' status and
the benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from surfer.core.errors import ConfigError


def load_psutil() -> Any:
    try:
        import psutil
    except ImportError:
        raise ConfigError(
            "the throughput benchmark reads memory and CPU with psutil: pip install 'surfer-agent[bench]'"
        ) from None
    return psutil


def process_tree() -> list[Any]:
    me = load_psutil().Process()
    return [me, *me.children(recursive=True)]


def process_tree_memory() -> tuple[int, int]:
    """(RSS, PSS) in bytes summed over this process and all its descendants.
    RSS counts pages shared between Chromium's processes once per process;
    PSS splits them, so it is the fairer total (Linux only; else equal to RSS).
    Reading PSS walks every page table: ~2 ms of CPU per Chromium process."""
    psutil = load_psutil()
    rss = pss = 0
    for proc in process_tree():
        try:
            info = proc.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        rss += info.rss
        pss += getattr(info, "pss", info.rss)
    return rss, pss


def system_memory_used() -> int | None:
    """MemTotal - MemAvailable in bytes (Linux), the machine's memory in use."""
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
        return (int(fields["MemTotal"].split()[0]) - int(fields["MemAvailable"].split()[0])) * 1024
    except (OSError, KeyError, ValueError):
        return None


def process_role(proc: Any) -> str:
    """Which part of the harness a process of the tree is: 'surfer' (this
    process), 'driver' (Playwright's Node.js driver), 'chromium' (the browser
    and its renderers, GPU and utility processes) or 'other' (the stand-in)."""
    import os as _os

    if proc.pid == _os.getpid():
        return "surfer"
    try:
        name = proc.name().lower()
        exe = (proc.exe() or "").lower()
    except Exception:  # noqa: BLE001 - gone, or not ours to read
        return "other"
    if name == "node" or exe.endswith("/node"):
        return "driver"
    if "chrom" in name or "chrom" in exe or "headless" in name:
        return "chromium"
    return "other"


ROLES = ("surfer", "driver", "chromium", "other")
