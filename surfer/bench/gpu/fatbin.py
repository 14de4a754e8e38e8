"""Keep one GPU architecture's machine code in a shared library's CUDA fat binaries.

An engine wheel (vLLM, SGLang's kernels) carries each kernel for many GPU architectures
(sm_80, sm_90, sm_100, ...). A GPU runs only a cubin built for its own architecture (a cubin
runs on later minor versions of its major one only, and the kept architecture is taken as
exact), or PTX for an architecture up to its own, compiled when loaded. So in each
compilation unit's fat binary every entry the kept GPU cannot run is zeroed in place, and so
is PTX where a cubin for the kept architecture is there. The file keeps its size and layout:
the driver still reads every entry's header and skips what does not fit the GPU, as it
would; the zeros cost nothing once compressed.

`drop_units` goes further, for libraries of template instances (FlashAttention-3 builds one
compilation unit per head dimension and data type, e.g. `flash_fwd_hdim256_fp16_sm90.cu`):
a fat binary whose compilation unit's name (read from the internal symbols of an entry not
stored compressed) matches is zeroed whole. A kernel of a dropped unit then
fails when launched ("no kernel image"), so drop only what the served models never run.

Layout read here (CUDA's fatbin container, as tools that decompress it document it):
the `.nv_fatbin` ELF section holds fat binaries one after another, each a 16-byte header
(magic 0xBA55ED50, u16 version, u16 header size, u64 size of what follows) then entries,
each a header (u16 kind: 1 PTX, 2 ELF; u32 header size at 4; u64 payload size at 8;
u32 architecture at 28, e.g. 90) followed by its payload.
"""

from __future__ import annotations

import mmap
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
UNIT_NAME = re.compile(rb"_INTERNAL_[0-9a-f]{8}_\d+_(\w+?)_cu_[0-9a-f]{8}")
KIND_PTX, KIND_ELF = 1, 2
ELF_MAGIC = b"\x7fELF"

__all__ = ["StripReport", "fatbin_section", "unit_name", "runs_on", "strip_file", "strip_fatbins"]


@dataclass
class StripReport:
    """What `strip_fatbins` found and zeroed in one file."""

    fatbins: int = 0
    kept_whole: int = 0  # fat binaries with nothing zeroed
    entries: int = 0
    zeroed_entries: int = 0
    zeroed_bytes: int = 0
    archs: dict[int, int] = field(default_factory=dict)  # architecture -> payload bytes seen
    dropped_units: list[str] = field(default_factory=list)  # kept-architecture cubins dropped by name

    def add(self, other: "StripReport") -> None:
        for name in ("fatbins", "kept_whole", "entries", "zeroed_entries", "zeroed_bytes"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for arch, size in other.archs.items():
            self.archs[arch] = self.archs.get(arch, 0) + size
        self.dropped_units += other.dropped_units


def fatbin_section(data: bytes | mmap.mmap) -> tuple[int, int] | None:
    """(offset, size) of the `.nv_fatbin` section of a 64-bit little-endian ELF file, or None."""
    if data[:4] != ELF_MAGIC or data[4] != 2 or data[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shnum == 0:
        return None

    def header(index: int) -> tuple[int, int, int]:
        base = shoff + index * shentsize
        name, = struct.unpack_from("<I", data, base)
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        return name, offset, size

    _, names_at, _ = header(shstrndx)
    for index in range(shnum):
        name, offset, size = header(index)
        end = data.find(b"\0", names_at + name)
        if bytes(data[names_at + name:end]) == b".nv_fatbin":
            return offset, size
    return None


def _entries(data: bytes | mmap.mmap, start: int, end: int) -> list[tuple[int, int, int, int, int]]:
    """(kind, arch, entry offset, payload offset, payload size) of one fat binary's entries."""
    out = []
    at = start
    while at + 32 <= end:
        kind, = struct.unpack_from("<H", data, at)
        header_size, = struct.unpack_from("<I", data, at + 4)
        payload, = struct.unpack_from("<Q", data, at + 8)
        arch, = struct.unpack_from("<I", data, at + 28)
        if kind not in (KIND_PTX, KIND_ELF) or header_size < 32 or at + header_size + payload > end:
            break
        out.append((kind, arch, at, at + header_size, payload))
        at += header_size + payload
    return out


def runs_on(kind: int, arch: int, keep_arch: int, has_cubin: bool) -> bool:
    """Whether a GPU of `keep_arch` can use an entry, given whether its fat binary has a cubin
    for `keep_arch`."""
    if kind == KIND_ELF:
        return arch == keep_arch
    return not has_cubin and arch <= keep_arch


def unit_name(payload: bytes) -> str | None:
    """The compilation unit a cubin was built from (its source file's stem), where its symbols say."""
    if not payload.startswith(ELF_MAGIC):
        return None  # stored compressed
    found = UNIT_NAME.search(payload)
    return found.group(1).decode() if found else None


def _unit_dropped(data: bytearray | mmap.mmap, entries: list[tuple[int, int, int, int, int]], drop: re.Pattern[str]) -> str:
    """The name of the fat binary's compilation unit when `drop` matches it, else "". Every entry of a
    fat binary comes from one unit, so a cubin stored compressed is named by another entry beside it."""
    for kind, _, _, payload_at, payload in entries:
        unit = unit_name(bytes(data[payload_at:payload_at + payload])) if kind == KIND_ELF else None
        if unit is not None:
            return unit if drop.search(unit) else ""
    return ""


def strip_fatbins(
    data: bytearray | mmap.mmap, section: tuple[int, int], keep_arch: int = 90, drop_units: re.Pattern[str] | None = None,
) -> StripReport:
    """Zero, inside `section` of `data`, every fat binary entry a GPU of `keep_arch` does not use,
    and the kept cubins of compilation units whose name matches `drop_units`."""
    report = StripReport()
    at, end = section[0], section[0] + section[1]
    while at + 16 <= end:
        magic, = struct.unpack_from("<I", data, at)
        if magic != FATBIN_MAGIC:
            at += 8  # fat binaries are 8-byte aligned; padding between them is skipped
            continue
        header_size, = struct.unpack_from("<H", data, at + 6)
        size, = struct.unpack_from("<Q", data, at + 8)
        body, stop = at + header_size, min(end, at + header_size + size)
        entries = _entries(data, body, stop)
        report.fatbins += 1
        report.entries += len(entries)
        for _, arch, _, _, payload in entries:
            report.archs[arch] = report.archs.get(arch, 0) + payload
        has_cubin = any(kind == KIND_ELF and arch == keep_arch for kind, arch, *_ in entries)
        zeroed = 0
        dropped = drop_units is not None and _unit_dropped(data, entries, drop_units)
        if dropped:
            report.dropped_units.append(dropped)
        for kind, arch, _, payload_at, payload in entries:
            if payload and (dropped or not runs_on(kind, arch, keep_arch, has_cubin)):
                data[payload_at:payload_at + payload] = bytes(payload)
                zeroed += 1
                report.zeroed_bytes += payload
        report.zeroed_entries += zeroed
        report.kept_whole += zeroed == 0
        at = stop
    return report


def strip_file(path: Path, keep_arch: int = 90, drop_units: re.Pattern[str] | None = None) -> StripReport | None:
    """Strip `path` in place; None when it is no ELF file with a `.nv_fatbin` section."""
    with open(path, "r+b") as handle:
        if handle.read(4) != ELF_MAGIC:
            return None
        with mmap.mmap(handle.fileno(), 0) as data:
            section = fatbin_section(data)
            if section is None:
                return None
            report = strip_fatbins(data, section, keep_arch, drop_units)
            data.flush()
            return report
