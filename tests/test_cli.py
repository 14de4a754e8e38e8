"""`surfer run` end to end as a user runs it: a subprocess, real HTTP to the
stand-in server, real Chromium on the demo site, the run directory checked.
Checks of what a run leaves behind (exit status, files, messages) run the
command in this process (tests/inprocess.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from inprocess import surfer

from surfer.apps.demo.oracle import DEMO_TASK, EMAIL, NAME, DemoOracle, confirmation_code

VIEWPORT = (1100, 700)


def cli(*args: str, timeout: float = 120, **popen) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    for key in ("SURFER_BASE_URL", "SURFER_MODEL", "SURFER_API_KEY", "SURFER_PROFILE"):
        env.pop(key, None)
    return subprocess.run([sys.executable, "-m", "surfer", *args], capture_output=True, text=True, timeout=timeout, env=env, **popen)


def normalized(point, sent):  # type: ignore[no-untyped-def]
    """The perfect 0..1000 answer, computed here without surfer's coordinate module."""
    return round(point.x / VIEWPORT[0] * 1000), round(point.y / VIEWPORT[1] * 1000)


@pytest.fixture(scope="module")
async def centres(demo_site, measure):
    return await measure(demo_site.base_url, VIEWPORT)


def run_args(server, site, out: Path, *extra: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [
        "run", DEMO_TASK, "--url", site.url("index.html"), "--base-url", server.base_url, "--model", server.model,
        "--profile", "holotron", "--viewport", f"{VIEWPORT[0]}x{VIEWPORT[1]}", "--out", str(out), *extra,
    ]


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_run_completes_the_demo_task_and_writes_the_run_directory(standin, demo_site, centres, tmp_path):
    oracle = DemoOracle(centres, normalized)
    server = standin(oracle)
    proc = cli(*run_args(server, demo_site, tmp_path / "run", "--json"))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    code = confirmation_code(NAME, EMAIL)
    assert result["status"] == "success" and result["answer"] == code
    assert result["run_dir"] == str(tmp_path / "run") and result["steps"] == 5

    run_dir = tmp_path / "run"
    steps = read_lines(run_dir / "trajectory.jsonl")
    assert [s["action"]["type"] for s in steps] == ["click", "type", "type", "click", "answer"]
    # the typed values really reached the site: the welcome page's URL carries them
    final = parse_qs(urlparse(steps[-1]["url"]).query)
    assert final["name"] == [NAME] and final["email"] == [EMAIL]
    for step in steps:
        assert (run_dir / step["screenshot"]).stat().st_size > 1000
        assert set(step["timings"]) >= {"model", "action", "settle", "screenshot", "encode", "total", "overhead"}
        assert step["calls"]["policy"][0]["completion"]
        assert step["usage"]["prompt_tokens"] > 0
    click = steps[0]
    expected = centres["the 'Register as a member' link"]
    assert abs(click["points"][0]["x"] - expected.x) < 1.5 and abs(click["points"][0]["y"] - expected.y) < 1.5
    assert click["calls"]["localizer"][0]["request"]["schema"] == "localizer"
    assert steps[-1]["verdicts"][0]["accepted"] is True
    saved = json.loads((run_dir / "result.json").read_text())
    assert saved["status"] == "success" and saved["answer"] == code
    report = (run_dir / "report.html").read_text()
    assert report.count("data:image/jpeg;base64,") == 5 and report.count('class="mark"') == 4
    assert "Create account" in report and code in report
    assert "step  1" in proc.stderr and "→ click" in proc.stderr  # the live view went to stderr

    # the same --out again: refused before anything starts, naming the directory; the first run stays whole
    kept, asked = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}, dict(oracle.calls)
    again = surfer(*run_args(server, demo_site, run_dir))
    assert again.returncode == 2, again.stdout + again.stderr
    assert " ".join(again.stdout.split()).startswith(f"error: run directory {run_dir} is not empty (it holds a run)")
    assert "Traceback" not in again.stdout + again.stderr and oracle.calls == asked  # no model call
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == kept


