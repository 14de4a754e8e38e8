"""The `vllm serve` command for a model family: the profile's serving data as
vLLM flags, checked against the installed vLLM (`vllm serve --help=all`): a
flag that version lacks is left out with a note. Without vLLM, `--dry-run`
assumes the versions in `FLAG_SINCE` for `DEFAULT_VLLM` and says so."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from typing import TYPE_CHECKING, Any


from .lora import LoraOptions, vllm_lora
from .plan import Capabilities, ServePlan, SizeFlags, add_sizes, at_least, given_flags, installed_version, read_help

if TYPE_CHECKING:
    from surfer.models.profiles import Profile

INSTALL_VLLM = "vLLM is not installed: `pip install 'surfer-agent[vllm]'` (Linux with an NVIDIA GPU and CUDA)."
DEFAULT_VLLM = "0.25.1"  # the version `surfer serve` was checked with on an H100
# First vLLM version with each flag surfer may pass (used only when vLLM is not installed).
FLAG_SINCE: dict[str, str] = {
    "--trust-remote-code": "0.1",
    "--max-model-len": "0.1",
    "--max-num-seqs": "0.1",
    "--enable-prefix-caching": "0.2",
    "--limit-mm-per-prompt": "0.5",
    "--mm-processor-kwargs": "0.6",
    "--reasoning-parser": "0.7.1",
    "--guided-decoding-backend": "0.4",
    "--mamba-ssm-cache-dtype": "0.10",
    "--structured-outputs-config": "0.11",
    "--max-num-batched-tokens": "0.1",
    "--gpu-memory-utilization": "0.1",
    "--mm-processor-cache-gb": "0.11",
    "--tensor-parallel-size": "0.1",
    "--data-parallel-size": "0.9",
    "--enable-lora": "0.3",
    "--max-lora-rank": "0.3",
    "--max-loras": "0.3",
    "--lora-modules": "0.3",
    "--api-server-count": "0.9",
}
FLAG_UNTIL: dict[str, str] = {"--guided-decoding-backend": "0.11"}  # removed in this version
SIZE_FLAGS = SizeFlags("--max-model-len", "--max-num-seqs", "--tensor-parallel-size", "--data-parallel-size")
LIMIT_MM_JSON_SINCE = "0.9"  # older versions take 'image=3,video=0'

# ---------------------------------------------------------------------------------------------
# MEASURED SERVING FLAGS — the one place for the vLLM flags that `surfer bench gpu run` showed to
# win for a profile (e.g. the Mamba cache mode and prefix caching for Holotron, the
# batched-token budget). Each entry is {flag: value, or None for a bare switch}; `surfer serve
# --profile NAME` adds them after the family's own flags (checked against the installed vLLM like
# the others), unless the command line after `--` names the flag itself. Left empty until a GPU
# run decides them: put the measured figures and the reason in the docs' model table (docs/guides/serving.md).
# Candidates to measure (vLLM 0.25.1 CacheConfig): --mamba-cache-mode (none / align / all),
# --mamba-block-size, --max-num-batched-tokens; a flag missing from FLAG_SINCE is left out of
# `--dry-run` plans without vLLM installed, so add it there too.
MEASURED_FLAGS: dict[str, dict[str, str | None]] = {
    # Holotron (vLLM 0.25.1, one H100, 64 sessions, `gpu_device.sh levers`): with the default 8,192
    # the encoder cache holds 4 screenshots of 1280x800, and the Mamba 'align' split can round a
    # chunk that stops before an image down to 0 tokens, so requests holding half-read images wait
    # on each other: the engine stalled for 4+ minutes (2 running, 61 waiting, 0 tokens/s; 0.17
    # steps/s). With 32,768: 1.63 (window) and 2.29 (blocks + continuation) steps/s, waiting < 1; the
    # KV cache 42.35 GiB instead of 46.42. With prefix caching off as well, vLLM ran out of memory in
    # Mamba's chunked scan (docs/benchmarks/gpu-levers.md).
    # --gpu-memory-utilization 0.85 (vLLM's 0.92 leaves too little): with sessions 8 screenshots deep
    # (64 sessions, ~22k-token requests, KV use up to 0.99) the engine died at 0.92 of a CUDA
    # out-of-memory error in the same chunked scan (`_state_passing_fwd`, 1.21 GiB asked, 1.17 free),
    # 3 minutes into the load; at 0.85 the same load ran its 200 s window (docs/benchmarks/gpu-sessions.md).
    "holotron": {"--max-num-batched-tokens": "32768", "--gpu-memory-utilization": "0.85"},
    "holo2": {},
    "holo1.5": {},
    "openai": {},
}
# ---------------------------------------------------------------------------------------------
HYBRID_PREFIX_CACHING_SINCE = "0.15"  # 0.14.1 served Holotron without prefix caching

# vLLM's multimodal processor cache (`--mm-processor-cache-gb`, default 4 GiB) keeps each image's processed
# pixel values, so an image that a request repeats (every screenshot of the history the blocks layout
# resends) is not decoded, tiled and normalised again in the API server. Measured (vLLM 0.25.1, one H100,
# 48 sessions 8 screenshots deep, docs/benchmarks/gpu-sessions.md): at 4 GiB the cache held less than one round
# of the sessions' screenshots, its hit rate stayed at 1-4 %, and the API server's preprocessing starved
# the engine (Holotron 3.0 requests running on average, Holo2 5.2); at 32 GiB the hit rate reached 72 %
# and 32.7 ran. So `surfer serve` sizes it to hold every session's screenshots: sessions × images per
# request × PROCESSED_BYTES_PER_PIXEL × the pixels of a screenshot as sent, with CACHE_HEADROOM.
PROCESSED_BYTES_PER_PIXEL = 12  # 16-bit values: Qwen-VL's 3 channels × 2 frames; Nemotron's tiles + thumbnail
CACHE_HEADROOM = 1.25
VLLM_PROCESSOR_CACHE_GIB = 4  # vLLM's default
ASSUMED_SESSIONS = 64  # without --max-concurrency
REFERENCE_SCREEN = (1280, 800)  # surfer's default viewport
HOST_MEMORY_SHARE = 0.25  # the most of the host's memory the cache may take (vLLM keeps up to 2 copies)


class VllmCapabilities(Capabilities):
    """What the vLLM that will run supports: its version and `vllm serve` flags."""

    @classmethod
    def from_table(cls, version: str = DEFAULT_VLLM) -> "VllmCapabilities":
        table = Capabilities.from_since(version, FLAG_SINCE, FLAG_UNTIL)
        return cls(table.version, table.flags, "", "table")


def installed_vllm_version() -> str | None:
    return installed_version("vllm")


def vllm_executable() -> list[str]:
    found = shutil.which("vllm")
    return [found] if found else [sys.executable, "-m", "vllm.entrypoints.cli.main"]


def read_capabilities(version: str) -> VllmCapabilities:
    """Run `vllm serve --help=all` (imports vLLM: seconds) and collect its flags."""
    text = read_help([*vllm_executable(), "serve", "--help=all"], f"vLLM {version}", "--max-model-len")
    return VllmCapabilities.from_help(version, text)  # type: ignore[return-value]


def build_command(
    model: str, profile: Profile, caps: VllmCapabilities, *, host: str = "127.0.0.1", port: int = 8000,
    max_concurrency: int | None = None, max_model_len: int | None = None, extra_args: tuple[str, ...] = (),
    images: int | None = None, host_memory: int | None = None, tensor_parallel: int = 1, data_parallel: int = 1,
    lora: LoraOptions | None = None,
) -> ServePlan:
    """The `vllm serve` command for `model` of `profile`'s family on this vLLM; `images`: the most
    images one request may hold (default the profile's window; the blocks layout needs more);
    `host_memory`: bytes of RAM on the serving machine (default this machine's); `lora`: adapters
    loaded at run time (surfer/apps/serve/lora.py)."""
    serving = profile.serving
    images = images or profile.max_images
    cmd = ["vllm", "serve", model, "--host", host, "--port", str(port)]
    notes: list[str] = []

    def add(flag: str, *values: str, why: str = "") -> None:
        if caps.has(flag):
            cmd.extend([flag, *values])
        else:
            notes.append(f"vLLM {caps.version} has no {flag}; left out{why}")

    if serving.min_vllm and not at_least(caps.version, serving.min_vllm):
        notes.append(f"{profile.name} needs vLLM >= {serving.min_vllm}; found {caps.version}")
    if serving.trust_remote_code:
        add("--trust-remote-code")
    if at_least(caps.version, LIMIT_MM_JSON_SINCE):
        add("--limit-mm-per-prompt", json.dumps({"image": images, "video": 0}))
    else:
        add("--limit-mm-per-prompt", f"image={images},video=0")
    if serving.mm_processor_kwargs:
        add("--mm-processor-kwargs", json.dumps(dict(serving.mm_processor_kwargs)))
    add_sizes(add, SIZE_FLAGS, context=max_model_len or serving.max_model_len, concurrency=max_concurrency,
              tensor_parallel=tensor_parallel, data_parallel=data_parallel)
    if serving.hybrid:
        if "--mamba-ssm-cache-dtype" not in given_flags(extra_args):  # float16 halves the align block (docs: serving)
            add("--mamba-ssm-cache-dtype", "float32", why=" (SSM state stays in the model's dtype)")
        if at_least(caps.version, HYBRID_PREFIX_CACHING_SINCE):
            add("--enable-prefix-caching")
        else:
            notes.append(f"prefix caching left off: vLLM {caps.version} < {HYBRID_PREFIX_CACHING_SINCE} has none for hybrid models")
    else:
        add("--enable-prefix-caching")
    if "--structured-outputs-config" in extra_args:
        pass  # the caller's own structured-outputs settings win
    elif caps.has("--structured-outputs-config"):
        cmd.extend(["--structured-outputs-config", json.dumps({"backend": "xgrammar"})])
    elif caps.has("--guided-decoding-backend"):
        cmd.extend(["--guided-decoding-backend", "xgrammar"])
    else:
        notes.append(f"vLLM {caps.version} has no structured-outputs backend flag; schemas may be ignored")
    if serving.reasoning_parser:
        if caps.knows(serving.reasoning_parser):
            add("--reasoning-parser", serving.reasoning_parser)
        else:
            notes.append(f"vLLM {caps.version} has no reasoning parser {serving.reasoning_parser!r}; left out")
    add_measured_flags(profile.name, extra_args, add)
    if "--mm-processor-cache-gb" not in given_flags(extra_args):
        gib, why = processor_cache_gib(profile, max_concurrency, images, host_memory or host_memory_bytes())
        if why:
            notes.append(why)
        if gib is not None:
            add("--mm-processor-cache-gb", str(gib), why=" (the processor cache stays at vLLM's 4 GiB)")
    plan = ServePlan(cmd, notes, "vllm")
    if lora is not None:
        vllm_lora(lora, profile.name, caps, plan, add, data_parallel)
    cmd.extend(extra_args)
    return plan


def host_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX host: assume a small GPU server
        return 64 << 30


def processor_cache_gib(profile: Profile, sessions: int | None, images: int, host_memory: int) -> tuple[int | None, str]:
    """`--mm-processor-cache-gb` for `sessions` agents whose requests hold up to `images` screenshots
    (see PROCESSED_BYTES_PER_PIXEL): None where vLLM's default holds them, and a note where the host's
    memory caps it or the session count is assumed."""
    from surfer.core.coordinates import Size  # not at import: `surfer --help` stays light (tests/test_startup.py)

    sent = profile.image.target_size(Size(*REFERENCE_SCREEN))
    count = sessions or ASSUMED_SESSIONS
    need = math.ceil(count * images * sent.width * sent.height * PROCESSED_BYTES_PER_PIXEL * CACHE_HEADROOM / (1 << 30))
    if need <= VLLM_PROCESSOR_CACHE_GIB:
        return None, ""
    cap = int(host_memory * HOST_MEMORY_SHARE / 2) >> 30
    wanted = f"the multimodal processor cache needs {need} GiB for {count} sessions × {images} screenshots"
    if need > cap:
        if cap <= VLLM_PROCESSOR_CACHE_GIB:
            return None, f"{wanted}; this host's memory ({host_memory >> 30} GiB) leaves it at vLLM's {VLLM_PROCESSOR_CACHE_GIB} GiB"
        return cap, f"{wanted}; capped at {cap} GiB by this host's memory ({host_memory >> 30} GiB)"
    if sessions is None:
        return need, f"{wanted} (sessions assumed: pass --max-concurrency for your load)"
    return need, ""


def add_measured_flags(profile: str, extra_args: tuple[str, ...], add: Any) -> None:
    """The profile's MEASURED_FLAGS, except those the caller passes itself (`-- --flag ...`)."""
    given = given_flags(extra_args)
    for flag, value in MEASURED_FLAGS.get(profile, {}).items():
        if flag not in given:
            add(flag, *([] if value is None else [value]), why=" (a measured flag this vLLM lacks)")


