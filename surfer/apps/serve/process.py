"""Running a model server for `surfer serve`: the GPU check, the process, the
wait until it answers, a clean stop on Ctrl-C / SIGTERM."""

from __future__ import annotations

import asyncio
import shlex
import shutil
import signal
import subprocess
import time

from .plan import ServePlan

ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}

def gpu_problem() -> str | None:
    """None when an NVIDIA GPU is visible, else what is wrong."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"nvidia-smi failed: {exc}"
        if out.returncode == 0 and "GPU" in out.stdout:
            return None
        return f"nvidia-smi lists no GPU ({(out.stderr or out.stdout).strip()[:200]})"
    try:
        import torch

        if torch.cuda.is_available():
            return None
    except ImportError:
        pass
    return "no NVIDIA GPU visible (no nvidia-smi, and torch sees no CUDA device); the engine needs one"


async def wait_until_ready(process: asyncio.subprocess.Process, base_url: str, timeout: float, say, engine: str = "vLLM") -> float:  # type: ignore[no-untyped-def]
    """Poll `base_url/models` until it answers; fail if the process exits or time runs out."""
    import openai

    started = time.monotonic()
    next_note = started + 15
    client = openai.AsyncOpenAI(base_url=base_url, api_key="EMPTY", timeout=5, max_retries=0)
    try:
        while True:
            if process.returncode is not None:
                raise RuntimeError(f"{engine} exited with code {process.returncode} before it was ready (its log is above)")
            try:
                await client.models.list()
                return time.monotonic() - started
            except openai.APIError:
                pass
            now = time.monotonic()
            if now - started > timeout:
                raise TimeoutError(f"{engine} did not answer {base_url}/models within {timeout:.0f} s")
            if now >= next_note:
                say(f"waiting for {engine} to load the model… {now - started:.0f} s")
                next_note = now + 15
            try:
                await asyncio.wait_for(process.wait(), timeout=1.0)
            except TimeoutError:
                pass
    finally:
        await client.close()


def run_line(base_url: str, model: str, profile: str) -> str:
    return f"surfer run \"TASK\" --url URL --base-url {base_url} --model {shlex.quote(model)} --profile {profile}"


def _stop(process: asyncio.subprocess.Process, stopped: list[bool]) -> None:
    stopped.append(True)
    if process.returncode is None:
        process.terminate()


async def serve(plan: ServePlan, base_url: str, model: str, profile: str, timeout: float, say) -> int:  # type: ignore[no-untyped-def]
    process = await asyncio.create_subprocess_exec(*plan.command)
    loop, stopped = asyncio.get_running_loop(), []
    engine = ENGINE_NAMES.get(plan.engine, plan.engine)
    for sig in (signal.SIGINT, signal.SIGTERM):  # stop the engine cleanly, also when SIGINT is ignored (background jobs)
        loop.add_signal_handler(sig, _stop, process, stopped)
    try:
        try:
            seconds = await wait_until_ready(process, base_url, timeout, say, engine)
        except (RuntimeError, TimeoutError) as exc:
            say(f"error: {exc}")
            return 1
        say(f"{engine} is ready after {seconds:.1f} s at {base_url}")
        say(run_line(base_url, model, profile))
        code = await process.wait()
        say(f"{engine} stopped" if stopped else f"{engine} exited with code {code}")
        return 0 if stopped else code
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), timeout=30)
            except TimeoutError:
                process.kill()