def test_validator_rejection_then_acceptance(standin, demo_site, centres, tmp_path):
    server = standin(DemoOracle(centres, normalized, wrong_first_answer=True))
    proc = surfer(*run_args(server, demo_site, tmp_path / "run"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = read_lines(tmp_path / "run" / "trajectory.jsonl")
    verdicts = [v["accepted"] for s in steps for v in s["verdicts"]]
    assert verdicts == [False, True]
    assert "validator rejected" in proc.stdout and "result: success" in proc.stdout


def test_no_validator_flag(standin, demo_site, centres, tmp_path):
    oracle = DemoOracle(centres, normalized)
    server = standin(oracle)
    proc = surfer(*run_args(server, demo_site, tmp_path / "run", "--no-validator", "--json"))
    assert proc.returncode == 0, proc.stderr
    assert "validator" not in oracle.calls


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_server_down_exits_3_with_a_clear_message(demo_site, tmp_path):
    proc = surfer("run", "task", "--url", demo_site.url("index.html"), "--base-url", f"http://127.0.0.1:{free_port()}/v1",
               "--model", "m", "--out", str(tmp_path / "run"), "--json")
    assert proc.returncode == 3
    result = json.loads(proc.stdout)
    assert result["status"] == "error" and result["error_kind"] == "unreachable"
    assert "cannot reach the model server" in result["reason"] and result["reason"].endswith("set --base-url or SURFER_BASE_URL.")
    # the run never reached its server: no run directory, and the live view says so
    assert result["run_dir"] is None and not (tmp_path / "run").exists()
    assert f"nothing recorded: the run never reached its model server ({tmp_path / 'run'} was not written)" in proc.stderr


def test_unknown_model_exits_2(standin, demo_site, tmp_path):
    server = standin(lambda r: "{}")
    proc = surfer("run", "task", "--url", demo_site.url("index.html"), "--base-url", server.base_url, "--model", "nope",
               "--out", str(tmp_path / "run"))
    assert proc.returncode == 2
    assert "does not serve model 'nope'" in proc.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("max_steps = 'many'", "max_steps: Input should be a valid integer"),
        ("[policy]\nmodle = 'x'", "policy.modle: unknown key (did you mean 'model'?)"),
        ("[browser]\nzoom = 2", "browser.zoom: unknown key; [browser] has: headless, viewport,"),
        ("this is = = not toml", "is not valid TOML"),
        ("[browser]\nviewport = '12x'", "viewport must look like 1280x800"),
    ],
)
def test_bad_config_file_exits_2_naming_the_problem(tmp_path, content, message):
    config = tmp_path / "surfer.toml"
    config.write_text(content)
    proc = surfer("run", "task", "--config", str(config), "--out", str(tmp_path / "run"))
    assert proc.returncode == 2
    assert message in " ".join(proc.stdout.split())
    assert not (tmp_path / "run").exists()


def test_bad_flags_exit_2(tmp_path):
    assert surfer("run", "task", "--profile", "nonsense").returncode == 2
    assert surfer("run", "task", "--viewport", "wide").returncode == 2
    # screenshots Chromium cannot capture (it failed after tens of seconds, or died): refused before anything starts
    huge = surfer("run", "task", "--viewport", "5000x5000", "--device-scale-factor", "4", "--out", str(tmp_path / "huge"))
    assert huge.returncode == 2 and "screenshots of 20000x20000 device pixels" in " ".join(huge.stdout.split())
    assert not (tmp_path / "huge").exists()
    assert cli("run", "task", "--max-steps", "0").returncode == 2  # (the real process: its early browser let go)
    assert surfer("run").returncode == 2  # missing TASK


