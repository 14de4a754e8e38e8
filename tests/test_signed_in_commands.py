"""Starting signed in through every front end: a QA suite whose setup case
signs in once for the others (Playwright's setup projects), a batch whose task
lines name their own state, the MCP server's run_task, and `surfer auth`
(save: a person signs in in a visible browser; check: from the file, and by a
real load). Real Chromium on the login site of tests/login_site.py."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inprocess import surfer
from login_site import ORDER, PASSWORD, TASK, VIEWPORT, AcmeOracle
from surfer.agent.config import AgentConfig, BrowserSettings
from surfer.apps.demo.oracle import frame_mapper
from surfer.tools.browser.state import write_storage_state
from test_signed_in import centres, site  # noqa: F401  (the login site's fixtures)
from test_signed_in import command, files_holding, said, sid_of, typed_password


@pytest.fixture
def state_file(site, tmp_path) -> Path:  # type: ignore[no-untyped-def]
    """A state signed in by the login form's POST, as a file."""
    return write_storage_state(site.sign_in_state(), tmp_path / "alice.json")


def config(model, **browser) -> AgentConfig:  # type: ignore[no-untyped-def]
    return AgentConfig(base_url=model.base_url, model=model.model, profile="holotron", max_steps=8,
                       browser=BrowserSettings(viewport=VIEWPORT, **browser))


SUITE = """name: acme
base_url: {base}
viewport: 1100x700
storage_state: .auth/alice.json
cases:
  - name: latest order
    url: /account
    task: What is my latest order number?
    expect: [{{answer: "{order}"}}, {{text: Welcome back}}]
  - name: sign in
    setup: true
    url: /account
    steps: ["Sign in as alice with the password {{{{secret:ACME_PW}}}}"]
    expect: [{{url: "/account$"}}]
"""


def test_a_qa_setup_case_signs_in_once_for_the_other_cases(standin, centres, site, tmp_path):
    model = standin(AcmeOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0), secret="ACME_PW"))
    suite = tmp_path / "acme.yaml"
    suite.write_text(SUITE.format(base=site.base_url, order=ORDER))
    out = tmp_path / "out"
    proc = command("qa", str(suite), "--base-url", model.base_url, "--model", model.model, "--profile", "holotron",
               "--out", str(out), "--no-cache", "--trace", "on", "--quiet")
    assert proc.returncode == 0, said(proc)
    records = {r["case"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert records["sign in"]["status"] == records["latest order"]["status"] == "passed"
    state = tmp_path / ".auth" / "alice.json"  # next to the suite file, as its storage_state says
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    # the setup case typed the password; the case after it started signed in: one model step, no password
    steps = {name: [json.loads(line) for d in sorted((out / "cases" / r["dir"].split("cases/", 1)[-1]).rglob("trajectory.jsonl"))
                    for line in d.read_text().splitlines()] for name, r in records.items()}
    assert len(steps["sign in"]) == 3 and len(steps["latest order"]) == 1
    assert not any((s.get("action") or {}).get("type") == "type" for s in steps["latest order"])
    assert files_holding(out, sid_of(state)) == [] and files_holding(out, PASSWORD) == []


def test_when_the_setup_case_fails_the_others_do_not_run_signed_out(standin, centres, site, tmp_path):
    model = standin(AcmeOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0), secret="NOT_THE_PASSWORD"))
    suite = tmp_path / "acme.yaml"
    suite.write_text(SUITE.format(base=site.base_url, order=ORDER).replace("ACME_PW", "NOT_THE_PASSWORD") + "model: {max_steps: 4}\n")
    proc = command("qa", str(suite), "--base-url", model.base_url, "--model", model.model, "--profile", "holotron",
               "--out", str(tmp_path / "out"), "--no-cache", "--quiet", env_extra={"NOT_THE_PASSWORD": "wrong"})
    assert proc.returncode == 1, said(proc)
    records = {r["case"]: r for r in map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines())}
    assert records["sign in"]["status"] == "failed"
    assert records["latest order"]["status"] == "error"
    assert records["latest order"]["failure"].startswith("not run: its setup case 'sign in' did not pass")
    assert not (tmp_path / ".auth" / "alice.json").exists()


