"""A reader that goes away (`surfer ... | head -1`) stops the command at once and
quietly, with its record written, exit 141 — what `git log | head` does. Real
pipes: the test reads the first line of the command's output and closes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_stop_any_moment import _env

LIMIT_S = 60  # a command that does not stop is killed here, and the test fails


def _surfer(*args: str, stderr: int = subprocess.PIPE) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "surfer", *args], stdout=subprocess.PIPE, stderr=stderr,
                            text=True, env=_env())


def _head_1(proc: subprocess.Popen[str], lines: int = 1) -> tuple[str, str]:
    """Read one line (or `lines`) and close the pipe, as `head -1` does; (that line, stderr) once the command ended."""
    first = proc.stdout.readline() if lines else ""  # type: ignore[union-attr]
    proc.stdout.close()  # type: ignore[union-attr]
    try:
        proc.wait(LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"still running {LIMIT_S} s after its reader went away") from None
    return first, proc.stderr.read() if proc.stderr else ""


def _interrupted_record(run_dir: Path) -> dict:
    result = json.loads((run_dir / "result.json").read_text())
    assert (run_dir / "report.html").exists() and (run_dir / "run.json").exists()
    assert result["status"] == "interrupted" and "output was closed" in result["reason"], result
    return result


def test_a_run_whose_reader_goes_away_while_it_waits_on_the_model_stops_at_once(standin, pages, tmp_path):
    """Nothing is written while the model thinks: the reader's leaving is seen all the same."""
    server = standin(lambda request: {}, hang_after=0)  # never answers
    out = tmp_path / "run"
    proc = _surfer("run", "probe", "--url", pages.url("actions.html"), "--base-url", server.base_url,
                   "--model", server.model, "--profile", "holo2", "--out", str(out))
    first, err = _head_1(proc)
    assert first.startswith("surfer probe")
    assert proc.returncode == 141, err
    assert err == "", err  # quietly
    _interrupted_record(out)


def test_the_demo_with_its_output_and_errors_in_one_closed_pipe_stops_quietly(tmp_path):
    """`surfer demo 2>&1 | head -1`: the demo writes a line per step; the first write after the reader left
    stops it, and stderr (the same pipe) is silenced too — no BrokenPipeError, no SystemExit from a task."""
    out = tmp_path / "demo"
    proc = _surfer("demo", "--out", str(out), stderr=subprocess.STDOUT)
    first, _ = _head_1(proc)
    assert first.startswith("surfer Register")
    assert proc.returncode == 141
    assert _interrupted_record(out)["steps"] < 5  # stopped, not finished


def test_a_run_whose_server_is_down_behind_a_closed_pipe_exits(tmp_path):
    """The defect as it was met: a run whose server cannot be reached, its output and errors piped into
    `head -1`, never exited (rich's SystemExit inside the run's task ended its event loop)."""
    out = tmp_path / "run"
    proc = _surfer("run", "x", "--url", "http://127.0.0.1:9/", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                   "--out", str(out), stderr=subprocess.STDOUT)
    first, _ = _head_1(proc)
    assert first.startswith("surfer x")
    assert proc.returncode in (141, 3), proc.returncode  # 3: it had said everything before the reader left
    assert json.loads((out / "result.json").read_text())["status"] in ("error", "interrupted")


@pytest.mark.parametrize("command", ["version", "auth"], ids=["print", "console"])
def test_a_command_whose_reader_left_before_it_wrote_exits_141_quietly(command, tmp_path):
    """The reader gone before the first line: a plain print (BrokenPipeError) and the console alike."""
    state = tmp_path / "state.json"
    state.write_text('{"cookies": [], "origins": []}')
    state.chmod(0o600)
    args = ["version"] if command == "version" else ["auth", "check", str(state), "--url", "http://example.test/"]
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "surfer", *args], stdout=write, stderr=subprocess.PIPE,
                              text=True, env=_env(), timeout=LIMIT_S)
    finally:
        os.close(write)
    assert proc.returncode == 141, proc.stderr
    assert proc.stderr == "", proc.stderr


def test_a_batch_whose_output_is_closed_stops_and_records_why(standin, pages, tmp_path):
    """A batch writes its progress to stderr; its stdout's reader going away stops it all the same, quietly,
    each session in progress recorded in attempts.jsonl with the reason."""
    server = standin(lambda request: {}, hang_after=0)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": i, "task": "probe", "url": pages.url("actions.html")}) + "\n" for i in "ab"))
    out = tmp_path / "batch"
    proc = _surfer("batch", str(tasks), "--out", str(out), "--concurrency", "2", "--base-url", server.base_url,
                   "--model", server.model, "--profile", "holo2")
    deadline = time.monotonic() + LIMIT_S
    while server.hung < 2:  # both sessions wait on the model
        assert time.monotonic() < deadline and proc.poll() is None, "the batch never asked the model"
        time.sleep(0.05)
    _, err = _head_1(proc, lines=0)
    assert proc.returncode == 141 and err == "", (proc.returncode, err)
    attempts = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()]
    assert len(attempts) == 2 and all(a["status"] == "interrupted" and "output was closed" in a["reason"] for a in attempts), attempts
