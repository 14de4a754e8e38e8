"""`surfer qa` end to end as CI runs it: a subprocess, the stand-in server
answering as the sample suite's oracle over real HTTP, real Chromium on the
demo site; exit codes, JUnit read back by junitparser, the action cache
(zero model calls on a re-run, healing after a layout change) and secrets.
Checks of what a run leaves behind run the command in this process
(tests/inprocess.py), exit codes included (the real entry point's are
test_cli's); its signals and the README's commands in a child process."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from inprocess import UNSET, Ran, surfer
from junitparser import Error, Failure, JUnitXml, Properties

from surfer.apps.demo.oracle import DEMO_SITE
from surfer.apps.demo.qa_oracle import SAMPLE_SUITE, measure_qa_targets, qa_oracle
from surfer.apps.demo.static_site import StaticSite
from surfer.models.profiles import get_profile

SECRET = "Tr0ub4dor-qa-7f3e9"  # unlikely to occur anywhere by chance
FRAME = get_profile("holotron").frame


def qa_process(*args: str, secret: str = SECRET, timeout: float = 180) -> subprocess.CompletedProcess:
    """`surfer qa ARGS --quiet` in a child process."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "LIBRARY_PASSWORD": secret}
    for key in UNSET:
        env.pop(key, None)
    return subprocess.run([sys.executable, "-m", "surfer", "qa", *args, "--quiet"], capture_output=True, text=True,
                          timeout=timeout, env=env)


def qa(*args: str, secret: str = SECRET) -> Ran:
    """`surfer qa ARGS --quiet` in this process."""
    return surfer("qa", *args, "--quiet", env={"LIBRARY_PASSWORD": secret})


def endpoint(server) -> list[str]:  # type: ignore[no-untyped-def]
    return ["--base-url", server.base_url, "--model", server.model, "--profile", "holotron"]


