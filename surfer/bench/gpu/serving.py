"""Serving for `surfer bench gpu`: a vLLM server started with `surfer serve`
for one model directory, stopped, and what its log and the GPU say."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Random weights: keep whitespace between JSON tokens from running on (see models.py): each engine's own way.
STRUCTURED = json.dumps({"backend": "xgrammar", "disable_any_whitespace": True})
DUMMY_ARGS = {
    "vllm": ("--load-format", "dummy", "--structured-outputs-config", STRUCTURED),
    "sglang": ("--load-format", "dummy", "--constrained-json-disable-any-whitespace"),
}


def _httpx() -> Any:
    from surfer.models.json_http import http_library

    return http_library()


# -- serving ---------------------------------------------------------------------------


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    base_url: str
    log: Path
    start_seconds: float  # from `vllm serve` starting to the server answering /v1/models


def serve_model(shape: str, model_dir: Path, port: int, max_concurrency: int, log: Path, timeout: float,
                extra: tuple[str, ...] = (), layout: str = "window", images: int | None = None,
                engine: str = "vllm") -> Served:
    """Start `surfer serve --engine ENGINE` for a dummy-weight model directory and wait until it
    answers; `images`: the most images one request may hold (default: what `layout` needs)."""
    httpx = _httpx()
    command = [
        sys.executable, "-m", "surfer", "serve", str(model_dir), "--profile", shape, "--engine", engine, "--port", str(port),
        "--max-concurrency", str(max_concurrency), "--timeout", str(timeout), "--prompt-layout", layout,
        *(["--max-images", str(images)] if images else []), "--", *DUMMY_ARGS[engine], *extra,
    ]
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    handle = log.open("wb")
    process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + timeout
    launched: float | None = None
    while True:
        if launched is None and b"starting: " in log.read_bytes():
            launched = time.monotonic()
        if process.poll() is not None:
            raise RuntimeError(f"surfer serve exited with code {process.returncode}: {tail(log)}")
        try:
            if httpx.get(base_url + "/models", timeout=2).status_code == 200:
                return Served(process, base_url, log, time.monotonic() - (launched or time.monotonic()))
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            stop(process)
            raise RuntimeError(f"vLLM did not answer within {timeout:.0f} s: {tail(log)}")
        time.sleep(1.0)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def tail(log: Path, lines: int = 25) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


_LOG_FACTS = {
    "weights_gib": re.compile(r"Model loading took ([\d.]+) GiB"),
    "kv_cache_gib": re.compile(r"Available KV cache memory: ([\d.]+) GiB"),
    "kv_cache_tokens": re.compile(r"GPU KV cache size: ([\d,]+) tokens"),
    "max_concurrency_at_max_len": re.compile(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x"),
    "mamba_cache_mode": re.compile(r"mamba_cache_mode[=: ]+'?(\w+)"),
    # SGLang's start-up log
    "sglang_weights_gib": re.compile(r"Load weight end\..*?mem usage=([\d.]+) GB"),
    "sglang_kv_cache_tokens": re.compile(r"max_total_num_tokens=(\d+)"),
    "sglang_mamba_cache_slots": re.compile(r"Mamba Cache is allocated\. max_mamba_cache_size: (\d+)"),
    "sglang_max_running_requests": re.compile(r"max_running_requests=(\d+)"),
}


def log_facts(text: str) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for name, pattern in _LOG_FACTS.items():
        match = pattern.search(text)
        if match:
            value = match.group(1).replace(",", "")
            facts[name] = value if name == "mamba_cache_mode" else float(value)
    return facts


def gpu_memory() -> dict[str, Any] | None:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    out = subprocess.run([smi, "--query-gpu=name,memory.used,memory.total", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0 or not out.stdout.strip():
        return None
    name, used, total = [p.strip() for p in out.stdout.strip().splitlines()[0].split(",")]
    return {"gpu": name, "used_mib": int(used), "total_mib": int(total)}


