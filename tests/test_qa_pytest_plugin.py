"""The pytest plugin: a `surfer` fixture in a real pytest run (a subprocess),
against the stand-in oracle and the demo site, sharing the action cache."""

from __future__ import annotations

import json
import re
import zipfile
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from surfer.apps.demo.qa_oracle import measure_qa_targets, qa_oracle
from surfer.models.profiles import get_profile

PLUGIN = "surfer.qa.pytest_plugin"
SECRET = "plugin-Secret-93e1"

QA_GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "qa.md"
PLACEHOLDER = "http://127.0.0.1:8080/"
FAILING = '''

def test_a_wrong_statement_fails_with_the_reasons(surfer):
    surfer.goto(SITE + "login.html")
    surfer.act("Sign in as alice with the password {{secret:LIBRARY_PASSWORD}}")
    surfer.expect("The orders table lists order #9999")
'''


def guide_example(site_url: str) -> str:
    """The QA guide's plugin example, as written, with the demo site's address."""
    match = re.search(r"<!-- example: pytest-plugin -->\s*```python\n(.*?)```", QA_GUIDE.read_text(), re.S)
    assert match and PLACEHOLDER in match.group(1)
    return match.group(1).replace(PLACEHOLDER, site_url)


def plugin_args() -> list[str]:
    installed = any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", PLUGIN]


@pytest.fixture(scope="module")
async def centres(demo_site, shared_browser):
    return await measure_qa_targets(demo_site.base_url, browser=shared_browser)


def test_surfer_fixture_acts_expects_extracts_and_caches(pytester, standin, demo_site, centres, monkeypatch):
    server = standin(qa_oracle(centres, get_profile("holotron").frame))
    monkeypatch.setenv("LIBRARY_PASSWORD", SECRET)
    pytester.makepyfile(test_shop=guide_example(demo_site.base_url) + FAILING)
    args = [*plugin_args(), "-p", "no:cacheprovider", "--surfer-base-url", server.base_url, "--surfer-model", server.model,
            "--surfer-profile", "holotron", "--surfer-cache", "qa-cache", "--surfer-out", "runs"]

    result = pytester.runpytest_subprocess(*args, "--surfer-tracing", "retain-on-failure")
    result.assert_outcomes(passed=1, failed=1)
    # the failed test keeps its Playwright trace, with the typed secret replaced by its placeholder
    trace = pytester.path / "runs" / "test-shop-py-test-a-wrong-statement-fails-with-the-reasons" / "trace.zip"
    with zipfile.ZipFile(trace) as archive:
        texts = [archive.read(n) for n in archive.namelist() if n.endswith((".trace", ".network"))]
    assert texts and any(b"LIBRARY_PASSWORD" in t for t in texts) and not any(SECRET.encode() in t for t in texts)
    assert not (pytester.path / "runs" / "test-shop-py-test-sign-in-and-read-the-total" / "trace.zip").exists()
    output = result.stdout.str()
    assert "expected The orders table lists order #9999: The orders table does not list order #9999." in output
    assert "run report: runs/test-shop-py-test-a-wrong-statement-fails-with-the-reasons/attempt-1/01-act/report.html" in output
    entry = pytester.path / "qa-cache" / "pytest" / "test-shop-py-test-sign-in-and-read-the-total.json"
    assert json.loads(entry.read_text())["steps"][0]["actions"][2]["element"]["name"] == "Sign in"
    assert not (pytester.path / "qa-cache" / "pytest" / "test-shop-py-test-a-wrong-statement-fails-with-the-reasons.json").exists()
    assert (pytester.path / "runs" / "test-shop-py-test-sign-in-and-read-the-total" / "report.html").exists()

    # the re-runs check what the plugin leaves behind, not the process: in this process (~2 s of CPU less each)
    # (pytest-asyncio's notice that the inner run leaves its loop scope unset would be this test's own warning here)
    inprocess = [*args, "-o", "asyncio_default_fixture_loop_scope=function"]
    before = len(server.requests)
    result = pytester.runpytest_inprocess(*inprocess, "-k", "sign_in")
    result.assert_outcomes(passed=1)
    again = [r.role for r in server.requests[before:]]
    # the act step replays from the cache; only the statement (validator) and extract (policy + validator) ask the model
    assert again.count("localizer") == 0 and again.count("policy") == 1 and again.count("validator") == 2
    # a test that fails after replaying from the cache drops its entry
    failing = pytester.path / "qa-cache" / "pytest" / "test-shop-py-test-a-wrong-statement-fails-with-the-reasons.json"
    failing.write_text(entry.read_text().replace("test-shop-py-test-sign-in-and-read-the-total", failing.stem))
    before = len(server.requests)
    pytester.runpytest_inprocess(*inprocess, "-k", "wrong_statement").assert_outcomes(failed=1)
    assert [r.role for r in server.requests[before:]] == ["validator"]  # the act replayed, the statement was judged
    assert not failing.exists()
    for path in pytester.path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert all(SECRET not in json.dumps(r.body) for r in server.requests)


def test_a_message_names_the_plugins_options():
    # a model server that is not there said "set Agent(base_url=...)": a pytest user sets --surfer-base-url
    from surfer.core.surface import caller, setting
    from surfer.qa.pytest_plugin import _LoopThread

    async def asked() -> tuple[str, str, str]:
        return caller(), setting("base_url"), setting("read_timeout")

    loop = _LoopThread()
    try:
        assert loop.run(asked()) == ("pytest", "--surfer-base-url or SURFER_BASE_URL", "read_timeout, a key of the --surfer-config file")
    finally:
        loop.close()
    assert caller() == "python"  # (this thread's own context is as it was)
