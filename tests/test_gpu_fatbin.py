"""The engine wheel sets keep one GPU architecture's code (surfer/bench/gpu/fatbin.py): tested on ELF files
built here with CUDA fat binaries laid out as the driver reads them."""

from __future__ import annotations

import re
import struct
from pathlib import Path

from surfer.bench.gpu.fatbin import FATBIN_MAGIC, KIND_ELF, KIND_PTX, fatbin_section, strip_file, unit_name


def entry(kind: int, arch: int, payload: bytes) -> bytes:
    header = bytearray(64)
    struct.pack_into("<HHIQ", header, 0, kind, 0x0101, 64, len(payload))
    struct.pack_into("<I", header, 28, arch)
    return bytes(header) + payload


def fatbin(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


def cubin(unit: str, size: int = 256) -> bytes:
    name = f"_ZN{len(unit) + 30}_INTERNAL_1a2b3c4d_{len(unit) + 3}_{unit}_cu_5e6f7a8b4cute7productE".encode()
    return (b"\x7fELF" + name).ljust(size, b"\x11")


def elf_with_section(section: bytes, name: bytes = b".nv_fatbin") -> bytes:
    """A 64-bit little-endian ELF file with one named section (and the section-name table)."""
    names = b"\0" + name + b"\0.shstrtab\0"
    section_at = 64
    names_at = section_at + len(section)
    headers_at = (names_at + len(names) + 7) // 8 * 8
    head = bytearray(64)
    head[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", head, 0x28, headers_at)
    struct.pack_into("<HHH", head, 0x3A, 64, 3, 2)
    body = bytes(head) + section + names
    body = body.ljust(headers_at, b"\0")

    def section_header(name_at: int, offset: int, size: int) -> bytes:
        out = bytearray(64)
        struct.pack_into("<I", out, 0, name_at)
        struct.pack_into("<QQ", out, 0x18, offset, size)
        return bytes(out)

    return body + bytes(64) + section_header(1, section_at, len(section)) + section_header(len(name) + 2, names_at, len(names))


def payload_bytes(data: bytes, marker: bytes) -> bytes:
    at = data.index(marker)
    return data[at:at + 256]


def test_keeps_the_architecture_the_gpu_runs(tmp_path: Path) -> None:
    both = fatbin(entry(KIND_ELF, 80, cubin("gemm_a")), entry(KIND_ELF, 90, cubin("gemm_b")),
                  entry(KIND_PTX, 80, b"//ptx gemm".ljust(256, b"p")))
    older_only = fatbin(entry(KIND_ELF, 80, cubin("norm_c")), entry(KIND_PTX, 80, b"//ptx norm".ljust(256, b"q")))
    newer_only = fatbin(entry(KIND_ELF, 100, cubin("mma_d")), entry(KIND_PTX, 100, b"//ptx mma".ljust(256, b"r")))
    lib = tmp_path / "lib.so"
    lib.write_bytes(elf_with_section(both + b"\0" * 8 + older_only + newer_only))
    size = lib.stat().st_size

    report = strip_file(lib, keep_arch=90)

    data = lib.read_bytes()
    assert report is not None and lib.stat().st_size == size
    assert (report.fatbins, report.entries) == (3, 7)
    assert b"gemm_b" in data  # the sm_90 cubin stays
    assert b"gemm_a" not in data and b"//ptx gemm" not in data  # an sm_80 cubin and PTX beside an sm_90 cubin go
    assert b"//ptx norm" in data and b"norm_c" not in data  # PTX the driver can compile for sm_90 stays
    assert b"mma_d" not in data and b"//ptx mma" not in data  # newer architectures cannot run on sm_90
    assert report.archs == {80: 1024, 90: 256, 100: 512}
    assert report.zeroed_entries == 5 and report.kept_whole == 0
    # the layout the driver reads is intact: every entry header still where it was
    section = fatbin_section(data)
    assert section is not None and data[section[0]:section[0] + 4] == struct.pack("<I", FATBIN_MAGIC)


def test_drops_named_template_instances_even_when_stored_compressed(tmp_path: Path) -> None:
    kept = fatbin(entry(KIND_ELF, 80, cubin("flash_fwd_hdim128_bf16_sm90")), entry(KIND_ELF, 90, cubin("flash_fwd_hdim128_bf16_sm90")))
    # the sm_90 cubin of this unit is stored compressed (no ELF magic): its sm_80 neighbour names the unit
    dropped = fatbin(entry(KIND_ELF, 80, cubin("flash_fwd_hdim256_fp16_sm90")),
                     entry(KIND_ELF, 90, b"\x28\xb5\x2f\xfdcompressed".ljust(256, b"z")))
    lib = tmp_path / "flash.so"
    lib.write_bytes(elf_with_section(kept + dropped))

    report = strip_file(lib, keep_arch=90, drop_units=re.compile(r"hdim256_|_fp16_"))

    data = lib.read_bytes()
    assert report is not None and report.dropped_units == ["flash_fwd_hdim256_fp16_sm90"]
    assert b"compressed" not in data
    assert data.count(b"flash_fwd_hdim128_bf16_sm90") == 1  # the kept unit's sm_90 cubin only


def test_unit_names_and_files_without_fat_binaries(tmp_path: Path) -> None:
    assert unit_name(cubin("flash_fwd_combine")) == "flash_fwd_combine"
    assert unit_name(b"\x28\xb5\x2f\xfd") is None
    plain = tmp_path / "plain.so"
    plain.write_bytes(elf_with_section(b"text", name=b".text"))
    assert strip_file(plain) is None
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")
    assert strip_file(script) is None
