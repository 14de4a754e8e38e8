"""Running a model server for `surfer serve`: the GPU check, the process, the
wait until it answers, a clean stop on Ctrl-C / SIGTERM."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import signal
import subprocess
import time

from surfer.core.errors import ConfigError

from .plan import ServePlan

ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
STOP_GRACE = 30.0  # seconds an engine's processes have to exit after SIGTERM, before SIGKILL

def gpu_problem(gpus: int = 1) -> str | None:
    """None when `gpus` NVIDIA GPUs are visible, else what is wrong."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"nvidia-smi failed: {exc}"
        found = out.stdout.count("GPU ") if out.returncode == 0 else 0
        if found >= gpus:
            return None
        if found:
            return f"{gpus} GPUs asked for, nvidia-smi lists {found}"
        return f"nvidia-smi lists no GPU ({(out.stderr or out.stdout).strip()[:200]})"
    try:
        import torch

        if torch.cuda.is_available():
            count = torch.cuda.device_count()
            return None if count >= gpus else f"{gpus} GPUs asked for, torch sees {count}"
    except ImportError:
        pass
    return "no NVIDIA GPU visible (no nvidia-smi, and torch sees no CUDA device); the engine needs one"


def check_ports(port: int, replicas: int) -> list[int]:
    """The ports of the replicas (`port`, `port`+1, ...): a ConfigError where one is not a TCP port."""
    ports = list(range(port, port + replicas))
    if port < 1 or ports[-1] > 65535:
        what = f"--port {port}" if replicas == 1 else f"--port {port} with {replicas} replicas (ports {port}-{ports[-1]})"
        raise ConfigError(f"{what}: a port is a number from 1 to 65535")
    return ports


def port_in_use(host: str, ports: list[int]) -> None:
    """A ConfigError where the engine could not listen on `host`: a port something already listens on (the
    engine failed after its start, or another server there answered the wait as if it were this one), or an
    address that is not this machine's."""
    import errno
    import socket

    for port in ports:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except socket.gaierror as exc:
            raise ConfigError(f"--host {host}: {exc.strerror}") from None
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the engines bind: a closed server's port is free
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise ConfigError(f"port {port} of {host} is in use (a server already listens there): choose "
                                      "another with --port") from None
                raise ConfigError(f"--host {host}: cannot listen there ({exc.strerror})") from None


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


def batch_line(base_urls: list[str], model: str, profile: str) -> str:
    """The `surfer batch` line for several servers: every --base-url, each session placed on one."""
    urls = " ".join(f"--base-url {url}" for url in base_urls)
    return f"surfer batch tasks.jsonl --out out {urls} --model {shlex.quote(model)} --profile {profile}"


def _signal_engine(process: asyncio.subprocess.Process, sig: int) -> None:
    """`sig` to the engine's whole process group: an engine's workers (SGLang's tokenizer, its data-parallel
    controller and schedulers; vLLM's engine cores) are its children, and some outlive their parent's exit
    still answering on its port, so the next `surfer serve` found the port taken."""
    try:
        os.killpg(process.pid, sig)  # the engine leads its own group (start_new_session)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


async def _end_engine(process: asyncio.subprocess.Process, grace: float = STOP_GRACE) -> None:
    """Stop one engine and every process of its group: SIGTERM, up to `grace` seconds for all of them to exit,
    then SIGKILL to what is left."""
    _signal_engine(process, signal.SIGTERM)
    deadline = time.monotonic() + grace
    try:
        await asyncio.wait_for(process.wait(), timeout=grace)
    except TimeoutError:
        pass
    while _group_alive(process.pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    _signal_engine(process, signal.SIGKILL)
    await process.wait()


def _stop(process: asyncio.subprocess.Process, stopped: list[bool]) -> None:
    stopped.append(True)
    if process.returncode is None:
        _signal_engine(process, signal.SIGTERM)


async def serve(plan: ServePlan, base_url: str, model: str, profile: str, timeout: float, say) -> int:  # type: ignore[no-untyped-def]
    return await serve_replicas([plan], [base_url], model, profile, timeout, say)


async def serve_replicas(plans: list[ServePlan], base_urls: list[str], model: str, profile: str, timeout: float, say) -> int:  # type: ignore[no-untyped-def]
    """Start every plan (a replica each, at its base URL), wait until all answer, say the line to use them, and
    run until one exits or a signal stops them all."""
    # each engine in its own process group, so that its stop reaches every worker it starts (a terminal's Ctrl-C
    # reaches surfer, which stops them)
    processes = [await asyncio.create_subprocess_exec(*plan.command, env={**os.environ, **plan.env} if plan.env else None,
                                                      start_new_session=True)
                 for plan in plans]
    loop, stopped = asyncio.get_running_loop(), []
    engine = ENGINE_NAMES.get(plans[0].engine, plans[0].engine)
    for sig in (signal.SIGINT, signal.SIGTERM):  # stop the engines cleanly, also when SIGINT is ignored (background jobs)
        loop.add_signal_handler(sig, _stop_all, processes, stopped)
    try:
        try:
            waits = [wait_until_ready(p, url, timeout, say, engine) for p, url in zip(processes, base_urls)]
            seconds = max(await asyncio.gather(*waits))
        except (RuntimeError, TimeoutError) as exc:
            say(f"error: {exc}")
            return 1
        where = base_urls[0] if len(base_urls) == 1 else f"{len(base_urls)} replicas ({', '.join(base_urls)})"
        say(f"{engine} is ready after {seconds:.1f} s at {where}")
        say(run_line(base_urls[0], model, profile) if len(base_urls) == 1 else batch_line(base_urls, model, profile))
        waiting = [asyncio.ensure_future(p.wait()) for p in processes]
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        code = next(iter(done)).result()
        if len(processes) > 1 and not stopped:
            say(f"a replica of {engine} exited with code {code}: stopping the others")
        say(f"{engine} stopped" if stopped else f"{engine} exited with code {code}")
        return 0 if stopped else code
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await asyncio.gather(*(_end_engine(process) for process in processes))


def _stop_all(processes: list[asyncio.subprocess.Process], stopped: list[bool]) -> None:
    for process in processes:
        _stop(process, stopped)