def results(out: Path) -> dict[str, dict]:
    return {r["case"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def roles(server, since: int = 0) -> dict[str, int]:  # type: ignore[no-untyped-def]
    counts: dict[str, int] = {}
    for request in server.requests[since:]:
        counts[request.role] = counts.get(request.role, 0) + 1
    return counts


def junit_cases(path: Path) -> dict[str, object]:
    return {case.name: case for suite in JUnitXml.fromfile(str(path)) for case in suite}


def properties(path: Path, case: str) -> dict[str, str]:
    """A case's properties: on its testsuite, `<case>.<key>` (Surefire's schema has none in a testcase)."""
    found: dict[str, str] = {}
    for suite in JUnitXml.fromfile(str(path)):
        assert all(c.child(Properties) is None for c in suite)
        found.update({p.name[len(case) + 1:]: p.value for p in suite.properties() if p.name.startswith(case + ".")})
    return found


@pytest.fixture(scope="module")
async def centres(demo_site, shared_browser):
    return await measure_qa_targets(demo_site.base_url, browser=shared_browser)


def test_sample_suite_passes_then_reruns_from_the_cache_without_the_model(standin, demo_site, centres, tmp_path):
    server = standin(qa_oracle(centres, FRAME))
    cache = tmp_path / "cache"
    first = tmp_path / "first"
    common = [str(SAMPLE_SUITE), "--var", f"demo_url={demo_site.base_url}", "--cache", str(cache), *endpoint(server)]

    proc = qa(*common, "--out", str(first), "--junit", str(tmp_path / "ci" / "junit.xml"), "--html", str(tmp_path / "ci" / "qa.html"))
    assert proc.returncode == 0, proc.stderr
    cases = junit_cases(tmp_path / "ci" / "junit.xml")
    assert set(cases) == {"sign in and read an order", "register a member", "opening hours"}
    for name, case in cases.items():
        assert case.is_passed, name
        assert Path(case.system_out.strip()) == first / "cases" / "library-smoke" / results(first)[name]["dir"].split("/", 2)[2]
        assert properties(tmp_path / "ci" / "junit.xml", name)["cached_steps"] == "0"
    first_calls = roles(server)
    assert first_calls["policy"] >= 8 and first_calls["localizer"] >= 6
    summary = (tmp_path / "ci" / "qa.html").read_text()
    for record in results(first).values():
        report = first / record["dir"] / "report.html"
        assert report.exists() and os.path.relpath(report, tmp_path / "ci") in summary
        assert "step-01" in report.read_text()  # the case report links its steps' run directories
    entry = json.loads((cache / "library-smoke" / "register-a-member.json").read_text())
    click = entry["steps"][1]["actions"][2]
    assert click["element"] == {"role": "button", "name": "Create account", "tag": "button", "selector": "#submit"}
    assert (cache / "library-smoke" / "register-a-member" / click["crop"]).exists()

    before = len(server.requests)
    second = first  # the same --out again: the earlier results give way, and the command says so
    proc = qa(*common, "--out", str(second))
    assert proc.returncode == 0, proc.stderr
    assert f"note: {first} holds an earlier run's results: this run replaces them" in " ".join(proc.stderr.split())
    rerun = results(second)
    # the two cases with deterministic expectations made no model call at all; the third only its
    # plain-language expectation, judged by the validator on the final screen
    assert rerun["register a member"]["model_calls"] == 0 and rerun["register a member"]["cached_steps"] == 2
    assert rerun["opening hours"]["model_calls"] == 0 and rerun["opening hours"]["cached_steps"] == 1
    assert rerun["sign in and read an order"]["cached_steps"] == 1
    new = server.requests[before:]
    assert [r.role for r in new] == ["validator"] and "lists order #1044" in new[0].text
    assert not any(r["cache_written"] for r in rerun.values())  # nothing changed, nothing rewritten
    assert properties(second / "junit.xml", "register a member")["cached_steps"] == "2"

    # the secret was typed (the site refuses a placeholder) but is in no file and no request
    for root in (first, second, cache, tmp_path / "ci"):
        for path in root.rglob("*"):
            if path.is_file():
                assert SECRET.encode() not in path.read_bytes(), path
    for request in server.requests:
        assert SECRET not in json.dumps(request.body)
    assert any("{{LIBRARY_PASSWORD}}" in r.text for r in server.requests if r.role == "policy")  # the agent's placeholder
    typed = json.loads((cache / "library-smoke" / "sign-in-and-read-an-order.json").read_text())["steps"][0]["actions"][1]
    assert typed["action"]["text"] == "{{LIBRARY_PASSWORD}}"
    assert SECRET not in proc.stdout + proc.stderr


def write_suite(path: Path, site_url: str, body: str) -> Path:
    path.write_text(f"name: checks\nbase_url: {site_url}\nconcurrency: 4\ncases:\n{body}")
    return path


SIGN_IN = """  - name: {name}
    url: login.html
    steps:
      - Sign in as alice with the password {{{{secret:LIBRARY_PASSWORD}}}}
    expect: {expect}
"""


def test_failing_and_flaky_cases_exit_1_with_reasons_in_junit(standin, demo_site, centres, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a CI job runs in its checkout
    server = standin(qa_oracle(centres, FRAME, flaky_hours=True))
    suite = write_suite(tmp_path / "checks.yaml", demo_site.base_url, "".join([
        SIGN_IN.format(name="hidden text does not count", expect='[{text: "555.55"}]'),
        SIGN_IN.format(name="wrong order", expect='["The orders table lists order #9999"]'),
        SIGN_IN.format(name="wrong page", expect='[{url: "/login\\\\.html$"}]'),
        SIGN_IN.format(name="visible text", expect='[{text: "794.36"}, {text: "Signed in as alice."}]'),
        "  - name: hours\n    url: index.html\n    task: Find the opening hours\n    expect: [{answer: '9:00'}]\n",
    ]))
    out = tmp_path / "out"
    # GitHub's step summary collects what every command of the step writes there (each appends): kept
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "summary.md").write_text("## Smoke\n\nbuilt\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "reports" / "summary.md"))
    proc = qa(str(suite), "--out", "out", "--junit", "reports/junit.xml", "--markdown", "reports/summary.md", "--retries", "1",
              "--no-cache", *endpoint(server), "--trace", "retain-on-failure", "--video", "retain-on-failure")
    assert proc.returncode == 1, proc.stderr
    # the suite types a secret and has no allowed domains: said once, before the cases ran (five of them)
    warned = [line for line in proc.stderr.splitlines() if "can be typed on any site" in line]
    assert len(warned) == 1 and warned[0].startswith("warning: the secret LIBRARY_PASSWORD ") and "--allow-domain" in warned[0]
    # the Markdown summary (a CI job's summary page): the totals, then a row a case, those that did not pass first
    earlier, summary = (tmp_path / "reports" / "summary.md").read_text().split("\n\n### surfer qa\n")
    assert earlier == "## Smoke\n\nbuilt"
    summary = ("### surfer qa\n" + summary).splitlines()
    assert summary[0] == "### surfer qa" and summary[2].startswith("2 passed (1 flaky), 3 failed, 0 error(s), of 5 in ")
    rows = [line.split(" | ")[2:4] for line in summary if line.startswith("| ") and " | checks | " in line]
    assert [status for _, status in rows] == ["failed"] * 3 + ["passed", "flaky"]
    assert next(line for line in summary if "| wrong order |" in line).endswith("does not list order #9999. |")
    xml = (tmp_path / "reports" / "junit.xml").read_text()
    assert '<testsuites name="surfer qa" tests="5" failures="3" errors="0" skipped="0" ' in xml  # the totals, as CI reads them
    cases = junit_cases(tmp_path / "reports" / "junit.xml")
    # a failed case carries its trace, video and report where CI servers read them: relative to the directory the
    # command ran in (GitLab reads them against the project directory, Jenkins against the workspace)
    attached = [line.split("|", 1)[1].rstrip("]") for line in (cases["wrong order"].system_out or "").splitlines()
                if line.startswith("[[ATTACHMENT|")]
    assert any(a.endswith("/attempt-2/trace.zip") for a in attached), attached
    assert any(a.rsplit("/", 1)[-1] in ("video.mp4", "video.webp") for a in attached), attached
    assert any(a.endswith("report.html") for a in attached) and all(a.startswith("out/cases/") for a in attached)
    assert all((tmp_path / a).is_file() for a in attached)
    assert "[[ATTACHMENT|" not in (cases["visible text"].system_out or "")  # a passed case keeps nothing
    assert not list((out / "cases").glob("*/visible-text/attempt-1/trace.zip"))
    assert "<video controls muted" in (out / "index.html").read_text()
    assert cases["visible text"].is_passed
    hidden = cases["hidden text does not count"].result[0]
    assert isinstance(hidden, Failure) and "555.55" in hidden.message and "not visible" in hidden.message
    wrong = cases["wrong order"].result[0]
    assert isinstance(wrong, Failure) and "does not list order #9999" in wrong.message  # the validator's reasons
    assert "URL is" in cases["wrong page"].result[0].message and "orders.html" in cases["wrong page"].result[0].message
    hours = cases["hours"]
    assert hours.is_passed and properties(tmp_path / "reports" / "junit.xml", "hours")["flaky"] == "true"
    assert properties(tmp_path / "reports" / "junit.xml", "hours")["attempts"] == "2"
    flaky = hours._elem.findall("flakyFailure")  # Surefire's element: the failed attempt's reason is kept
    assert len(flaky) == 1 and "9:00" in flaky[0].get("message") and flaky[0].get("type") == "failed"
    records = results(out)
    assert records["hours"]["status"] == "flaky" and records["wrong order"]["attempts"] == 2  # retried, failed again
    assert "flaky" in (out / "index.html").read_text()
    assert not (tmp_path / "surfer-cache").exists()  # --no-cache writes nothing


def test_a_step_that_cannot_finish_fails_the_case_naming_the_step(standin, demo_site, centres, tmp_path):
    import socket

    server = standin(qa_oracle(centres, FRAME))
    with socket.socket() as sock:  # an app that is not up
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    suite = write_suite(tmp_path / "s.yaml", demo_site.base_url,
                        "  - name: impossible\n    url: index.html\n    steps: [Open the registration page, Fly to the moon]\n"
                        "  - name: possible\n    url: index.html\n    steps: [Open the registration page]\n"
                        f"  - name: app down\n    url: {down}\n    task: Find the opening hours\n")
    # as in a CI log (no terminal, no --quiet; colour forced, as CI jobs often do): a plain line per case as it
    # finishes, no live table redrawn into the log, the summary on one line
    proc = surfer("qa", str(suite), "--out", str(tmp_path / "out"), *endpoint(server), env={"COLUMNS": None, "FORCE_COLOR": "1"})
    assert proc.returncode == 1
    assert "\x1b[1A" not in proc.stderr and "\x1b[2K" not in proc.stderr  # (cursor movements)
    lines = proc.stderr.splitlines()
    assert "failed checks/impossible  (2 step(s), 0 from cache, " in proc.stderr and "passed checks/possible  (1 step(s)" in proc.stderr
    assert not any(line.split() == ["case", "status", "step", "time"] for line in lines)  # no table
    assert any(line.startswith("1 passed (0 flaky), 1 failed, 1 error(s), of 3 in ") and line.endswith(" step(s) from the cache") for line in lines)
    cases = junit_cases(tmp_path / "out" / "junit.xml")
    failure = cases["impossible"].result[0]
    assert isinstance(failure, Failure) and failure.message.startswith("step 2 (Fly to the moon) ended failed")
    error = cases["app down"].result[0]  # the browser's error, said once
    assert isinstance(error, Error) and error.message.count(f"could not open {down}") == 1 and "ERR_CONNECTION_REFUSED" in error.message

    # --rerun-failed: only the cases that did not pass there (with --tag/--grep, those among them)
    from surfer.qa.outcomes import failed_in

    assert failed_in(tmp_path / "out") == {"checks/impossible", "checks/app-down"}  # (a run of them: the SIGTERM test)
    (tmp_path / "green").mkdir()
    (tmp_path / "green" / "results.jsonl").write_text(json.dumps({"id": "checks/possible", "case": "possible", "status": "passed"}) + "\n")
    green = qa(str(suite), "--out", str(tmp_path / "none"), "--rerun-failed", str(tmp_path / "green"), *endpoint(server))
    assert green.returncode == 0 and "nothing to re-run: every case passed in" in green.stderr and not (tmp_path / "none").exists()
    nowhere = qa(str(suite), "--rerun-failed", str(tmp_path / "nowhere"), *endpoint(server))
    assert nowhere.returncode == 2 and "no results.jsonl or attempts.jsonl of a surfer qa run there" in nowhere.stderr
    # the default cache sits next to the suite file, and holds only the case that passed
    assert sorted(p.name for p in (tmp_path / "surfer-cache" / "checks").glob("*.json")) == ["possible.json"]


def test_unreachable_model_server_exits_3(demo_site, tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    suite = write_suite(tmp_path / "s.yaml", demo_site.base_url, "  - name: c\n    url: index.html\n    task: t\n"
                        "  - name: d\n    url: index.html\n    task: t\n")
    proc = qa(str(suite), "--out", str(tmp_path / "out"), "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m",
              "--concurrency", "1")  # (in this process: the real process's exit codes are test_cli's)
    assert proc.returncode == 3, proc.stderr
    assert "cannot reach the model server" in " ".join(proc.stderr.split())
    assert isinstance(junit_cases(tmp_path / "out" / "junit.xml")["c"].result[0], Error)
    # the case has no outcome: results.jsonl holds none, attempts.jsonl says why
    assert not (tmp_path / "out" / "results.jsonl").exists()
    attempts = [json.loads(line) for line in (tmp_path / "out" / "attempts.jsonl").read_text().splitlines()]
    assert [(a["case"], a["status"], a["error_kind"]) for a in attempts][0] == ("c", "unfinished", "unreachable")
    # the case the stopped run never started is there too (no attempt), for --rerun-failed
    assert [(a["case"], a["status"], a["attempts"]) for a in attempts][1:] == [("d", "unfinished", 0)]


def test_an_app_that_is_down_stops_the_run_before_any_case_exit_3(tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        app = f"http://127.0.0.1:{sock.getsockname()[1]}/"  # nothing listens there
    suite = write_suite(tmp_path / "s.yaml", app, "".join(f"  - name: {name}\n    url: {name}.html\n    task: t\n    retries: 2\n"
                                                          for name in ("c", "d", "e")))
    out = tmp_path / "out"
    proc = qa(str(suite), "--out", str(out), "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--profile", "holotron")
    assert proc.returncode == 3, proc.stderr  # not 1: no test failed, the app was not there
    why = f"the app under test cannot be reached at {app}: nothing listens on port {app[17:-1]} (is it running?)"
    assert f"stopped: {why}" in proc.stderr.splitlines(), proc.stderr  # said once, on one line
    assert proc.stderr.count("nothing listens") == 1 and not (out / "cases").exists()  # no case started
    errors = {name: case.result[0] for name, case in junit_cases(out / "junit.xml").items()}
    assert set(errors) == {"c", "d", "e"} and all(isinstance(e, Error) and e.message == f"not run: {why}" for e in errors.values())
    attempts = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()]
    assert [(a["case"], a["status"], a["attempts"]) for a in attempts] == [(n, "unfinished", 0) for n in "cde"]


async def test_an_app_that_accepts_connections_but_never_answers_is_not_there():
    from surfer.qa.preflight import unreachable_app

    held: list[asyncio.StreamWriter] = []
    requests: list[bytes] = []

    async def hang(reader, writer):  # type: ignore[no-untyped-def]
        requests.append(await reader.readuntil(b"\r\n\r\n"))
        held.append(writer)  # a hung app: the request is read, no answer ever comes

    async def close(reader, writer):  # type: ignore[no-untyped-def]
        writer.close()

    async def not_found(reader, writer):  # type: ignore[no-untyped-def]
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    servers = [await asyncio.start_server(handler, "127.0.0.1", 0) for handler in (hang, close, not_found)]
    hung, closing, answering = (f"http://127.0.0.1:{s.sockets[0].getsockname()[1]}/app/?x=1" for s in servers)
    try:
        assert await unreachable_app([answering, hung], answer=0.5) == (
            f"the app under test cannot be reached at {hung}: it accepts connections but sent no answer in 0.5 s "
            "(is it running?)")
        assert requests[0].startswith(b"GET /app/?x=1 HTTP/1.1\r\n")  # the base URL itself is asked for
        assert "closes them without an answer" in (await unreachable_app([closing], answer=5) or "")
        assert await unreachable_app([answering], answer=5) is None  # any HTTP answer is the app's (a 404 too)
    finally:
        for writer in held:
            writer.close()
        for server in servers:
            server.close()


def test_an_app_that_crashes_mid_suite_stops_the_run_at_the_first_case_it_fails(standin, tmp_path):
    import threading

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<h1>Opening hours: 9:00</h1>")
    site = StaticSite(tmp_path / "site").__enter__()

    def crash_then_answer(request):  # type: ignore[no-untyped-def]
        if request.role == "validator":
            return {"verdict": "accept", "reasons": "The page shows 9:00."}
        threading.Thread(target=site.__exit__, args=(None, None, None)).start()  # the app goes away during case 1
        return {"thought": "done", "notes": "", "action": {"type": "answer", "text": "9:00"}}

    server = standin(crash_then_answer)
    suite = write_suite(tmp_path / "s.yaml", site.base_url, "".join(
        f"  - name: c{i}\n    url: index.html\n    task: t\n    retries: 2\n" for i in range(4)))
    out = tmp_path / "out"
    proc = qa(str(suite), "--out", str(out), "--concurrency", "1", "--no-cache", *endpoint(server))
    assert proc.returncode == 3, proc.stderr
    assert f"stopped: the app under test cannot be reached at {site.base_url}: nothing listens" in proc.stderr
    assert [r.role for r in server.requests] == ["policy", "validator"]  # case 1 only
    cases = junit_cases(out / "junit.xml")
    assert cases["c0"].is_passed and isinstance(cases["c1"].result[0], Error) and "nothing listens" in cases["c1"].result[0].message
    assert cases["c2"].is_skipped and cases["c3"].is_skipped  # not started, and c1 not retried: one error, said once
    assert [r["attempts"] for r in map(json.loads, (out / "attempts.jsonl").read_text().splitlines())] == [1, 0, 0]


async def test_cache_heals_after_the_button_moves_and_is_renamed(standin, shared_browser, tmp_path):
    site_dir = tmp_path / "site"
    shutil.copytree(DEMO_SITE, site_dir)
    cache, login = tmp_path / "cache", site_dir / "login.html"
    with StaticSite(site_dir) as site:
        server = standin(qa_oracle(await measure_qa_targets(site.base_url, browser=shared_browser), FRAME))
        suite = write_suite(tmp_path / "s.yaml", site.base_url, SIGN_IN.format(name="sign in", expect='[{text: "794.36"}]'))
        args = [str(suite), "--cache", str(cache), *endpoint(server)]
        assert (await asyncio.to_thread(qa, *args, "--out", str(tmp_path / "o1"))).returncode == 0
        entry_file = cache / "checks" / "sign-in.json"
        recorded = json.loads(entry_file.read_text())["steps"][0]["actions"][2]
        assert recorded["element"]["name"] == "Sign in"

        for change, name in ((("<button id=", '<p style="height:130px"></p><button id='), "Sign in"),
                             ((">Sign in</button>", ">Log in</button>"), "Log in")):
            login.write_text(login.read_text().replace(*change))
            server.respond = qa_oracle(await measure_qa_targets(site.base_url, browser=shared_browser), FRAME)  # the model sees the new layout
            before = len(server.requests)
            out = tmp_path / f"o-{name}"
            proc = await asyncio.to_thread(qa, *args, "--out", str(out))
            assert proc.returncode == 0, proc.stderr
            assert roles(server, before) == {"localizer": 1}  # healed by the localizer alone, no policy call
            record = results(out)["sign in"]
            assert record["healed_steps"] == [1] and record["cache_written"] and record["cached_steps"] == 1
            assert properties(out / "junit.xml", "sign in")["healed_steps"] == "step 1"
            healed = json.loads(entry_file.read_text())["steps"][0]["actions"][2]
            assert healed["element"]["name"] == name and healed["element"]["selector"] == "#signin"
            assert healed["points"] != recorded["points"] or name != "Sign in"
            recorded = healed
        # healed entries replay cleanly: no model call the next time
        before = len(server.requests)
        assert (await asyncio.to_thread(qa, *args, "--out", str(tmp_path / "o-last"))).returncode == 0
        assert len(server.requests) == before


def test_a_cache_entry_that_replays_into_a_failure_is_dropped_and_rerun(standin, demo_site, centres, tmp_path):
    server = standin(qa_oracle(centres, FRAME))
    suite = write_suite(tmp_path / "s.yaml", demo_site.base_url, SIGN_IN.format(name="sign in", expect='[{text: "Signed in as alice."}]'))
    cache = tmp_path / "cache"
    args = [str(suite), "--cache", str(cache), *endpoint(server)]
    assert qa(*args, "--out", str(tmp_path / "o1")).returncode == 0
    entry_file = cache / "checks" / "sign-in.json"
    entry_file.write_text(entry_file.read_text().replace('"text": "alice"', '"text": "mallory"'))  # a stale entry
    before = len(server.requests)
    proc = qa(*args, "--out", str(tmp_path / "o2"))
    assert proc.returncode == 0, proc.stderr
    record = results(tmp_path / "o2")["sign in"]
    assert record["cache_dropped"] and record["attempts"] == 2 and record["status"] == "passed"
    assert roles(server, before)["policy"] >= 4  # the re-run used the model
    assert '"text": "alice"' in entry_file.read_text() and "mallory" not in entry_file.read_text()
    assert properties(tmp_path / "o2" / "junit.xml", "sign in")["cache_dropped"] == "true"

    before = len(server.requests)  # --update-cache: every step with the model, the entry rewritten
    assert qa(*args, "--out", str(tmp_path / "o3"), "--update-cache").returncode == 0
    assert roles(server, before)["policy"] >= 4 and results(tmp_path / "o3")["sign in"]["cached_steps"] == 0
    assert json.loads(entry_file.read_text())["steps"][0]["actions"][0]["action"]["text"] == "alice"


def test_sigterm_reports_the_finished_cases_and_exits_143(standin, demo_site, centres, tmp_path):
    import signal
    import time

    server = standin(qa_oracle(centres, FRAME), hang_after=2)  # case 1: policy + validator; case 2 hangs
    suite = write_suite(tmp_path / "s.yaml", demo_site.base_url, "".join([
        "  - name: passed before\n    url: index.html\n    task: Find the opening hours\n",
        "  - name: hours\n    url: index.html\n    task: Find the opening hours\n    expect: [{answer: '9:00'}]\n",
        SIGN_IN.format(name="sign in", expect='[{text: "794.36"}]'),
        "  - name: never started\n    url: index.html\n    task: Find the opening hours\n",
    ]))
    # a re-run of the cases an earlier run did not pass: one failed, those it did not finish, not the one that passed
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    line = lambda case, status: json.dumps({"id": f"checks/{case.replace(' ', '-')}", "case": case, "status": status}) + "\n"  # noqa: E731
    (earlier / "results.jsonl").write_text(line("passed before", "passed") + line("hours", "failed"))
    (earlier / "attempts.jsonl").write_text(line("sign in", "interrupted") + line("never started", "interrupted"))
    out = tmp_path / "out"
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "LIBRARY_PASSWORD": SECRET}
    proc = subprocess.Popen(
        [sys.executable, "-m", "surfer", "qa", str(suite), "--out", str(out), "--concurrency", "1", "--no-cache", "--quiet",
         "--rerun-failed", str(earlier), *endpoint(server)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    deadline = time.monotonic() + 60
    while server.hung < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert "interrupted by SIGTERM" in stderr
    assert [(r["case"], r["status"]) for r in results(out).values()] == [("hours", "passed")]
    assert f"finished cases are in {out / 'results.jsonl'}" in " ".join(stderr.split())
    cases = junit_cases(out / "junit.xml")
    assert cases["hours"].is_passed and cases["sign in"].is_skipped and "passed before" not in cases
    # the case stopped while running: how long it ran (JUnit and attempts.jsonl), not 0; the one never started is
    # there too (with no attempt), so that the next --rerun-failed runs it
    stopped = {r["case"]: r for r in map(json.loads, (out / "attempts.jsonl").read_text().splitlines())}
    assert stopped["sign in"]["status"] == "interrupted" and stopped["sign in"]["seconds"] > 0 and cases["sign in"].time > 0
    assert stopped["never started"]["status"] == "interrupted" and stopped["never started"]["attempts"] == 0
    assert cases["never started"].is_skipped
    # the stopped case's report is written (the summary links it) and its JUnit entry keeps the attempt it made
    report = out / stopped["sign in"]["dir"] / "report.html"
    assert report.exists() and '<span class="interrupted">interrupted</span>' in report.read_text()
    assert os.path.relpath(report, out) in (out / "index.html").read_text()
    assert cases["sign in"].result[0].text.startswith("attempt 1 (try): error — interrupted")

    from surfer.apps.qa_command import stopped_line
    from surfer.qa.outcomes import QaSummary

    (out / "results.jsonl").unlink()  # a run stopped before any case finished names no results file
    line = stopped_line(QaSummary(out, [], 1.0, "interrupted by SIGTERM"), out / "junit.xml")
    assert line.endswith(f"no case finished ({out / 'junit.xml'} lists them as skipped)") and "results.jsonl" not in line


def test_the_readme_commands_run_the_sample_suite_and_the_benchmark(tmp_path):
    proc = qa_process(str(SAMPLE_SUITE), "--demo", "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr
    assert {r["status"] for r in results(tmp_path / "out").values()} == {"passed"}
    bench = surfer("bench", "qa", "--model-latency", "0.05", "--runs", "1", "--out", str(tmp_path / "qa.json"))
    assert bench.returncode == 0, bench.stderr
    figures = json.loads((tmp_path / "qa.json").read_text())
    first, cached = figures["first_run"], figures["cached_run"]
    assert first["passed"] == cached["passed"] == 3 and first["model_calls"] >= 20 and first["steps_from_cache"] == 0
    assert cached["steps_from_cache"] == cached["steps"] == 4 and cached["model_calls"] == 1
    assert figures["speedup"] == round(first["seconds"] / cached["seconds"], 2)
    assert "cached re-run is" in bench.stdout
    # its suite's unbound secret is said once for the benchmark, not once per run of the suite
    assert (bench.stdout + bench.stderr).count("LIBRARY_PASSWORD can be typed on any site") == 1, bench.stderr
