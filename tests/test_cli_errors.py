"""Misuse met on first use answers with one line and exit 2, through every door:
a model server URL without a scheme (flags of every command, SURFER_BASE_URL, a
config file, the SDK), an unknown profile or a missing Chromium in `surfer demo`,
a browser window without a display. And the help says what the flags take."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import surfer
from surfer.apps.cli import app
from surfer.core.errors import ConfigError
from surfer.models.endpoint import check_server_url
from surfer.tools.chromium import check_display

HINT = "is not an http(s) URL: did you mean http://127.0.0.1:8000/v1?"
CLEAN_ENV = ("SURFER_BASE_URL", "SURFER_MODEL", "SURFER_API_KEY", "SURFER_PROFILE")


@pytest.fixture(autouse=True)
def _no_surfer_env(monkeypatch):  # type: ignore[no-untyped-def]
    for key in CLEAN_ENV:
        monkeypatch.delenv(key, raising=False)


def invoke(*args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args), env=env)


def one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    return lines[0]


@pytest.mark.parametrize(("url", "message"), [
    ("127.0.0.1:8000", "did you mean http://127.0.0.1:8000/v1?"),
    ("localhost:8000/v1", "did you mean http://localhost:8000/v1?"),
    ("example.com/v1/", "did you mean http://example.com/v1?"),
    ("[::1]:8000", "did you mean http://[::1]:8000/v1?"),
    ("ftp://127.0.0.1:8000/v1", "is not an http(s) URL with a host"),
    ("htp:/nowhere", "is not an http(s) URL with a host"),
    ("http:///v1", "is not an http(s) URL with a host"),
    ("http://a:port/v1", "is not a URL"),
    ("http://127.0.0.1:8000/v1/chat/completions", "is a route of the server, not its base URL: did you mean http://127.0.0.1:8000/v1?"),
    ("https://api.example.com/v1/models/", "did you mean https://api.example.com/v1?"),
])
def test_a_server_url_that_is_not_http_names_itself_and_the_likely_one(url, message):
    with pytest.raises(ValueError, match=re.escape(f"{url!r}") + ".*" + re.escape(message)):
        check_server_url(url)
    assert check_server_url(" http://127.0.0.1:8000/v1 ") == "http://127.0.0.1:8000/v1"


ENTRY_POINTS = {  # name: (arguments, environment, config file text)
    "run": (["run", "x", "--url", "http://127.0.0.1:9/", "--base-url", "127.0.0.1:8000", "--model", "m"], {}, None),
    "batch": (["batch", "{tasks}", "--out", "{out}", "--base-url", "127.0.0.1:8000"], {}, None),
    "batch, two servers": (["batch", "{tasks}", "--out", "{out}", "--base-url", "http://127.0.0.1:9/v1",
                            "--base-url", "127.0.0.1:8000"], {}, None),
    "qa": (["qa", "{suite}", "--out", "{out}", "--base-url", "127.0.0.1:8000"], {}, None),
    "qa, the suite's model": (["qa", "{model_suite}", "--out", "{out}"], {}, None),
    "mcp": (["mcp", "--base-url", "127.0.0.1:8000"], {}, None),
    "doctor": (["doctor", "--base-url", "127.0.0.1:8000", "--no-browser"], {}, None),
    "calibrate": (["calibrate", "--base-url", "127.0.0.1:8000", "--model", "m"], {}, None),
    "SURFER_BASE_URL": (["run", "x", "--out", "{out}"], {"SURFER_BASE_URL": "127.0.0.1:8000"}, None),
    "config file": (["run", "x", "--config", "{config}", "--out", "{out}"], {}, 'base_url = "127.0.0.1:8000"\n'),
    "config file, a role": (["batch", "{tasks}", "--config", "{config}", "--out", "{out}"], {},
                            '[localizer]\nbase_url = "127.0.0.1:8000"\n'),
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_base_url_without_a_scheme_is_one_line_and_exit_2_at_every_entry_point(entry, tmp_path):
    args, env, config_text = ENTRY_POINTS[entry]
    (tmp_path / "tasks.jsonl").write_text('{"task": "x", "url": "http://127.0.0.1:9/"}\n')
    suite = "name: s\nbase_url: http://127.0.0.1:9\ncases:\n  - name: a\n    steps: [x]\n"
    (tmp_path / "suite.yaml").write_text(suite)
    (tmp_path / "model.yaml").write_text(suite + "model:\n  base_url: 127.0.0.1:8000\n")
    if config_text:
        (tmp_path / "surfer.toml").write_text(config_text)
    paths = {"tasks": tmp_path / "tasks.jsonl", "suite": tmp_path / "suite.yaml", "model_suite": tmp_path / "model.yaml",
             "out": tmp_path / "out",
             "config": tmp_path / "surfer.toml"}
    result = invoke(*(a.format(**paths) for a in args), env={**env, "COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    line = one_error_line(result.output)
    assert "'127.0.0.1:8000' " + HINT in line and "Value error" not in line
    where = {"SURFER_BASE_URL": "SURFER_BASE_URL", "config file": "surfer.toml", "config file, a role": "surfer.toml",
             "qa, the suite's model": "model.yaml"}
    assert where.get(entry, "") in line  # where the value came from
    assert not (tmp_path / "out").exists()


def test_the_sdk_refuses_a_base_url_without_a_scheme_with_a_config_error():
    with pytest.raises(ConfigError, match=re.escape("(Agent arguments): base_url: 'localhost:8000/v1' is not an http(s) "
                                                    "URL: did you mean http://localhost:8000/v1?")):
        surfer.Agent(base_url="localhost:8000/v1")
    with pytest.raises(ConfigError, match=r"policy\.base_url: 'ftp://x/v1' is not an http\(s\) URL with a host"):
        surfer.Agent(policy={"base_url": "ftp://x/v1"})
    with pytest.raises(ConfigError, match=r"\(SURFER_BASE_URL\): base_url: 'localhost:8000' .* http://localhost:8000/v1\?"):
        surfer.load_config(environ={"SURFER_BASE_URL": "localhost:8000"})


@pytest.mark.parametrize(("args", "env", "message"), [
    (["run", "x", "--url", "http://127.0.0.1:9/", "--base-url", "127.0.0.1:8000", "--model", "m"], {}, HINT),
    (["demo", "--profile", "foo"], {}, "unknown profile 'foo'; choose one of:"),
    (["demo"], {"SURFER_CHROMIUM": "/nope/chromium"}, "SURFER_CHROMIUM=/nope/chromium is not an executable file"),
])
def test_the_process_says_one_line_and_exits_2_without_a_traceback(args, env, message, tmp_path):
    """The process as a user starts it (`surfer run` starts its browser early; a traceback is printed by the CLI)."""
    environ = {**{k: v for k, v in os.environ.items() if k not in CLEAN_ENV}, **env, "NO_COLOR": "1", "COLUMNS": "80"}
    proc = subprocess.run([sys.executable, "-m", "surfer", *args, "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120, env=environ)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in one_error_line(proc.stdout + proc.stderr)
    assert not (tmp_path / "run").exists()


def test_a_browser_window_without_a_display_is_a_usage_error_everywhere(monkeypatch, tmp_path):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    if not sys.platform.startswith("linux"):
        pytest.skip("a display is checked for on Linux")
    with pytest.raises(ConfigError, match="no display.*DISPLAY is not set.*Xvfb"):
        check_display(headless=False)
    check_display(headless=True)
    for args in (["demo", "--headful", "--out", str(tmp_path / "demo")],
                 ["run", "x", "--url", "http://127.0.0.1:9/", "--headful", "--out", str(tmp_path / "run")]):
        result = invoke(*args)
        assert result.exit_code == 2, result.output
        line = one_error_line(result.output)
        assert "DISPLAY is not set" in line and "Xvfb" in line
    assert not (tmp_path / "demo").exists() and not (tmp_path / "run").exists()


def test_a_run_directory_that_cannot_be_made_is_a_usage_error(tmp_path):
    """Found before anything starts (it was an internal error at the first step, with a traceback)."""
    (tmp_path / "notes.txt").write_text("mine")
    result = invoke("run", "x", "--url", "http://127.0.0.1:9/", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                    "--out", str(tmp_path / "notes.txt" / "a" / "run"))
    assert result.exit_code == 2, result.output
    assert f"cannot be made: {tmp_path / 'notes.txt'} is a file, not a directory" in one_error_line(result.output)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"] and (tmp_path / "notes.txt").read_text() == "mine"
    # a directory that can be made is probed, not left behind
    from surfer.agent.rundir import claim_run_dir

    assert claim_run_dir(tmp_path / "new" / "run") == tmp_path / "new" / "run" and not (tmp_path / "new").exists()


def test_run_json_says_a_usage_error_on_stdout_too(tmp_path):
    """`surfer run --json` printed nothing on stdout for a usage error (exit 2): a script reading it got empty input."""
    import json

    result = invoke("run", "x", "--url", "http://127.0.0.1:9/", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                    "--viewport", "1x1", "--json", "--out", str(tmp_path / "run"))
    assert result.exit_code == 2, result.output
    line = json.loads(result.stdout)
    assert (line["status"], line["error_kind"], line["run_dir"]) == ("error", "config", None)
    assert "viewport 1x1 is out of range" in line["reason"] and not (tmp_path / "run").exists()


def test_calibrate_does_not_tell_its_user_to_run_calibrate():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = invoke("calibrate", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "my-own-model")
    assert result.exit_code == 3, result.output  # nothing listens there
    said = " ".join(result.output.split())
    assert "using the generic 'openai' profile" in said and "this calibration checks whether that frame fits" in said
    assert "surfer calibrate" not in said


def test_flags_show_no_value_label_in_the_help():
    from test_docs import _reference

    reference = _reference()  # docs/hooks/reference.py, which makes the CLI reference
    result = invoke("--help", env={"COLUMNS": "100"})
    assert result.exit_code == 0
    version = next(line for line in result.output.splitlines() if "--version" in line)
    assert re.search(r"--version\s+-V\s+Print surfer's version", version), version
    # a command's line is cut where the terminal ends, not where its docstring's line does
    wide = invoke("--help", env={"COLUMNS": "260"}).output
    assert re.search(r"│ run +Run a task .* step by step; at an interactive terminal, follow-up tasks .* \(a session\)\. +│", wide), wide
    demo = invoke("demo", "--help", env={"COLUMNS": "100"}).output
    assert "<bool>" not in demo and re.search(r"--headful\s+Show the browser window", demo)
    assert re.search(r"--out\s+<path>", demo)  # an option that takes a value keeps its label
    flags = 0
    for path, command, ctx in reference.walk_commands():  # every command, `surfer bench ...` included
        for param in command.get_params(ctx):
            if getattr(param, "is_flag", False) and not param.count:
                flags += 1
                assert not param.display_type_rich(ctx), (path, param.opts)
    assert flags > 50
    markdown = reference.cli_markdown()
    assert "- `-V, --version` — Print surfer's version and exit." in markdown
    assert "- `--base-url URL` — OpenAI-compatible endpoint" in markdown


def test_files_saved_with_a_byte_order_mark_are_read(tmp_path):
    # as Windows editors save UTF-8 (Notepad, PowerShell 5's Out-File -Encoding utf8)
    from surfer.agent.answers import AnswerSchema
    from surfer.agent.config import read_config_file
    from surfer.agent.questions import PresetAnswers
    from surfer.fleet.batch.tasks import load_tasks

    def bom(name: str, text: str) -> Path:
        (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
        return tmp_path / name

    tasks = load_tasks(bom("tasks.jsonl", '{"id": "café", "task": "t", "url": "https://example.com"}\n'))
    assert [task.id for task in tasks] == ["café"]
    # PowerShell's `echo ... > tasks.jsonl` writes UTF-16 with its mark (it was "'utf-8' codec can't decode byte 0xff")
    (tmp_path / "utf16.jsonl").write_bytes('{"id": "café", "task": "t"}\r\n\r\n'.encode("utf-16"))
    assert [task.id for task in load_tasks(tmp_path / "utf16.jsonl")] == ["café"]
    assert read_config_file(bom("surfer.toml", "max_steps = 5\n")) == {"max_steps": 5}
    assert AnswerSchema.load(bom("schema.json", '{"type": "object", "properties": {"a": {"type": "string"}}}'))
    assert PresetAnswers.load(bom("answers.json", '{"colour": "blue"}'))
    (tmp_path / "latin1.toml").write_bytes("model = 'caf\xe9'\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="latin1.toml is not UTF-8 text"):
        read_config_file(tmp_path / "latin1.toml")
