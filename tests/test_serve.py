"""`surfer serve`: the vllm command per family, version gating against the
installed vLLM's help text, the wait-until-ready loop, clear errors."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.testing
from typer.testing import CliRunner

from surfer.apps import serve as serve_mod
from surfer.apps.serve import sglang as serve_sglang
from surfer.apps.serve import vllm as serve_vllm
from surfer.apps.cli import app
from surfer.apps.serve import ServePlan, VllmCapabilities, build_command, serve
from surfer.models.profiles import get_profile

MM3 = json.dumps({"image": 3, "video": 0})
XGRAMMAR = json.dumps({"backend": "xgrammar"})


def dry_run(*args: str) -> list[str]:
    result = CliRunner().invoke(app, ["serve", "--dry-run", *args])
    assert result.exit_code == 0, result.output
    return result.stdout.strip().splitlines()[-1]


GIB = 1 << 30


@functools.cache
def _command() -> Any:
    return typer.main.get_command(app)


@pytest.fixture(autouse=True)
def no_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    # surfer's click command built once for the module's invocations (CliRunner built all its commands each time: ~0.3 s)
    monkeypatch.setattr(typer.testing, "_get_command", lambda given: _command() if given is app else typer.main.get_command(given))
    monkeypatch.setattr(serve_vllm, "installed_vllm_version", lambda: None)
    monkeypatch.setattr(serve_sglang, "installed_sglang_version", lambda: None)
    monkeypatch.setattr(serve_vllm, "host_memory_bytes", lambda: 128 * GIB)  # a GPU server's, whatever runs the tests


def test_dry_run_holotron_12b() -> None:
    import shlex

    line = dry_run("Hcompany/Holotron-12B", "--max-concurrency", "100")
    assert shlex.split(line) == [
        "vllm", "serve", "Hcompany/Holotron-12B", "--host", "127.0.0.1", "--port", "8000", "--trust-remote-code",
        "--limit-mm-per-prompt", MM3, "--max-model-len", "65536", "--max-num-seqs", "100",
        "--mamba-ssm-cache-dtype", "float32", "--enable-prefix-caching", "--structured-outputs-config", XGRAMMAR,
        "--max-num-batched-tokens", "32768", "--gpu-memory-utilization", "0.85", "--mm-processor-cache-gb", "5",
    ]


def test_dry_run_holo2_8b() -> None:
    import shlex

    line = dry_run("Hcompany/Holo2-8B", "--port", "9000")
    assert shlex.split(line) == [
        "vllm", "serve", "Hcompany/Holo2-8B", "--host", "127.0.0.1", "--port", "9000", "--limit-mm-per-prompt", MM3,
        "--max-model-len", "65536", "--enable-prefix-caching", "--structured-outputs-config", XGRAMMAR,
        "--reasoning-parser", "holo2",
    ]


def test_dry_run_holo1_5_7b_with_passthrough_args() -> None:
    import shlex

    line = dry_run("Hcompany/Holo1.5-7B", "--profile", "holo1.5", "--max-model-len", "8192", "--", "--load-format", "dummy")
    assert shlex.split(line) == [
        "vllm", "serve", "Hcompany/Holo1.5-7B", "--host", "127.0.0.1", "--port", "8000", "--limit-mm-per-prompt", MM3,
        "--mm-processor-kwargs", json.dumps({"max_pixels": 1003520}), "--max-model-len", "8192",
        "--enable-prefix-caching", "--structured-outputs-config", XGRAMMAR, "--load-format", "dummy",
    ]


def test_dry_run_without_vllm_says_which_version_it_assumed() -> None:
    result = CliRunner().invoke(app, ["serve", "Hcompany/Holotron-12B", "--dry-run", "--vllm-version", "0.14.1"])
    assert result.exit_code == 0
    assert "vLLM is not installed; flags assume vLLM 0.14.1" in result.stderr
    assert "prefix caching left off" in result.stderr
    assert "--enable-prefix-caching" not in result.stdout


def test_profile_guess_is_announced() -> None:
    result = CliRunner().invoke(app, ["serve", "my-org/some-vlm", "--dry-run"])
    assert result.exit_code == 0
    assert "using the generic 'openai' profile" in result.stderr and "pass --profile" in result.stderr
    # `--profile auto` (the docs' and `surfer run`'s word for it) is the same suggestion: it was "unknown profile"
    auto = CliRunner().invoke(app, ["serve", "Hcompany/Holo2-8B", "--profile", "auto", "--dry-run"])
    assert auto.exit_code == 0, auto.output
    assert "using profile 'holo2'" in auto.stderr and "--reasoning-parser holo2" in auto.stdout


FAKE_OLD_HELP = """usage: vllm serve [model_tag] [options]
  --trust-remote-code   Trust remote code.
  --max-model-len MAX_MODEL_LEN
  --max-num-seqs MAX_NUM_SEQS
  --enable-prefix-caching, --no-enable-prefix-caching
  --limit-mm-per-prompt LIMIT_MM_PER_PROMPT
  --guided-decoding-backend {auto,xgrammar,guidance}
  --reasoning-parser {deepseek_r1,qwen3}