def test_a_suite_state_file_that_nothing_writes_must_exist(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nbase_url: http://127.0.0.1:9\nstorage_state: gone.json\ncases:\n  - name: c\n    task: x\n")
    proc = command("qa", str(suite), "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--profile", "holo2", "--quiet",
               "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "gone.json does not exist" in said(proc) and "add a setup case" in said(proc)
    suite.write_text("name: s\ncases:\n  - name: c\n    setup: true\n    task: x\n")
    proc = command("qa", str(suite), "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--quiet", "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "setup case 'c' has nowhere to save its sign-in" in said(proc)


async def test_a_batch_task_line_names_its_own_state(standin, centres, site, state_file, shared_browser, tmp_path):
    from surfer.fleet.batch import Batch, ResultsIndex, load_tasks
    from surfer.fleet.browser_pool import SharedBrowser

    model = standin(AcmeOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0)))
    tasks = tmp_path / "tasks.jsonl"
    url = site.url("/account")
    tasks.write_text(json.dumps({"id": "signed-in", "task": TASK, "url": url, "storage_state": state_file.name}) + "\n"
                     + json.dumps({"id": "signed-out", "task": TASK, "url": url}) + "\n")
    from surfer.agent.secrets import Secrets

    batch = Batch(config(model), load_tasks(tasks), tmp_path / "out", concurrency=2, secrets=Secrets({"PASSWORD": PASSWORD}))
    batch._browser = SharedBrowser.given(shared_browser)  # its sessions in the session's shared browser, not a Chromium and a driver of its own (each task's state is its context's)
    summary = await batch.run()
    assert summary.statuses == {"success": 2}
    steps = {r["id"]: r["steps"] for r in ResultsIndex(tmp_path / "out" / "results.jsonl").read()}
    assert steps == {"signed-in": 1, "signed-out": 3}
    assert files_holding(tmp_path / "out", sid_of(state_file)) == []


async def test_mcp_run_task_starts_signed_in_and_refuses_a_missing_state(standin, centres, site, state_file, tmp_path):
    from surfer.agent.secrets import Secrets
    from surfer.apps.mcp_server.runs import RunManager, RunRefused, ServerSettings

    model = standin(AcmeOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0)))
    runs = RunManager(ServerSettings(config(model), None, {}, Secrets({"PASSWORD": PASSWORD}), tmp_path / "runs", tmp_path / "qa"))
    saved = tmp_path / "after.json"
    run = runs.start(TASK, site.url("/account"), storage_state=str(state_file), save_storage_state=str(saved))
    await runs.wait(run)
    summary = run.summary()
    assert summary["status"] == "success" and summary["steps"] == 1 and summary["answer"] == ORDER
    assert "storage_state" not in json.dumps(summary) and not typed_password(run.run_dir)
    assert sid_of(saved) == sid_of(state_file) and stat.S_IMODE(saved.stat().st_mode) == 0o600
    with pytest.raises(RunRefused, match="missing.json does not exist"):
        runs.start(TASK, site.url("/account"), storage_state=str(tmp_path / "missing.json"))


# -- surfer auth ------------------------------------------------------------------------------


def test_auth_check_reads_the_cookies_expiry_and_can_load_the_page(site, state_file, tmp_path):
    url = site.url("/account")
    fresh = command("auth", "check", str(state_file), "--url", url, "--load", "--expect-text", "Welcome back")
    assert fresh.returncode == 0, said(fresh)
    assert "sid @ 127.0.0.1: expires in 59 minutes" in said(fresh) and "signs in: 1 cookie(s) still valid" in said(fresh)
    assert "with no sign-in form" in said(fresh) and sid_of(state_file) not in said(fresh)  # never prints a value
    state = json.loads(state_file.read_text())
    state["cookies"][0]["expires"] = time.time() - 7200
    expired = write_storage_state(state, tmp_path / "expired.json")
    old = command("auth", "check", str(expired), "--url", url)
    assert old.returncode == 1 and "expired 2 hours ago" in said(old) and "every cookie for" in said(old)
    state["cookies"][0].update(expires=time.time() + 600, value="0" * 32)  # unexpired, but the server forgot it
    forgotten = write_storage_state(state, tmp_path / "forgotten.json")
    loaded = command("auth", "check", str(forgotten), "--url", url, "--load")
    assert loaded.returncode == 1 and "/login?next=/account" in said(loaded) and "with a sign-in form" in said(loaded)
    os.chmod(forgotten, 0o644)
    assert "readable by others" in said(command("auth", "check", str(forgotten), "--url", url))


async def test_auth_save_keeps_what_the_person_signed_in_to_when_they_close_the_window(site):
    from surfer.tools.browser.signin import record_sign_in

    async def person(page) -> None:  # type: ignore[no-untyped-def]
        await page.fill("#username", "alice")
        await page.fill("#password", PASSWORD)
        await page.click("#submit")
        await page.wait_for_url("**/account")
        await page.close()  # closing the window is "done"

    state, how = await record_sign_in(site.url("/login"), headless=True, on_open=person, timeout=30)
    assert how == "closed" and state is not None
    assert [c["name"] for c in state["cookies"]] == ["sid"] and state["cookies"][0]["value"] in site.sessions


def test_auth_save_opens_a_visible_browser_and_saves_on_enter(site, xvfb, tmp_path):
    out = tmp_path / "state.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURFER_")}
    proc = subprocess.Popen([sys.executable, "-m", "surfer", "auth", "save", site.url("/prefs"), "--out", str(out)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**env, "DISPLAY": xvfb, "NO_COLOR": "1", "COLUMNS": "200"})
    try:
        prompt = proc.stderr.readline()  # type: ignore[union-attr]
        assert prompt.startswith("sign in in the browser window"), prompt
        proc.stdin.write("\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, rest
    state = json.loads(out.read_text())
    assert [c["name"] for c in state["cookies"]] == ["theme"] and state["origins"][0]["localStorage"][0]["name"] == "acme.theme"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and "1 cookie(s) for 127.0.0.1" in " ".join(rest.split())
    assert "(mode 0600; enter)" in " ".join(rest.split())


def test_auth_save_without_a_display_says_so(site, tmp_path):
    proc = surfer("auth", "save", site.url("/prefs"), "--out", str(tmp_path / "s.json"),  # (tests/inprocess.py)
                  env={"DISPLAY": None, "WAYLAND_DISPLAY": None})
    assert proc.returncode == 2 and "no display" in proc.stderr and not (tmp_path / "s.json").exists()
