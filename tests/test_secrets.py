"""Secrets the model never sees: the model writes {{NAME}}, the executor types
the value, and the value appears in no request the model server received and
in no file the run wrote — even after a form put it into the URL and the page
into its title."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from inprocess import surfer

from surfer.agent.secrets import Secrets
from surfer.core.actions import Goto, TypeText
from surfer.core.errors import ConfigError

VALUE = "hunter2-Zq9!x&y"  # characters that URL encoding changes


def sign_in(request):  # type: ignore[no-untyped-def]
    if request.role == "localizer":
        return {"x": 195, "y": 150}  # the password field's centre, 0..1000 of 1280x800
    if request.role == "validator":
        return {"verdict": "accept", "reasons": "the page says signed in"}
    if "Signed in" in request.text:
        # A model that read the value off the screen and repeats it: scrubbed on the way in.
        return {"thought": f"done; I typed {VALUE}", "notes": f"password was {VALUE}", "action": {"type": "answer", "text": "signed in"}}
    return {"thought": "type the password", "notes": "",
            "action": {"type": "type", "text": "{{PASSWORD}}", "target": "the password field", "submit": True}}


def test_the_value_reaches_the_page_and_nothing_else(standin, pages, tmp_path):
    server = standin(sign_in)
    env = {**os.environ, "NO_COLOR": "1", "SHOP_PASSWORD": VALUE}
    for key in ("SURFER_BASE_URL", "SURFER_MODEL", "SURFER_API_KEY", "SURFER_PROFILE"):
        env.pop(key, None)
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "surfer", "run", f"Sign in with the password {VALUE}", "--url", pages.url("login.html"),
         "--base-url", server.base_url, "--model", server.model, "--profile", "holo2", "--out", str(run_dir),
         "--secret", "PASSWORD=SHOP_PASSWORD", "--json"],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    # the executor typed the real value: the page put it into its title, which the record shows scrubbed
    assert steps[1]["title"] == "Signed in with {{PASSWORD}}"
    assert "pw={{PASSWORD}}" in steps[1]["url"]
    assert steps[0]["action"]["text"] == "{{PASSWORD}}"
    # the model was told which placeholders it may use
    assert "{{PASSWORD}}" in server.requests[0].text
    encoded = ("hunter2-Zq9%21x%26y", "hunter2-Zq9!x&y")
    for request in server.requests:
        body = json.dumps(request.body)
        assert not any(form in body for form in encoded), request.role
    written = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"trajectory.jsonl", "result.json", "report.html", "run.json"}
    for path in written:
        data = path.read_bytes()
        assert not any(form.encode() in data for form in encoded), path
    for stream in (proc.stdout, proc.stderr):
        assert not any(form in stream for form in encoded)
    result = json.loads(proc.stdout)
    assert result["task"] == "Sign in with the password {{PASSWORD}}"


def test_secret_specs_and_values():
    secrets = Secrets.from_env_specs(["PW=SHOP_PW"], {"SHOP_PW": "s3cret"})
    assert secrets.reveal("user {{PW}} / {{ PW }} / {{OTHER}}") == "user s3cret / s3cret / {{OTHER}}"
    assert secrets.scrub("a s3cret b") == "a {{PW}} b"
    assert secrets.scrub_obj({"k": ["s3cret", ("x s3cret",)], "n": 1}) == {"k": ["{{PW}}", ("x {{PW}}",)], "n": 1}
    typed = secrets.reveal_action(TypeText(text="{{PW}}"))
    assert typed.text == "s3cret" and secrets.reveal_action(Goto(url="https://h/?k={{PW}}")).url == "https://h/?k=s3cret"
    overlapping = Secrets({"A": "abc", "B": "abcdef"})
    assert overlapping.scrub("abcdef abc") == "{{B}} {{A}}"
    with pytest.raises(ConfigError, match="not set"):
        Secrets.from_env_specs(["PW=NOPE"], {})
    with pytest.raises(ConfigError, match="NAME=ENV_VAR"):
        Secrets.from_env_specs(["PW"], {})
    with pytest.raises(ConfigError, match="letters, digits"):
        Secrets({"my-pw": "x"})


def test_a_secret_flag_naming_an_unset_variable_exits_2(tmp_path):
    proc = surfer("run", "t", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",  # (in this process: tests/inprocess.py)
                  "--profile", "holo2", "--secret", "PW=NOT_SET_ANYWHERE", "--out", str(tmp_path / "r"),
                  env={"NOT_SET_ANYWHERE": None})
    assert proc.returncode == 2 and "NOT_SET_ANYWHERE is not set" in proc.stdout