"""


def test_version_gating_follows_the_installed_help_text() -> None:
    caps = VllmCapabilities.from_help("0.8.5", FAKE_OLD_HELP)
    holotron = build_command("Hcompany/Holotron-12B", get_profile("holotron"), caps, max_concurrency=32)
    assert "--mamba-ssm-cache-dtype" not in holotron.command  # not in that help text
    assert any("no --mamba-ssm-cache-dtype" in n for n in holotron.notes)
    assert "--enable-prefix-caching" not in holotron.command  # hybrid, version < 0.15
    assert holotron.command[holotron.command.index("--limit-mm-per-prompt") + 1] == "image=3,video=0"
    assert holotron.command[-2:] == ["--guided-decoding-backend", "xgrammar"]
    assert any("needs vLLM >= 0.14.1" in n for n in holotron.notes)
    holo2 = build_command("Hcompany/Holo2-8B", get_profile("holo2"), caps)
    assert "--reasoning-parser" not in holo2.command  # this vLLM has no 'holo2' parser
    assert any("no reasoning parser 'holo2'" in n for n in holo2.notes)
    assert "--enable-prefix-caching" in holo2.command


def test_old_versions_get_the_key_value_mm_limit() -> None:
    caps = VllmCapabilities.from_table("0.8.0")
    plan = build_command("Hcompany/Holo1.5-3B", get_profile("holo1.5"), caps)
    assert plan.command[plan.command.index("--limit-mm-per-prompt") + 1] == "image=3,video=0"
    assert "--guided-decoding-backend" in plan.command and "--structured-outputs-config" not in plan.command


def test_missing_vllm_is_a_clear_error() -> None:
    result = CliRunner().invoke(app, ["serve", "Hcompany/Holo2-8B"])
    assert result.exit_code == 2
    assert "vLLM is not installed" in result.stderr and "surfer-agent[vllm]" in result.stderr
    # the command line's own mistakes come first (they were hidden behind the missing engine until it was installed)
    for args, message in [
        (["--gpus", "0"], "--gpus and --tp must be at least 1"), (["--prompt-layout", "wide"], "unknown prompt layout 'wide'"),
        (["--port", "70000"], "--port 70000: a port is a number from 1 to 65535"),
        (["--gpus", "2", "--port", "65535"], "--port 65535 with 2 replicas (ports 65535-65536): a port is a number"),
        (["--dry-run", "--vllm-version", "latest"], "--vllm-version 'latest' is not a version number (e.g. 0.25.1)"),
        (["--dry-run", "--", "--port=9000"], "--port after `--` moves the engine, but surfer waits for it"),  # (on 8000)
    ]:
        result = CliRunner().invoke(app, ["serve", "Hcompany/Holo2-8B", *args])
        assert result.exit_code == 2 and message in " ".join(result.stderr.split()), (args, result.output)
        assert "not installed" not in result.stderr
    empty = CliRunner().invoke(app, ["serve", " "])
    assert empty.exit_code == 2 and "error: the model is empty" in empty.stderr


def test_no_gpu_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve_vllm, "installed_vllm_version", lambda: "0.25.1")
    monkeypatch.setattr(serve_vllm, "read_capabilities", lambda version: VllmCapabilities.from_table(version))
    monkeypatch.setattr(serve_mod, "gpu_problem", lambda: "no NVIDIA GPU visible")
    result = CliRunner().invoke(app, ["serve", "Hcompany/Holo2-8B"])
    assert result.exit_code == 2
    assert "no NVIDIA GPU visible" in result.stderr

    # a port something listens on already: the engine failed after its start (or that server answered the wait)
    import socket

    monkeypatch.setattr(serve_mod, "gpu_problem", lambda: None)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", "Hcompany/Holo2-8B", "--port", str(port)])
    assert result.exit_code == 2, result.output
    assert f"error: port {port} of 127.0.0.1 is in use (a server already listens there): choose another with --port" in (
        " ".join(result.stderr.split()))
    bad_host = CliRunner().invoke(app, ["serve", "Hcompany/Holo2-8B", "--host", "203.0.113.9"])  # not this machine's
    assert bad_host.exit_code == 2 and "error: --host 203.0.113.9: cannot listen there" in bad_host.stderr


def _static_server(root: Path, port: int) -> ServePlan:
    """A stand-in for vLLM: a static HTTP server whose /v1/models is a file."""
    (root / "v1").mkdir(parents=True, exist_ok=True)
    (root / "v1" / "models").write_text(json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}))
    return ServePlan([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(root)])


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _engine_with_a_worker(root: Path, port: int) -> ServePlan:
    """A stand-in for an engine whose HTTP side is a worker process it starts, which outlives the engine's own
    exit on SIGTERM (as SGLang's workers did): the worker's pid is written to root/worker.pid."""
    static = _static_server(root, port)
    script = ("import subprocess, sys, pathlib; child = subprocess.Popen(sys.argv[2:]); "
              "pathlib.Path(sys.argv[1]).write_text(str(child.pid)); child.wait()")
    return ServePlan([sys.executable, "-c", script, str(root / "worker.pid"), *static.command])


async def test_serve_waits_until_ready_prints_the_run_line_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    said: list[str] = []
    base_url = f"http://127.0.0.1:{port}/v1"
    task = asyncio.create_task(serve(_engine_with_a_worker(tmp_path, port), base_url, "m", "holotron", 60, said.append))
    try:
        while not any("ready" in s for s in said):
            assert not task.done(), said
            await asyncio.sleep(0.1)
        assert f"surfer run \"TASK\" --url URL --base-url {base_url} --model m --profile holotron" in said
        os.kill(os.getpid(), signal.SIGTERM)  # handled by serve(): stops the server, exits 0
        assert await asyncio.wait_for(task, 30) == 0
        assert said[-1] == "vLLM stopped"
        with pytest.raises(OSError):  # the engine's worker stopped with it: its port is free again
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        worker = int((tmp_path / "worker.pid").read_text())
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)


async def test_serve_fails_clearly_when_the_server_exits(tmp_path: Path) -> None:
    said: list[str] = []
    plan = ServePlan([sys.executable, "-c", "import sys; sys.exit(3)"])
    code = await serve(plan, f"http://127.0.0.1:{_free_port()}/v1", "m", "holo2", 60, said.append)
    assert code == 1
    assert "vLLM exited with code 3 before it was ready" in said[-1]


def test_max_images_and_the_measured_flags_of_a_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    import shlex

    line = shlex.split(dry_run("Hcompany/Holotron-12B", "--profile", "holotron", "--max-images", "32"))
    assert line[line.index("--limit-mm-per-prompt") + 1] == json.dumps({"image": 32, "video": 0})
    caps = VllmCapabilities.from_table("0.25.1")
    measured = build_command("Hcompany/Holotron-12B", get_profile("holotron"), caps).command
    assert measured[measured.index("--max-num-batched-tokens") + 1] == "32768"  # measured: see MEASURED_FLAGS
    assert measured[measured.index("--gpu-memory-utilization") + 1] == "0.85"
    assert "--max-num-batched-tokens" not in build_command("Hcompany/Holo2-8B", get_profile("holo2"), caps).command
    monkeypatch.setitem(serve_vllm.MEASURED_FLAGS, "holotron", {"--max-num-seqs": "64", "--enable-prefix-caching": None})
    caps = VllmCapabilities.from_table("0.25.1")
    plan = build_command("Hcompany/Holotron-12B", get_profile("holotron"), caps)
    assert plan.command[-3:] == ["--max-num-seqs", "64", "--enable-prefix-caching"]
    given = build_command("Hcompany/Holotron-12B", get_profile("holotron"), caps, extra_args=("--max-num-seqs=8",))
    assert "64" not in given.command and given.command[-1] == "--max-num-seqs=8"  # the command line wins


def test_the_processor_cache_holds_every_sessions_screenshots() -> None:
    """Sized as sessions × images × 12 bytes per pixel of a 1280x800 screenshot × 1.25 (docs/benchmarks/
    gpu-sessions.md: vLLM's 4 GiB held less than a round of 48 sessions 8 deep and starved the engine)."""
    holotron, holo2 = get_profile("holotron"), get_profile("holo2")
    assert serve_vllm.processor_cache_gib(holotron, 48, 12, 128 * GIB) == (9, "")  # 8.85e9 bytes, 8.24 GiB
    assert serve_vllm.processor_cache_gib(holo2, 16, 5, 128 * GIB) == (None, "")  # vLLM's 4 GiB holds them
    gib, note = serve_vllm.processor_cache_gib(holotron, 256, 24, 128 * GIB)
    assert gib == 16 and "needs 88 GiB for 256 sessions × 24 screenshots; capped at 16 GiB" in note
    gib, note = serve_vllm.processor_cache_gib(holotron, 48, 12, 24 * GIB)
    assert gib is None and "leaves it at vLLM's 4 GiB" in note
    gib, note = serve_vllm.processor_cache_gib(holo2, None, 5, 128 * GIB)
    assert gib == 5 and "64 sessions × 5 screenshots" in note and "pass --max-concurrency" in note


def test_serve_passes_the_processor_cache_unless_the_command_line_does() -> None:
    caps = VllmCapabilities.from_table("0.25.1")
    plan = build_command("Hcompany/Holotron-12B", get_profile("holotron"), caps, max_concurrency=48, images=12)
    assert plan.command[plan.command.index("--mm-processor-cache-gb") + 1] == "9"
    given = build_command("Hcompany/Holotron-12B", get_profile("holotron"), caps, max_concurrency=48, images=12,
                          extra_args=("--mm-processor-cache-gb=2",))
    assert "9" not in given.command and given.command[-1] == "--mm-processor-cache-gb=2"
    small = build_command("Hcompany/Holotron-12B", get_profile("holotron"), caps, max_concurrency=48, images=12,
                          host_memory=16 * GIB)
    assert "--mm-processor-cache-gb" not in small.command and any("16 GiB" in n for n in small.notes)
    old = build_command("Hcompany/Holotron-12B", get_profile("holotron"), VllmCapabilities.from_table("0.10.1"),
                        max_concurrency=48, images=12)
    assert "--mm-processor-cache-gb" not in old.command
    assert any("no --mm-processor-cache-gb" in n for n in old.notes)


def test_the_command_line_chooses_the_ssm_state_dtype() -> None:
    """float32 SSM state is the accuracy-safe default; float16 halves Holotron's Mamba page and its `align`
    block (1,312 -> 672 tokens), which kept its prefix cache at 40 sessions 8 deep (docs/benchmarks/gpu-sessions.md):
    given after `--`, it is the only one on the command line."""
    caps = VllmCapabilities.from_table("0.25.1")
    default = build_command("Hcompany/Holotron-12B", get_profile("holotron"), caps)
    assert default.command[default.command.index("--mamba-ssm-cache-dtype") + 1] == "float32"
    given = build_command("Hcompany/Holotron-12B", get_profile("holotron"), caps,
                          extra_args=("--mamba-ssm-cache-dtype", "float16"))
    assert given.command.count("--mamba-ssm-cache-dtype") == 1 and given.command[-2:] == ["--mamba-ssm-cache-dtype", "float16"]
    assert "float32" not in given.command


# -- SGLang -----------------------------------------------------------------------------------


def test_dry_run_holotron_on_sglang_keeps_the_mamba_state_where_each_request_ends() -> None:
    import shlex

    line = dry_run("Hcompany/Holotron-12B", "--engine", "sglang", "--max-concurrency", "64", "--prompt-layout", "blocks")
    assert shlex.split(line) == [
        # SGLang loads surfer's Nemotron-VL processor: each image at its placeholder, token ids in (tokens in)
        "SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE=surfer.models.sglang_processors",
        "python", "-m", "sglang.launch_server", "--model-path", "Hcompany/Holotron-12B", "--host", "127.0.0.1",
        "--port", "8000", "--trust-remote-code", "--limit-mm-data-per-request", json.dumps({"image": 5}),
        "--context-length", "65536", "--max-running-requests", "64", "--enable-metrics", "--enable-cache-report",
        "--grammar-backend", "xgrammar", "--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule",
        "--mamba-ssm-dtype", "float32", "--tokenizer-worker-num", "6",  # (measured: the screenshots' preprocessing)
        "--mamba-full-memory-ratio", "3",  # (measured: a Mamba state pool for every session on an 80 GB card)
    ]


def test_sglang_flags_follow_the_version_and_the_command_line() -> None:
    import shlex

    older = shlex.split(dry_run("Hcompany/Holotron-12B", "--engine", "sglang", "--sglang-version", "0.5.12"))
    assert older[older.index("--mamba-scheduler-strategy") + 1] == "no_buffer"  # the flag's name before 0.5.15
    assert "--mamba-radix-cache-strategy" not in older
    mine = shlex.split(dry_run("Hcompany/Holotron-12B", "--engine", "sglang", "--",
                               "--mamba-radix-cache-strategy", "no_buffer", "--load-format", "dummy"))
    assert mine.count("--mamba-radix-cache-strategy") == 1 and mine[-4:] == [
        "--mamba-radix-cache-strategy", "no_buffer", "--load-format", "dummy"]
    assert "--disable-overlap-schedule" not in mine  # the caller chose the strategy: its scheduler is theirs too
    # extra_buffer misreads the VL wrapper's Mamba chunk size on SGLang <= 0.5.15: refused for Holotron, in both spellings
    for extra in (["--mamba-radix-cache-strategy", "extra_buffer"], ["--mamba-scheduler-strategy=extra_buffer_lazy"]):
        refused = CliRunner().invoke(app, ["serve", "Hcompany/Holotron-12B", "--engine", "sglang", "--dry-run", "--", *extra])
        assert refused.exit_code == 2 and "refused for holotron on SGLang 0.5.15" in refused.output, refused.output
    holo2 = CliRunner().invoke(app, ["serve", "Hcompany/Holo2-8B", "--engine", "sglang", "--dry-run", "--",
                                     "--mamba-radix-cache-strategy", "extra_buffer"])
    assert holo2.exit_code == 0  # (not a hybrid: the flag is SGLang's to judge)
    older_without = shlex.split(dry_run("Hcompany/Holo2-8B", "--engine", "sglang", "--sglang-version", "0.5.12"))
    assert "--tokenizer-worker-num" not in older_without  # a flag that version may lack is left out, said in a note
    pool = shlex.split(dry_run("Hcompany/Holotron-12B", "--engine", "sglang", "--", "--mamba-full-memory-ratio=0.9"))
    assert [a for a in pool if a.startswith("--mamba-full-memory")] == ["--mamba-full-memory-ratio=0.9"]  # the caller's
    holo2 = shlex.split(dry_run("Hcompany/Holo2-8B", "--engine", "sglang"))
    assert "--trust-remote-code" not in holo2 and not any("mamba" in a for a in holo2)
    assert holo2[holo2.index("--limit-mm-data-per-request") + 1] == json.dumps({"image": 3})


def test_an_unknown_engine_or_a_missing_one_is_a_clear_error() -> None:
    bad = CliRunner().invoke(app, ["serve", "Hcompany/Holo2-8B", "--engine", "tgi", "--dry-run"])
    assert bad.exit_code == 2 and "--engine must be one of vllm, sglang" in bad.output
    missing = CliRunner().invoke(app, ["serve", "Hcompany/Holo2-8B", "--engine", "sglang"])
    assert missing.exit_code == 2 and "SGLang is not installed" in missing.output


def test_gpus_start_one_replica_per_gpu_each_on_its_port() -> None:
    import shlex

    result = CliRunner().invoke(app, ["serve", "Hcompany/Holo2-8B", "--gpus", "2", "--port", "9000", "--dry-run"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2
    for replica, line in enumerate(lines):
        words = shlex.split(line)
        assert words[0] == f"CUDA_VISIBLE_DEVICES={replica}" and words[1:3] == ["vllm", "serve"]
        assert words[words.index("--port") + 1] == str(9000 + replica)
        assert "--tensor-parallel-size" not in words and "--data-parallel-size" not in words
    # what to pass surfer: every replica's --base-url
    assert ("--base-url http://127.0.0.1:9000/v1 --base-url http://127.0.0.1:9001/v1" in
            " ".join(result.stderr.split()))
    # an IPv6 address is bracketed in the URLs (http://::1:9000/v1 ended the wait for the engine in a traceback)
    six = CliRunner().invoke(app, ["serve", "Hcompany/Holo2-8B", "--gpus", "2", "--port", "9000", "--host", "::1", "--dry-run"])
    assert six.exit_code == 0 and "--host ::1" in six.stdout
    assert "--base-url http://[::1]:9000/v1 --base-url http://[::1]:9001/v1" in " ".join(six.stderr.split())


def test_tensor_and_data_parallelism_pass_through_to_each_engine() -> None:
    import shlex

    result = CliRunner().invoke(app, ["serve", "Hcompany/Holo2-8B", "--gpus", "4", "--tp", "2", "--dry-run"])
    assert result.exit_code == 0, result.output
    replicas = [shlex.split(line) for line in result.stdout.strip().splitlines()]
    assert [w[0] for w in replicas] == ["CUDA_VISIBLE_DEVICES=0,1", "CUDA_VISIBLE_DEVICES=2,3"]
    assert all(w[w.index("--tensor-parallel-size") + 1] == "2" for w in replicas)

    vllm_dp = shlex.split(dry_run("Hcompany/Holo2-8B", "--gpus", "2", "--data-parallel"))
    assert vllm_dp[0] == "CUDA_VISIBLE_DEVICES=0,1" and vllm_dp[vllm_dp.index("--data-parallel-size") + 1] == "2"
    sglang = shlex.split(dry_run("Hcompany/Holo2-8B", "--engine", "sglang", "--gpus", "4", "--tp", "2", "--data-parallel"))
    assert sglang[sglang.index("--tp-size") + 1] == "2" and sglang[sglang.index("--dp-size") + 1] == "2"
    assert sglang[0] == "CUDA_VISIBLE_DEVICES=0,1,2,3"
    single = dry_run("Hcompany/Holo2-8B", "--tp", "1")
    assert not single.startswith("CUDA_VISIBLE_DEVICES")  # one GPU: the plain command


@pytest.mark.parametrize("args, message", [
    (["--gpus", "3", "--tp", "2"], "--gpus 3 is not a whole number of model copies of --tp 2"),
    (["--gpus", "2", "--tp", "2", "--data-parallel"], "--data-parallel needs two model copies or more"),
    (["--gpus", "0"], "--gpus and --tp must be at least 1"),
])
def test_gpu_layouts_that_do_not_add_up_are_clear_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["serve", "Hcompany/Holo2-8B", "--dry-run", *args])
    assert result.exit_code == 2 and message in " ".join(result.output.split())


def test_fewer_gpus_than_asked_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil as shutil_module
    import subprocess as subprocess_module

    from surfer.apps.serve import process

    monkeypatch.setattr(shutil_module, "which", lambda name: "/usr/bin/nvidia-smi")
    listing = subprocess_module.CompletedProcess([], 0, "GPU 0: NVIDIA H100 (UUID: x)\n", "")
    monkeypatch.setattr(subprocess_module, "run", lambda *a, **k: listing)
    assert process.gpu_problem() is None
    assert process.gpu_problem(2) == "2 GPUs asked for, nvidia-smi lists 1"


async def test_replicas_start_together_and_stop_together(tmp_path: Path) -> None:
    ports = [_free_port(), _free_port()]
    said: list[str] = []
    urls = [f"http://127.0.0.1:{port}/v1" for port in ports]
    plans = [_static_server(tmp_path / str(n), port) for n, port in enumerate(ports)]
    for n, plan in enumerate(plans):
        plan.env["CUDA_VISIBLE_DEVICES"] = str(n)
    task = asyncio.create_task(serve_mod.serve_replicas(plans, urls, "m", "holo2", 60, said.append))
    while not any("ready" in s for s in said):
        assert not task.done(), said
        await asyncio.sleep(0.1)
    assert f"--base-url {urls[0]} --base-url {urls[1]}" in said[-1]
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(task, 30) == 0
    assert said[-1] == "vLLM stopped"
