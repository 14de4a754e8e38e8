"""What `surfer serve` runs: a command line and the notes about it, for any engine."""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass, field
from typing import Callable, Mapping

from surfer.core.errors import ConfigError

_FLAG = re.compile(r"(?<![\w-])(--[a-z0-9][a-z0-9.-]*[a-z0-9])")


@dataclass
class ServePlan:
    command: list[str]
    notes: list[str] = field(default_factory=list)
    engine: str = "vllm"
    env: dict[str, str] = field(default_factory=dict)  # set for the engine's process (a replica's CUDA_VISIBLE_DEVICES)

    @property
    def shell(self) -> str:
        prefix = "".join(f"{key}={shlex.quote(value)} " for key, value in self.env.items())
        return prefix + shlex.join(self.command)


@dataclass(frozen=True)
class GpuLayout:
    """How `surfer serve` spreads a model over GPUs: `gpus` in all, `tp` per model copy (tensor
    parallelism), the copies as replicas (one server each, surfer places the sessions) or as the
    engine's data parallelism behind one endpoint (`data_parallel`)."""

    gpus: int = 1
    tp: int = 1
    data_parallel: bool = False

    def __post_init__(self) -> None:
        if self.gpus < 1 or self.tp < 1:
            raise ConfigError(f"--gpus and --tp must be at least 1, got {self.gpus} and {self.tp}")
        if self.gpus % self.tp:
            raise ConfigError(f"--gpus {self.gpus} is not a whole number of model copies of --tp {self.tp} GPUs")
        if self.data_parallel and self.copies < 2:
            raise ConfigError(f"--data-parallel needs two model copies or more: --gpus {self.gpus} with --tp {self.tp} makes one")

    @property
    def copies(self) -> int:
        return self.gpus // self.tp

    @property
    def replicas(self) -> int:
        """Engine processes (servers) to start."""
        return 1 if self.data_parallel else self.copies

    def devices(self, replica: int) -> str:
        """CUDA_VISIBLE_DEVICES of replica number `replica` (from 0)."""
        per = self.gpus if self.data_parallel else self.tp
        return ",".join(str(d) for d in range(replica * per, (replica + 1) * per))


def version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in re.split(r"[.+-]", version):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


def at_least(version: str, minimum: str) -> bool:
    return version_tuple(version) >= version_tuple(minimum)


@dataclass(frozen=True)
class SizeFlags:
    """An engine's names for the flags that size a server alike on every engine."""

    context: str
    concurrency: str
    tensor_parallel: str
    data_parallel: str


def add_sizes(add: Callable[..., None], names: SizeFlags, *, context: int | None, concurrency: int | None,
              tensor_parallel: int, data_parallel: int) -> None:
    """The context length, concurrent sequences, and parallelism (`add(flag, value)` checks each flag)."""
    if context:
        add(names.context, str(context))
    if concurrency:
        add(names.concurrency, str(concurrency))
    if tensor_parallel > 1:  # a model that does not fit one GPU
        add(names.tensor_parallel, str(tensor_parallel))
    if data_parallel > 1:  # the engine's own copies behind this one endpoint
        add(names.data_parallel, str(data_parallel))


def installed_version(distribution: str) -> str | None:
    """The installed version of an engine's package, or None."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def given_flags(extra_args: tuple[str, ...]) -> set[str]:
    """The flags the command line after `--` names itself (`--flag value` or `--flag=value`)."""
    return {arg.split("=", 1)[0] for arg in extra_args if arg.startswith("--")}


@dataclass(frozen=True)
class Capabilities:
    """What the engine that will run supports: its version and flags, read from its
    help text, or assumed from a table of the first version with each flag."""

    version: str
    flags: frozenset[str]
    help_text: str = ""
    source: str = "help"  # "help" (read from the engine's --help) or "table"

    @classmethod
    def from_help(cls, version: str, help_text: str) -> "Capabilities":
        return cls(version, frozenset(_FLAG.findall(help_text)), help_text, "help")

    @classmethod
    def from_since(cls, version: str, since: Mapping[str, str], until: Mapping[str, str] | None = None) -> "Capabilities":
        flags = {f for f, first in since.items() if at_least(version, first)}
        flags -= {f for f, gone in (until or {}).items() if at_least(version, gone)}
        return cls(version, frozenset(flags), "", "table")

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def knows(self, word: str) -> bool:
        """Does the help text mention `word` (e.g. a reasoning parser name)? True without help text."""
        return self.source != "help" or word in self.help_text


def read_help(command: list[str], what: str, marker: str) -> str:
    """The engine's help text (it imports the engine: seconds); `marker`: a flag it must show."""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"could not run `{shlex.join(command)}` to read {what}'s flags: {exc}") from None
    if proc.returncode != 0 or marker not in proc.stdout:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ConfigError(f"`{shlex.join(command)}` failed (exit {proc.returncode}): {' | '.join(tail)}")
    return proc.stdout
