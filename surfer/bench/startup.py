"""Start-up figures for `surfer bench overhead`: how long `surfer --help`
takes, and how long a real `surfer run` takes from the moment its process is
spawned to the first screenshot of a local page reaching the model (the
stand-in server notes when the first policy request arrives; the screenshot
was taken and encoded just before it is sent).

`code` selects the source tree whose `surfer` the spawned processes import
(default: this one), so one run can put two commits side by side."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[2]


def _env(code: Path | None) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(code or HERE), "PYTHONDONTWRITEBYTECODE": "1"}


def help_seconds(code: Path | None = None) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "surfer", "--help"], env=_env(code), capture_output=True, check=True, cwd=code or HERE)
    return time.perf_counter() - started


class _FirstRequest:
    """Stand-in model: notes when the first policy request arrives, then answers at once."""

    def __init__(self) -> None:
        self.first: float | None = None

    def __call__(self, request: Any) -> dict[str, Any]:
        if request.role == "policy" and self.first is None:
            self.first = time.time()
        if request.role == "validator":
            return {"verdict": "accept", "reasons": "ok"}
        return {"thought": "Done.", "notes": "", "action": {"type": "answer", "text": "done"}}


def first_screenshot_seconds(url: str, code: Path | None = None) -> float:
    """Seconds from spawning `surfer run TASK --url URL` to its first policy request."""
    from surfer.models.standin import StandInServer

    responder = _FirstRequest()
    with StandInServer(responder) as server, tempfile.TemporaryDirectory() as tmp:
        spawned = time.time()
        proc = subprocess.run(
            [sys.executable, "-m", "surfer", "run", "What is on the page?", "--url", url, "--base-url", server.base_url,
             "--model", server.model, "--no-validator", "--out", str(Path(tmp) / "run"), "--json"],
            env=_env(code), capture_output=True, text=True, cwd=code or HERE,
        )
        if proc.returncode != 0 or responder.first is None:
            raise RuntimeError(f"surfer run failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
        return responder.first - spawned


def compile_tree(code: Path | None) -> None:
    """Byte-compile a tree's `surfer` as an installation would (pip does): the
    spawned processes write no bytecode, so a tree without it would be
    compiled from source in every run."""
    import compileall

    compileall.compile_dir(str((code or HERE) / "surfer"), quiet=1)


def measure_startup(url: str, runs: int, codes: dict[str, Path | None]) -> dict[str, Any]:
    """Median `--help` and start-to-first-screenshot seconds for each source tree,
    the trees taking turns run by run (so a busy machine slows them alike)."""
    for code in codes.values():
        compile_tree(code)
    samples: dict[str, dict[str, list[float]]] = {name: {"help": [], "first_screenshot": []} for name in codes}
    for _ in range(runs):
        for name, code in codes.items():
            samples[name]["help"].append(help_seconds(code))
            samples[name]["first_screenshot"].append(first_screenshot_seconds(url, code))
    return {
        name: {key: round(statistics.median(values), 3) for key, values in by_key.items()} | {"runs": runs}
        for name, by_key in samples.items()
    }
