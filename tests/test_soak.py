"""`surfer bench soak` at a small scale: a real `surfer batch` process with a
model server that restarts, a Chromium that is killed, replies that fail and
a SIGTERM with its resume loses no task and records none twice."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from surfer.apps.cli import app
from surfer.bench.faults import FaultRates, FaultyResponder
from surfer.bench.soak import SoakPlan
from surfer.models.standin import parse_chat_request


def test_small_soak_loses_nothing_and_records_nothing_twice(tmp_path):
    out = tmp_path / "soak.json"
    args = ["bench", "soak", "--tasks", "24", "--concurrency", "4", "--outages", "2", "--chromium-kills", "1",
            "--http-500", "0.04", "--malformed", "0.04", "--hung", "0.01", "--max-seconds", "10",
            "--keep", str(tmp_path / "work"), "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["lost"] == 0 and report["recorded_twice"] == 0 and report["records"] == 24
    assert report["exits"] == [143, 0]  # stopped by SIGTERM, then the resume finished every task
    faults = [f["fault"] for f in report["injected"]["faults"]]
    assert faults == ["sigterm", "outage", "kill_chromium"]
    outage = report["injected"]["faults"][1]
    assert outage["down_s"] >= 2
    assert report["injected"]["http_500"] + report["injected"]["malformed"] > 0
    # only what the task itself decides: the form filled in, a call never answered cut by the task's limit,
    # a reply malformed again on its retry; never the server's outage, the browser's death or the signal
    statuses = report["final_statuses"]
    assert set(statuses) <= {"success", "limit", "error (model)"} and statuses.get("success", 0) >= 18, statuses
    assert report["usage_early"]["chromium_processes"] > 0 and report["usage_early"]["pss_mib"] > 50
    assert report["disk_bytes_per_task"] > 0 and report["steps_per_s"] > 0
    assert "lost 0, recorded twice 0" in result.output


def test_soak_plan_refuses_what_it_cannot_run():
    runner = CliRunner()
    for args in (["--outages", "five"], ["--tasks", "3"], ["--outages", "200", "--server-wait", "60"], ["--hung", "1.5"]):
        result = runner.invoke(app, ["bench", "soak", *args])
        assert result.exit_code == 2 and "error:" in result.output, (args, result.output)


def test_plan_spreads_faults_over_the_run():
    plan = SoakPlan()
    events = plan.schedule()
    assert [e[1] for e in events].count("kill_chromium") == 5 and [e[1] for e in events].count("outage") == 2
    assert events[0] == (40, "sigterm", 0.0) and all(0 < at < 1000 for at, _, _ in events)
    assert 40 < plan.early_sample <= 200  # the memory sample is taken from the resumed process


def test_faulty_responder_draws_each_fault_at_its_rate():
    responder = FaultyResponder({}, "normalized_1000", FaultRates(http_500=0.1, malformed=0.1, hung=0.0), seed=1)
    request = parse_chat_request({"messages": [{"role": "user", "content": "Task: x\nHistory:\nStep 1: a -> ok\nStep 2: b -> ok"}]})
    answers = {"error": 0, "malformed": 0, "ok": 0}
    for _ in range(2000):
        try:
            answer = responder(request)
        except RuntimeError:
            answers["error"] += 1
            continue
        answers["ok" if isinstance(answer, dict) else "malformed"] += 1
    assert 120 < answers["error"] < 280 and 120 < answers["malformed"] < 280
    assert responder.injected == {"http_500": answers["error"], "malformed": answers["malformed"], "hung": 0}
    ok = FaultyResponder({}, "normalized_1000", FaultRates(0, 0, 0), 1)(request)
    assert ok["action"] == {"type": "click", "target": "the page heading"}  # the session's third step, from its history


async def test_a_closed_session_is_not_kept_alive_by_the_shared_browser(demo_site, shared_browser):
    """What the soak found: the shared browser's "disconnected" listener held every finished session
    (its page objects and last screenshot, ~25 KiB a task) for as long as the browser lived."""
    import gc
    import weakref

    from surfer.tools.browser import BrowserEnvironment

    async def one_session() -> weakref.ref:
        # in a frame of its own that has ended by the check: Python 3.12 keeps a snapshot of a frame's locals
        # once anything reads them, so a `del` in the test's own frame would not let go of the last session
        env = BrowserEnvironment(browser=shared_browser)
        await env.start(demo_site.url("register.html"))
        await env.observe()
        await env.close()
        return weakref.ref(env)

    refs = [await one_session() for _ in range(3)]
    gc.collect()
    assert [r() for r in refs] == [None, None, None]
