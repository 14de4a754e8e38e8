"""The `python -m sglang.launch_server` command for a model family: the same
profile data as vLLM's, in SGLang's flags, checked against the installed SGLang
(`--help`); without SGLang, `--dry-run` assumes the versions in `FLAG_SINCE`.

What SGLang brings to a hybrid (Mamba-2 + attention) model is its Mamba radix
cache: the state is kept where a request ends (`no_buffer`; `extra_buffer` also
keeps states every `--mamba-track-interval` tokens of a prefill), so the next
request of a session that extends the last one — the same conversation plus a
screenshot and a few lines, or a role continuing the policy — resumes from it,
to the token. SGLang 0.5.15 picks that strategy (and turns the overlap
scheduler off, which `no_buffer` needs) only for the text architecture
`NemotronHForCausalLM`; for Holotron's `NemotronH_Nano_VL_V2` both are passed
here. `extra_buffer` is refused for Holotron: SGLang's scheduler (0.5.15, and
upstream's code as of late 2026) reads the Mamba chunk size from the VL
wrapper's configuration, which has none (64 by default), while the kernel
takes the language model's (128), so the states it asks for lie past those
computed (a run with it finished no request; the engines page of the
benchmarks)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from .lora import LoraOptions, sglang_lora
from surfer.core.errors import ConfigError

from .plan import Capabilities, ServePlan, SizeFlags, add_sizes, given_flags, installed_version, read_help

if TYPE_CHECKING:
    from surfer.models.profiles import Profile

INSTALL_SGLANG = ("SGLang is not installed: `pip install 'sglang[all]'` on a Linux machine with an NVIDIA GPU "
                  "(SGLang pins its own torch and transformers: give it its own environment).")
# Where SGLang (>= 0.5.15) finds processors that replace its own for an architecture (surfer/models/sglang_processors)
PROCESSORS_ENV = "SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE"
DEFAULT_SGLANG = "0.5.15"  # the version `surfer serve --engine sglang` was checked with on an H100
# First SGLang version with each flag surfer may pass (used only when SGLang is not installed).
FLAG_SINCE: dict[str, str] = {
    "--model-path": "0.1",
    "--trust-remote-code": "0.1",
    "--context-length": "0.1",
    "--max-running-requests": "0.1",
    "--enable-metrics": "0.2",
    "--enable-cache-report": "0.3",
    "--grammar-backend": "0.3",
    "--limit-mm-data-per-request": "0.5.3",
    "--mamba-ssm-dtype": "0.5",
    "--mamba-scheduler-strategy": "0.5.5",
    "--mamba-radix-cache-strategy": "0.5.15",
    "--mamba-full-memory-ratio": "0.5.15",
    "--disable-overlap-schedule": "0.3",
    "--reasoning-parser": "0.4.6",
    "--tokenizer-worker-num": "0.5.15",
    "--tp-size": "0.1",
    "--dp-size": "0.1",
    "--enable-lora": "0.4.9",
    "--max-lora-rank": "0.4.9",
    "--lora-target-modules": "0.4.9",
    "--lora-paths": "0.3",
    "--max-loras-per-batch": "0.3",
}
SIZE_FLAGS = SizeFlags("--context-length", "--max-running-requests", "--tp-size", "--dp-size")
# `no_buffer`: the Mamba state where each request ends (no extra state memory; the overlap scheduler off).
MAMBA_STRATEGY = "no_buffer"
STRATEGY_FLAGS = ("--mamba-radix-cache-strategy", "--mamba-scheduler-strategy")
# Profiles whose architecture SGLang's intermediate-state tracking (`extra_buffer`) misreads (0.5.15 and upstream's
# code read late 2026; a later fix can be let through by version here):
# the VL wrapper (NemotronH_Nano_VL_V2) has no mamba_chunk_size of its own, so the scheduler assumes 64 where the
# kernel uses the language model's 128 (scheduler: mamba chunk size from the outer config; kernel: the text config).
EXTRA_BUFFER_BROKEN = frozenset({"holotron"})

# MEASURED SERVING FLAGS for SGLang, as vLLM's (surfer/apps/serve/vllm.py): what `surfer bench gpu run`
# showed to win for a profile, added after the family's flags unless the command line names them.
MEASURED_FLAGS: dict[str, dict[str, str | None]] = {
    # SGLang 0.5.15 tiles and normalises each request's screenshots in its tokenizer process, on that process's
    # event loop: with one (the default), 64 Holotron sessions kept at most 2 requests running (0.48 steps/s,
    # one H200); with 6, 44 ran and 18 waited (1.22 steps/s, one H100). Docs: benchmarks, "Engines for the hybrid".
    # --mamba-full-memory-ratio 3 (SGLang's 0.9 splits the memory left after the weights 0.9 : 1 between the Mamba
    # state pool and the KV cache, and runs at most a third of the pool's states at once): on an H100 the default
    # ran 45 Holotron requests at once (137 states of 142 MB in float32; KV cache 8 % used) and queued the rest of
    # 64 sessions, and a queue evicts the states of the sessions paused between calls (hit 0.37, 4.28 steady
    # steps/s); at 3, 221 states, 73 at once, nothing queued: hit 0.84, 7.24 steps/s, the KV cache 447k tokens
    # (`conversation`, one tile, tokens in). Sessions of over ~20k tokens each want the KV cache back (`-- --mamba-
    # full-memory-ratio 0.9`). Docs: benchmarks, "Surfer against the bare replay".
    "holotron": {"--tokenizer-worker-num": "6", "--mamba-full-memory-ratio": "3"},
    "holo2": {"--tokenizer-worker-num": "6"},
    "holo1.5": {},
    "openai": {},
}


class SglangCapabilities(Capabilities):
    """What the SGLang that will run supports: its version and launch_server flags."""

    @classmethod
    def from_table(cls, version: str = DEFAULT_SGLANG) -> "SglangCapabilities":
        table = Capabilities.from_since(version, FLAG_SINCE)
        return cls(table.version, table.flags, "", "table")


def installed_sglang_version() -> str | None:
    return installed_version("sglang")


def sglang_executable() -> list[str]:
    return [sys.executable, "-m", "sglang.launch_server"]


def read_capabilities(version: str) -> SglangCapabilities:
    """Run `python -m sglang.launch_server --help` (imports SGLang: seconds) and collect its flags."""
    text = read_help([*sglang_executable(), "--help"], f"SGLang {version}", "--model-path")
    return SglangCapabilities.from_help(version, text)  # type: ignore[return-value]


def refuse_broken_strategy(profile: str, version: str, extra_args: tuple[str, ...]) -> None:
    """ConfigError for a Mamba strategy on the command line that this SGLang runs wrong for `profile`."""
    if profile not in EXTRA_BUFFER_BROKEN:
        return
    for n, arg in enumerate(extra_args):
        flag, _, value = arg.partition("=")
        if flag in STRATEGY_FLAGS:
            value = value or (extra_args[n + 1] if n + 1 < len(extra_args) else "")
            if value.startswith("extra_buffer"):
                raise ConfigError(
                    f"{flag} {value} is refused for {profile} on SGLang {version}: it reads the Mamba chunk size from "
                    "the VL configuration (64) where the kernel uses the language model's (128), and the run hangs "
                    f"or mixes requests' states; leave the flag out ({MAMBA_STRATEGY}, surfer's default)")


def build_command(
    model: str, profile: Profile, caps: Capabilities, *, host: str = "127.0.0.1", port: int = 8000,
    max_concurrency: int | None = None, max_model_len: int | None = None, extra_args: tuple[str, ...] = (),
    images: int | None = None, tensor_parallel: int = 1, data_parallel: int = 1, lora: LoraOptions | None = None,
) -> ServePlan:
    """The SGLang command for `model` of `profile`'s family: the OpenAI-compatible server with
    JSON-schema outputs, metrics and cached-token reports on, the image limit surfer's layouts
    need, and for a hybrid the Mamba radix cache at token granularity with float32 SSM state."""
    serving = profile.serving
    images = images or profile.max_images
    given = given_flags(extra_args)
    refuse_broken_strategy(profile.name, caps.version, extra_args)
    cmd = ["python", "-m", "sglang.launch_server", "--model-path", model, "--host", host, "--port", str(port)]
    notes: list[str] = []

    def add(flag: str, *values: str, why: str = "") -> None:
        if flag in given:
            return  # the command line after `--` sets it itself
        if caps.has(flag):
            cmd.extend([flag, *values])
        else:
            notes.append(f"SGLang {caps.version} has no {flag}; left out{why}")

    if serving.trust_remote_code:
        add("--trust-remote-code")
    add("--limit-mm-data-per-request", json.dumps({"image": images}))
    add_sizes(add, SIZE_FLAGS, context=max_model_len or serving.max_model_len, concurrency=max_concurrency,
              tensor_parallel=tensor_parallel, data_parallel=data_parallel)
    add("--enable-metrics", why=" (surfer bench gpu and --concurrency auto read /metrics)")
    add("--enable-cache-report", why=" (responses will not say how many prompt tokens were cached)")
    add("--grammar-backend", "xgrammar", why=" (JSON schemas may be ignored)")
    if serving.hybrid:
        strategy = next((f for f in STRATEGY_FLAGS if caps.has(f)), None)
        if strategy is None:
            notes.append(f"SGLang {caps.version} has no Mamba radix cache strategy flag: the hybrid's prefix is not "
                         "reused to the token (SGLang >= 0.5.5 has it)")
        elif not given & set(STRATEGY_FLAGS):
            cmd.extend([strategy, MAMBA_STRATEGY])
            add("--disable-overlap-schedule", why=f" ({MAMBA_STRATEGY} needs the overlap scheduler off)")
        add("--mamba-ssm-dtype", "float32", why=" (SSM state stays in the model's dtype)")
    if serving.reasoning_parser:
        notes.append(f"SGLang has no {serving.reasoning_parser!r} reasoning parser; surfer turns thinking off per request")
    if serving.mm_processor_kwargs:
        notes.append(f"{profile.name}'s processor settings {dict(serving.mm_processor_kwargs)} are vLLM's; "
                     "surfer resizes the screenshots itself, so SGLang's defaults apply")
    for flag, value in MEASURED_FLAGS.get(profile.name, {}).items():
        add(flag, *([] if value is None else [value]), why=" (a measured flag this SGLang lacks)")
    plan = ServePlan(cmd, notes, "sglang")
    if lora is not None:  # adapters loaded at run time (surfer/apps/serve/lora.py)
        sglang_lora(lora, profile.name, plan, add)
    cmd.extend(extra_args)
    if serving.sglang_processors:  # Holotron's processor from surfer (surfer/models/sglang_processors)
        plan.env[PROCESSORS_ENV] = serving.sglang_processors
        image_cache(plan, cmd)
    return plan


def image_cache(plan: ServePlan, cmd: list[str]) -> None:
    """Surfer's processor keeps each tokenizer worker's processed screenshots up to a bound in bytes: the
    bound given in the environment is checked and passed on (shown by --dry-run), and the notes say what
    it comes to over the workers."""
    import os

    from surfer.models.sglang_processors.image_cache import CACHE_ENV, cache_bytes

    try:
        limit = cache_bytes(os.environ)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if CACHE_ENV in os.environ:
        plan.env[CACHE_ENV] = os.environ[CACHE_ENV].strip()
    if not limit:
        return
    workers = 1
    for n, arg in enumerate(cmd):  # the last one given counts: `--tokenizer-worker-num N` or `=N`
        value = arg.partition("=")[2] if arg.startswith("--tokenizer-worker-num=") else (
            cmd[n + 1] if arg == "--tokenizer-worker-num" and n + 1 < len(cmd) else "")
        workers = int(value) if value.isdigit() else workers
    gib = limit / (1 << 30)
    plan.notes.append(f"each of SGLang's {workers} tokenizer worker(s) keeps up to {gib:g} GiB of processed "
                      f"screenshots, up to {gib * workers:g} GiB of host memory in all ({CACHE_ENV}; 0 turns it off)")
