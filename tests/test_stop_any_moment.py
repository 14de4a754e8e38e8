"""A run stopped at any moment leaves its record (or says in one line that it never
started): `surfer run`, `surfer batch` and `surfer qa` against a model server that
never answers, stopped by SIGTERM at 0.1 … 2 s after they start and once more as
they first wait on the model — by GNU `timeout`, which signals the command and
then its whole process group, and by one `kill -TERM` to the process (the two
ways taking turns from 0.6 s) — and `surfer demo` by Ctrl-C's SIGINT and by
SIGTERM, to its whole group. Never a silent exit, never the "second signal" exit
for one stop.

The stops from 0.6 s on run at once, so the machine is loaded as a CI runner is
(the moments fall in other phases than on a quiet one: that is the point); the
earliest run alone first, as no program handles a signal before the interpreter
reaches its code (~20 ms on a quiet machine, several times that under load). The
stop as the command waits on the model is keyed to that request (each such
command has a silent server of its own), not to a time: it finds the run, batch
or suite begun however loaded the machine is.

The command tests are `serial`: their timed stops are to fall in the phases of a
start on a runner with nothing else to do. The demo's later stops need no such
luck (what they must find is keyed to its run directory appearing): they run
beside the other tests, its earliest one alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import pytest

SERIAL = pytest.mark.serial  # signals at fixed moments after start; the later stops load the machine themselves

EARLY = 0.5  # stops before this run one at a time
WAYS = ("timeout", "kill")
# A command's timed stops: the early ones each way, one process at a time; the later ones taking turns between the
# ways, at once with the two keyed stops — six processes, as many as a stop at 0.6 s finds surfer's code running beside.
TIMED = (*((way, moment) for moment in (0.1, 0.3) for way in WAYS),
         ("timeout", 0.6), ("kill", 1.0), ("timeout", 1.5), ("kill", 2.0))
ASKING = 0.1  # the keyed stop: this long after the command first asked the model


def _env() -> dict[str, str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    for key in ("SURFER_BASE_URL", "SURFER_MODEL", "SURFER_API_KEY", "SURFER_PROFILE"):
        env.pop(key, None)
    return env


def _stop_at(args: list[str], moment: float, way: str, signum: int = signal.SIGTERM,
             after: Callable[[], bool] | None = None) -> subprocess.CompletedProcess[str]:
    """Stop the command `moment` s after it starts — or, given `after`, `moment` s after `after()` holds."""
    command = [sys.executable, "-m", "surfer", *args]
    if way == "timeout":  # the signal to the command, then to its process group; the command's own status back
        limit = "600" if after is not None else str(moment)  # keyed: `timeout` sends the signal it is sent, as at its limit
        proc = subprocess.Popen(["timeout", "--preserve-status", "-s", signal.Signals(signum).name[3:], limit, *command],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    else:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                                start_new_session=True)
    if way != "timeout" or after is not None:
        deadline = time.monotonic() + 60
        while after is not None and not after() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(moment)
        if way == "group":  # as a terminal's Ctrl-C and `timeout` do: every process of the group
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"still running 90 s after the stop at {moment} s ({way}):\n{err[-2000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _each_moment(make_args, way: str, tmp_path: Path, signum: int, moments: tuple[float, ...]):  # type: ignore[no-untyped-def]
    """Run the command once per moment, the early ones one at a time, then the others all at once;
    (moment, its output dir, the finished process)."""
    outs = [tmp_path / f"{way}-{moment}" for moment in moments]
    stop = lambda pair: _stop_at(make_args(pair[1]), pair[0], way, signum)  # noqa: E731
    alone = [pair for pair in zip(moments, outs) if pair[0] < EARLY]
    together = [pair for pair in zip(moments, outs) if pair[0] >= EARLY]
    procs = [stop(pair) for pair in alone]
    with ThreadPoolExecutor(max(1, len(together))) as pool:
        procs += list(pool.map(stop, together))
    return list(zip(moments, outs, procs))


def _each_stop(make_args, tmp_path: Path, standin):  # type: ignore[no-untyped-def]
    """Stop the command at each of its TIMED moments — the early ones one at a time, then the later ones together
    with one stop each way keyed to the command's first request to its own silent server;
    (way, the moment: seconds or "asking", its output dir, the finished process). `make_args(out, server)`."""
    shared = standin(lambda request: {}, hang_after=0)
    stops = [(way, moment, None) for way, moment in TIMED]
    stops += [(way, "asking", standin(lambda request: {}, hang_after=0)) for way in WAYS]

    def stop(entry):  # type: ignore[no-untyped-def]
        way, moment, own = entry
        out = tmp_path / f"{way}-{moment}"
        if own is None:
            return way, moment, out, _stop_at(make_args(out, shared), moment, way)
        return way, moment, out, _stop_at(make_args(out, own), ASKING, way, after=lambda: own.hung >= 1)

    alone = [entry for entry in stops if entry[2] is None and entry[1] < EARLY]
    done = [stop(entry) for entry in alone]
    together = [entry for entry in stops if entry not in alone]
    with ThreadPoolExecutor(len(together)) as pool:
        done += list(pool.map(stop, together))
    return done


def _no_silent_exit(moment: float, proc: subprocess.CompletedProcess[str], signum: int = signal.SIGTERM) -> str:
    said = proc.stdout + proc.stderr
    assert proc.returncode == 128 + signum, f"stop at {moment} s: exit {proc.returncode}\n{said[-3000:]}"
    assert "exiting at once" not in said, f"stop at {moment} s: one stop taken for two\n{said[-2000:]}"
    assert "Traceback" not in said and "never retrieved" not in said, f"stop at {moment} s:\n{said[-3000:]}"
    assert said.strip(), f"stop at {moment} s: nothing said"
    return said


@pytest.fixture
def silent_server(standin):  # type: ignore[no-untyped-def]
    return standin(lambda request: {}, hang_after=0)  # never answers a completion


@SERIAL
def test_surfer_run_stopped_at_any_moment(standin, pages, tmp_path):
    args = lambda out, server: ["run", "probe", "--url", pages.url("actions.html"), "--base-url", server.base_url,  # noqa: E731
                                "--model", server.model, "--profile", "holo2", "--out", str(out), "--json"]
    for way, moment, out, proc in _each_stop(args, tmp_path, standin):
        said = _no_silent_exit(moment, proc)
        # --json: one line on stdout at every moment, as a run that ends prints it (`| jq` reads it)
        assert len(proc.stdout.splitlines()) == 1, f"stop at {moment} s ({way}): stdout {proc.stdout!r}"
        printed = json.loads(proc.stdout)
        if (out / "result.json").exists():
            result = json.loads((out / "result.json").read_text())
            assert result["status"] == "interrupted" and "SIGTERM" in result["reason"], (way, moment, result)
            assert "interrupted by SIGTERM" in said and printed == result
        else:
            assert moment != "asking", f"stopped ({way}) as the run asked the model: no result.json\n{said[-2000:]}"
            assert "before the run started: nothing was recorded" in said, (way, moment, said[-2000:])
            assert not out.exists(), f"stop at {moment} s ({way}): a run directory without its result.json"
            assert printed["status"] == "interrupted" and printed["run_dir"] is None and "SIGTERM" in printed["reason"]


def _before_surfer(proc: subprocess.CompletedProcess[str], signum: int) -> bool:
    """Stopped while the interpreter was still starting, before surfer's code ran (on a loaded machine, a few
    tenths of a second): as for any program, the system's default (killed by the signal) or Python's own
    KeyboardInterrupt."""
    interrupt = "KeyboardInterrupt" in proc.stderr and "surfer" not in proc.stderr.replace("-m surfer", "")
    return proc.returncode == -signum or (signum == signal.SIGINT and interrupt)


@pytest.mark.parametrize("phase", [pytest.param("alone", marks=SERIAL), "together"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_surfer_demo_stopped_at_any_moment(signum, phase, tmp_path):
    """The demo starts its site, measures it in a browser of its own and starts its stand-in model before the
    run: a stop in any of these keeps `surfer run`'s promise — and so does one as the run opens its directory
    (every process of the group signalled as the directory appears, and a little later). The demo is short:
    a stop that comes after it finished finds it finished."""
    name = signal.Signals(signum).name
    moments = (0.3,) if phase == "alone" else (0.6, 1.0, 1.5, 2.5)  # (the earliest with nothing else running)
    opening = [(moment, tmp_path / f"opening-{moment}") for moment in ((0.0, 0.05) if phase == "together" else ())]
    with ThreadPoolExecutor(max(1, len(opening))) as pool:  # beside the timed stops
        stopping = [pool.submit(_stop_at, ["demo", "--out", str(out)], moment, "group", signum, after=out.exists)
                    for moment, out in opening]
        timed = _each_moment(lambda out: ["demo", "--out", str(out)], "group", tmp_path, signum, moments=moments)
        stopped = [future.result() for future in stopping]
    for (moment, out), proc in zip(opening, stopped):
        assert (out / "result.json").exists(), f"stopped {moment} s after its directory opened: no result.json"
    recorded = 0
    for moment, out, proc in [*timed, *((m, o, p) for (m, o), p in zip(opening, stopped))]:
        if proc.returncode == 0 and moment >= 2.0:  # done before the stop came
            assert json.loads((out / "result.json").read_text())["status"] == "success"
            continue
        if _before_surfer(proc, signum) and not out.exists():
            continue
        said = _no_silent_exit(moment, proc, signum)
        if (out / "result.json").exists():
            result = json.loads((out / "result.json").read_text())
            assert result["status"] == "interrupted" and name in result["reason"], (moment, result)
            assert (out / "report.html").exists(), moment
            assert f"interrupted by {name}" in said
            recorded += 1
        else:
            assert "before the run started: nothing was recorded" in said, (moment, said[-2000:])
            assert not out.exists(), f"stop at {moment} s: a run directory without its result.json"
    assert recorded >= len(opening)


@SERIAL
def test_surfer_batch_stopped_at_any_moment(standin, pages, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": i, "task": "probe", "url": pages.url("actions.html")}) + "\n" for i in "ab"))
    args = lambda out, server: ["batch", str(tasks), "--out", str(out), "--concurrency", "2", "--base-url",  # noqa: E731
                                server.base_url, "--model", server.model, "--profile", "holo2", "--quiet"]
    for way, moment, out, proc in _each_stop(args, tmp_path, standin):
        said = _no_silent_exit(moment, proc)
        if (out / "batch.json").exists():
            assert "interrupted by SIGTERM" in said, (way, moment, said[-2000:])
            assert not (out / "results.jsonl").exists() or not (out / "results.jsonl").read_text().strip()
            attempts = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()] \
                if (out / "attempts.jsonl").exists() else []
            assert all(a["status"] == "interrupted" and "SIGTERM" in a["reason"] for a in attempts), (way, moment, attempts)
            # stopped as a session asked the model: that session's attempt is recorded
            assert attempts or moment != "asking", (way, moment, said[-2000:])
        else:
            assert moment != "asking", f"stopped ({way}) as a session asked the model: no batch.json\n{said[-2000:]}"
            assert "before the batch started: nothing was recorded" in said, (way, moment, said[-2000:])


@SERIAL
def test_surfer_qa_stopped_at_any_moment(standin, pages, tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"name: checks\nbase_url: {pages.base_url}\ncases:\n"
                     "  - name: one\n    url: actions.html\n    task: probe\n"
                     "  - name: two\n    url: actions.html\n    task: probe\n")
    args = lambda out, server: ["qa", str(suite), "--out", str(out), "--no-cache", "--quiet", "--base-url",  # noqa: E731
                                server.base_url, "--model", server.model, "--profile", "holo2"]
    for way, moment, out, proc in _each_stop(args, tmp_path, standin):
        said = _no_silent_exit(moment, proc)
        if (out / "junit.xml").exists():
            assert "interrupted by SIGTERM" in said, (way, moment, said[-2000:])
            assert "interrupted by SIGTERM" in (out / "index.html").read_text()
        else:
            assert moment != "asking", f"stopped ({way}) as a case asked the model: no junit.xml\n{said[-2000:]}"
            assert "before the suite started: nothing was recorded" in said, (way, moment, said[-2000:])


def test_a_run_whose_every_process_is_stopped_at_once_records_the_stop(silent_server, pages, tmp_path):
    """systemd, CI runners and Kubernetes stop a whole cgroup: surfer, Playwright's driver and Chromium get
    SIGTERM together, so the browser dies under the run while it stops. That is the stop, not a crash:
    result.json says interrupted, with the signal."""
    import psutil

    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "surfer", "run", "probe", "--url", pages.url("actions.html"),
                             "--base-url", silent_server.base_url, "--model", silent_server.model, "--profile", "holo2",
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    deadline = time.monotonic() + 60
    while silent_server.hung < 1:  # the run has its directory and waits on the model
        assert time.monotonic() < deadline and proc.poll() is None, "the run never asked the model"
        time.sleep(0.05)
    everyone = [proc.pid, *(child.pid for child in psutil.Process(proc.pid).children(recursive=True))]
    assert len(everyone) > 2  # the driver and the browser too
    for pid in everyone:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    said = _no_silent_exit(0.0, subprocess.CompletedProcess(proc.args, proc.wait(timeout=60), *proc.communicate()))
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "interrupted" and "SIGTERM" in result["reason"], result
    assert "interrupted by SIGTERM" in said
