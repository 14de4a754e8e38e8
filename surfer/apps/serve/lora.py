"""`surfer serve --lora`: a server that loads and unloads adapters (LoRA) while it runs, so a
trainer's new policy is served between iterations without a restart (`surfer policy load`).

vLLM: `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True` in the engine's environment (it adds the routes
/v1/load_lora_adapter and /v1/unload_lora_adapter), `--enable-lora`, `--max-lora-rank` (the largest
rank it will take: 1, 8, 16, 32, 64, 128, 256, 320 or 512), `--max-loras` (adapters in one batch:
2 by default, so the sessions of the old and the new policy run side by side during a switch), and
the adapters to load at the start (`--lora-modules name=path`). vLLM refuses runtime updating with
more than one API server, which its data parallelism starts by default: `--api-server-count 1` then.

SGLang 0.5.15: `--enable-lora`, `--max-lora-rank`, `--lora-target-modules all` (needed when no
adapter is given at the start), `--lora-paths name=path`; `/load_lora_adapter` and
`/unload_lora_adapter` are always there (outside /v1); a request picks its adapter by `lora_path`.

Which families vLLM serves adapters for is a property of the model class (`SupportsLoRA` in
vllm/model_executor/models/): Qwen3-VL's `Qwen3VLForConditionalGeneration` (Holo2) has it in vLLM
0.25.1 and 0.26.0; Holotron's `NemotronH_Nano_VL_V2` (nano_nemotron_vl.py) does not — only its
language model, `NemotronHForCausalLM` (nemotron_h.py), does — so vLLM stops at start-up with
"NemotronH_Nano_VL_V2 does not support LoRA yet." (vllm/v1/worker/lora_model_runner_mixin.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from surfer.core.errors import ConfigError

from .plan import Capabilities, ServePlan, at_least

VLLM_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vllm/config/lora.py MaxLoRARanks (0.25.1, 0.26.0)
DEFAULT_RANK = 16  # vLLM's own default
DEFAULT_MAX_LORAS = 2
SGLANG_LORAS_PER_BATCH = 8  # SGLang's default --max-loras-per-batch (the base model's requests count as one)
# Profiles whose architecture vLLM serves no adapter for, checked up to LORA_CHECKED_UNTIL.
NO_LORA_ON_VLLM = {
    "holotron": "Holotron's architecture NemotronH_Nano_VL_V2 (vllm/model_executor/models/nano_nemotron_vl.py) does "
                "not implement SupportsLoRA in vLLM 0.25.1 and 0.26.0 (its language model NemotronHForCausalLM does): "
                "vLLM stops at start-up with 'NemotronH_Nano_VL_V2 does not support LoRA yet.'. Serve adapters of "
                "Holo2 (Qwen3-VL) on vLLM, or try --engine sglang",
}
LORA_CHECKED_UNTIL = "0.26.0"


@dataclass(frozen=True)
class LoraOptions:
    """Runtime adapters for `surfer serve`: those to load at the start (name, path), the largest rank,
    and how many adapters one batch of the engine may mix."""

    adapters: tuple[tuple[str, str], ...] = ()
    max_rank: int = DEFAULT_RANK
    max_loras: int = DEFAULT_MAX_LORAS

    @classmethod
    def parse(cls, adapters: list[str] | None, max_rank: int, max_loras: int) -> "LoraOptions":
        pairs = []
        for item in adapters or []:
            name, eq, path = item.partition("=")
            if not eq or not name.strip() or not path.strip():
                raise ConfigError(f"--adapter takes NAME=PATH (the adapter's name and its directory), got {item!r}")
            if "@" in name:
                raise ConfigError(f"an adapter name holds no '@' (policies are written NAME@VERSION), got {name!r}")
            pairs.append((name.strip(), path.strip()))
        if len({name for name, _ in pairs}) < len(pairs):
            raise ConfigError("--adapter names one adapter twice")
        if max_rank < 1 or max_loras < 1:
            raise ConfigError(f"--max-lora-rank and --max-loras must be at least 1, got {max_rank} and {max_loras}")
        return cls(tuple(pairs), max_rank, max_loras)


def vllm_lora(lora: LoraOptions, profile: str, caps: Capabilities, plan: ServePlan, add: Callable[..., None],
              data_parallel: int) -> None:
    """The flags and environment of runtime adapters on vLLM (see the module docstring)."""
    if profile in NO_LORA_ON_VLLM:
        if not at_least(caps.version, _next(LORA_CHECKED_UNTIL)):
            raise ConfigError(f"--lora: {NO_LORA_ON_VLLM[profile]}")
        plan.notes.append(f"--lora: {NO_LORA_ON_VLLM[profile]} (checked up to vLLM {LORA_CHECKED_UNTIL}; "
                          f"this is {caps.version})")
    if lora.max_rank not in VLLM_RANKS:
        raise ConfigError(f"--max-lora-rank must be one of {', '.join(map(str, VLLM_RANKS))} on vLLM, got {lora.max_rank}")
    plan.env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
    add("--enable-lora")
    add("--max-lora-rank", str(lora.max_rank))
    add("--max-loras", str(lora.max_loras))
    if lora.adapters:
        add("--lora-modules", *(f"{name}={path}" for name, path in lora.adapters))
    if data_parallel > 1:
        add("--api-server-count", "1", why=" (vLLM refuses runtime adapter loading with several API servers)")


def sglang_lora(lora: LoraOptions, profile: str, plan: ServePlan, add: Callable[..., None]) -> None:
    """The flags of runtime adapters on SGLang (see the module docstring)."""
    add("--enable-lora")
    add("--max-lora-rank", str(lora.max_rank))
    if lora.adapters:
        add("--lora-paths", *(f"{name}={path}" for name, path in lora.adapters))
    else:  # without an adapter to read them from, SGLang needs the rank and the modules given
        add("--lora-target-modules", "all")
    if lora.max_loras + 1 > SGLANG_LORAS_PER_BATCH:
        add("--max-loras-per-batch", str(lora.max_loras + 1))
    if profile in NO_LORA_ON_VLLM:
        plan.notes.append(f"--lora with SGLang for {profile}: SGLang applies adapters by module name; "
                          "not checked on a GPU with this family")


def _next(version: str) -> str:
    """The version just after `version` (0.26.0 -> 0.26.1)."""
    parts = version.split(".")
    return ".".join([*parts[:-1], str(int(parts[-1]) + 1)])