def test_config_file_sets_per_role_endpoints(tmp_path, monkeypatch):
    from surfer.agent.config import load_config
    from surfer.core.errors import ConfigError

    config = tmp_path / "surfer.toml"
    config.write_text('base_url = "http://a/v1"\nmodel = "big"\n[localizer]\nbase_url = "http://b/v1"\nmodel = "small"\ntemperature = 0.0\n')
    openai = {"OPENAI_BASE_URL": "http://openai/v1", "OPENAI_API_KEY": "sk-o"}  # what every OpenAI client reads
    cfg = load_config(config, {"max_steps": 7}, environ={"SURFER_MODEL": "from-env", **openai})
    assert cfg.endpoint("policy").base_url == "http://a/v1" and cfg.endpoint("policy").model == "from-env"
    assert cfg.endpoint("localizer").base_url == "http://b/v1" and cfg.endpoint("localizer").model == "small"
    assert cfg.localizer.temperature == 0.0 and cfg.max_steps == 7
    # flags > SURFER_* > config file > OPENAI_* > defaults, each setting's origin said
    assert cfg.endpoint("policy").api_key == "sk-o" and cfg.origin("api_key") == "OPENAI_API_KEY"
    assert (cfg.origin("base_url"), cfg.origin("model"), cfg.origin("max_steps"), cfg.origin("profile")) == \
        (str(config), "SURFER_MODEL", "arguments", "default")
    bare = load_config(environ=openai)
    assert (bare.base_url, bare.origin("base_url")) == ("http://openai/v1", "OPENAI_BASE_URL")
    ours = load_config(environ={**openai, "SURFER_BASE_URL": "http://s/v1", "SURFER_API_KEY": "k"})
    assert (ours.base_url, ours.api_key, ours.origin("api_key")) == ("http://s/v1", "k", "SURFER_API_KEY")
    # no profile given: the family the model's name shows (the default's frame would misplace every click), said
    qwen = load_config(overrides={"model": "Qwen/Qwen2.5-VL-7B-Instruct"}, environ={})
    assert qwen.profile == "holo1.5" and qwen.origin("profile").startswith("the model's name (model 'Qwen/Qwen2.5-VL-7B")
    assert load_config(overrides={"model": "Qwen/Qwen3-VL-8B-Instruct", "profile": "openai"}, environ={}).profile == "openai"
    assert load_config(overrides={"model": "served-name"}, environ={}).profile == "holotron"
    with pytest.raises(ConfigError, match=r"\(OPENAI_BASE_URL\): base_url: 'localhost:8000' is not an http"):
        load_config(environ={"OPENAI_BASE_URL": "localhost:8000"})
    # a file's relative paths are read against its folder, from whatever directory the command runs in
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "cv.pdf").write_bytes(b"%PDF-1.4")
    (tmp_path / "conf" / "surfer.toml").write_text('reward = "score.py:score"\n[browser]\nupload_files = ["cv.pdf", "/etc/hostname"]\n'
                                                  'save_storage_state = "state.json"\nuser_data_dir = "~/profile"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config(Path("..") / "conf" / "surfer.toml", environ={})
    assert cfg.browser.upload_files == [str(tmp_path / "conf" / "cv.pdf"), "/etc/hostname"]
    assert (cfg.browser.save_storage_state, cfg.browser.user_data_dir) == (str(Path("..") / "conf" / "state.json"), "~/profile")
    assert cfg.reward == str(Path("..") / "conf" / "score.py") + ":score"


async def test_ctrl_c_keeps_finished_steps_and_writes_the_result(standin, demo_site, centres, tmp_path):
    server = standin(DemoOracle(centres, normalized), delay=0.4)
    run_dir = tmp_path / "run"
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "surfer", *run_args(server, demo_site, run_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    trajectory = run_dir / "trajectory.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (trajectory.exists() and trajectory.read_text().count("\n") >= 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "interrupted" in out
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "interrupted"
    steps = read_lines(trajectory)
    assert 2 <= len(steps) < 5 and result["steps"] == len(steps)
    assert (run_dir / "report.html").exists()


def test_profile_auto_says_what_it_chose(standin, demo_site, centres, tmp_path):
    server = standin(DemoOracle(centres, normalized), model="Hcompany/Holo2-8B")
    proc = surfer("run", DEMO_TASK, "--url", demo_site.url("index.html"), "--base-url", server.base_url, "--model", server.model,
               "--profile", "auto", "--viewport", f"{VIEWPORT[0]}x{VIEWPORT[1]}", "--out", str(tmp_path / "run"), "--json")
    assert "profile auto:" in proc.stderr and "holo2" in proc.stderr
    assert json.loads((tmp_path / "run" / "run.json").read_text())["config"]["profile"] == "holo2"
    assert proc.returncode == 0, proc.stderr  # holo2 resizes 1100x700 to 1088x704; the oracle's answers still land


def test_profile_auto_with_the_server_down_exits_3(tmp_path):
    proc = surfer("run", "task", "--base-url", f"http://127.0.0.1:{free_port()}/v1", "--profile", "auto")
    assert proc.returncode == 3 and "cannot reach" in proc.stdout


def test_demo_refuses_a_reused_out_and_keeps_the_run_there(tmp_path):
    from typer.testing import CliRunner

    from surfer.apps.cli import app
    from surfer.apps.options import DEMO_RECORDINGS

    earlier = tmp_path / "x"
    shutil.copytree(DEMO_RECORDINGS / "demo-1280x800", earlier)  # a recorded demo run, as `surfer demo --out x` left it
    kept = {p: p.read_bytes() for p in earlier.rglob("*") if p.is_file()}
    result = CliRunner().invoke(app, ["demo", "--out", str(earlier)])
    assert result.exit_code == 2, result.output
    assert " ".join(result.output.split()).startswith(f"error: run directory {earlier} is not empty (it holds a run)")
    assert {p: p.read_bytes() for p in earlier.rglob("*") if p.is_file()} == kept
