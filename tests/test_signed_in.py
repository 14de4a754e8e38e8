"""Starting signed in, in a real Chromium, on a site whose pages need a
server-side session made by a real login form POST (tests/login_site.py):
a run that signs in and saves its state, then runs that start with it (a
file, a persistent profile, a browser surfer did not launch: over CDP, or a
Playwright browser server) and reach the signed-in page with no login step
and no password typed. The model is the site's oracle, which acts as a vision
model does (it types into fields it located where they are drawn)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from inprocess import Ran, surfer
from login_site import ORDER, PASSWORD, TASK, USER, VIEWPORT, AcmeOracle
from surfer import Agent, ScriptedModel
from surfer.apps.demo.oracle import frame_mapper
from surfer.tools.chromium import LAUNCH_ARGS, find_headless_shell

SIGN_IN_STEPS = 3  # type the username, type the password and submit, answer


@pytest.fixture
def site(acme_site):  # type: ignore[no-untyped-def]
    return acme_site


@pytest.fixture
def centres(acme_centres):  # type: ignore[no-untyped-def]
    return acme_centres


@pytest.fixture
def model(standin, centres):  # type: ignore[no-untyped-def]
    return standin(AcmeOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0)))


def agent(model, **settings) -> Agent:  # type: ignore[no-untyped-def]
    browser = {"viewport": VIEWPORT, **settings.pop("browser", {})}
    settings.setdefault("max_steps", 8)
    return Agent(base_url=model.base_url, model=model.model, profile="holotron", secrets={"PASSWORD": PASSWORD},
                 browser=browser, **settings)


def typed_password(run_dir: Path) -> bool:
    steps = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    return any((s.get("action") or {}).get("text") == "{{PASSWORD}}" for s in steps)


def files_holding(folder: Path, value: str) -> list[str]:
    """Every file under `folder` (and every member of its zips) whose bytes hold `value`."""
    found = []
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        if value.encode() in path.read_bytes():
            found.append(str(path))
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as archive:
                found += [f"{path}:{name}" for name in archive.namelist() if value.encode() in archive.read(name)]
    return found


def sid_of(state_file: Path) -> str:
    return next(c["value"] for c in json.loads(state_file.read_text())["cookies"] if c["name"] == "sid")


def said(proc: subprocess.CompletedProcess | Ran) -> str:
    """What a command printed, on either stream, its lines unwrapped."""
    return " ".join((proc.stdout + proc.stderr).split())


def cli(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`surfer ARGS` in a child process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURFER_")}
    return subprocess.run([sys.executable, "-m", "surfer", *args], capture_output=True, text=True, timeout=120,
                          env={**env, "NO_COLOR": "1", "COLUMNS": "200", "ACME_PW": PASSWORD, **(env_extra or {})})


def command(*args: str, env_extra: dict[str, str] | None = None) -> Ran:
    """`surfer ARGS` in this process (tests/inprocess.py): for what a command leaves behind."""
    return surfer(*args, env={"ACME_PW": PASSWORD, **(env_extra or {})})


def run_args(model, site, out: Path, *extra: str) -> list[str]:  # type: ignore[no-untyped-def]
    return ["run", TASK, "--url", site.url("/account"), "--base-url", model.base_url, "--model", model.model,
            "--profile", "holotron", "--viewport", f"{VIEWPORT[0]}x{VIEWPORT[1]}", "--secret", "PASSWORD=ACME_PW",
            "--out", str(out), "--json", *extra]


# -- a saved state ------------------------------------------------------------------------


def test_a_saved_state_starts_the_next_run_signed_in_and_stays_out_of_every_file(model, site, tmp_path):
    state = tmp_path / "auth" / "state.json"
    first = command(*run_args(model, site, tmp_path / "signed-out", "--save-storage-state", str(state), "--trace", "on"))
    assert first.returncode == 0, first.stderr
    signed_out = json.loads(first.stdout)
    assert signed_out["status"] == "success" and signed_out["steps"] == SIGN_IN_STEPS and signed_out["answer"] == ORDER
    assert "storage_state" not in signed_out  # the state is never printed
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert not list(state.parent.glob("*.tmp"))  # written atomically
    sid = sid_of(state)
    assert sid in site.sessions  # the server's own session, made by the form POST
    logins = site.logins

    # (a real process: the browser it starts early has no such state, so the run opens a context of its own)
    second = cli(*run_args(model, site, tmp_path / "signed-in", "--storage-state", str(state), "--trace", "on"))
    assert second.returncode == 0, second.stderr
    signed_in = json.loads(second.stdout)
    assert signed_in["status"] == "success" and signed_in["answer"] == ORDER
    assert signed_in["steps"] == 1 < signed_out["steps"]  # no login steps
    assert site.logins == logins and not typed_password(tmp_path / "signed-in")  # the password was never typed
    for run_dir in (tmp_path / "signed-out", tmp_path / "signed-in"):
        assert (run_dir / "trace.zip").exists()
        assert files_holding(run_dir, sid) == [], run_dir
        with zipfile.ZipFile(run_dir / "trace.zip") as archive:
            network = "".join(archive.read(n).decode() for n in archive.namelist() if n.endswith(".network"))
        assert "/account" in network and '"name":"Cookie"' not in network and "Set-Cookie" not in network
    print(f"\nsteps on the Acme site: signed out {signed_out['steps']}, with a saved state {signed_in['steps']}")


async def test_the_sdk_takes_and_returns_the_state_in_memory(model, site, tmp_path):
    signing_in = await agent(model, keep_storage_state=True).run(TASK, site.url("/account"), out_dir=tmp_path / "a")
    assert signing_in.status == "success" and signing_in.storage_state is not None
    assert "storage_state" not in (tmp_path / "a" / "result.json").read_text()
    # the state itself, from the previous result: no file at all
    again = await agent(model, storage_state=signing_in.storage_state).run(TASK, site.url("/account"), out_dir=tmp_path / "b")
    assert again.status == "success" and again.steps == 1 and not typed_password(tmp_path / "b")
    assert {c["name"] for c in again.storage_state["cookies"]} == {"sid"}  # returned again (it was loaded)
    assert any(o["localStorage"] for o in again.storage_state["origins"])  # localStorage per origin too


async def test_a_failed_run_saves_its_state_only_when_asked(model, site, tmp_path):
    state = tmp_path / "state.json"
    failed = await agent(model, max_steps=1, save_storage_state=str(state)).run(TASK, site.url("/account"))
    assert failed.status == "limit" and not state.exists()
    await agent(model, max_steps=1, browser={"save_storage_state": str(state), "save_storage_state_on_failure": True}).run(
        TASK, site.url("/account"))
    assert state.exists() and json.loads(state.read_text())["cookies"] == []  # signed out still: nothing to sign in with


async def test_an_http_sign_in_takes_its_password_from_a_secret_in_the_start_url(model, site, shared_browser, tmp_path):
    from surfer import Secret
    from surfer.tools.browser import BrowserEnvironment

    url = site.url("/staging/account").replace("http://", f"http://{USER}:{{{{PASSWORD}}}}@")  # its HTTP sign-in
    env, logins = BrowserEnvironment(browser=shared_browser, viewport=VIEWPORT), site.logins
    try:
        run = await Agent(base_url=model.base_url, model=model.model, profile="holotron", secrets={"PASSWORD": PASSWORD},
                          environment=env, max_steps=3).run(TASK, url, out_dir=tmp_path / "basic")
        assert run.status == "success" and run.steps == 1 and run.answer == ORDER and site.logins == logins
        assert run.url == url  # recorded with the placeholder; the password is in no file and no model request
        assert files_holding(tmp_path / "basic", "horse") == [] and not any("horse" in r.text for r in model.requests)
        bound = Secret(PASSWORD, domains=["example.com"])  # a secret bound to another site is not sent to this one
        refused = await Agent(base_url=model.base_url, model=model.model, profile="holotron", secrets={"PASSWORD": bound},
                              environment=env).run(TASK, url, out_dir=tmp_path / "refused")
        assert refused.status == "error" and refused.error_kind == "config" and "not one of its sites" in refused.reason
    finally:
        await env.close()


# -- a persistent profile ---------------------------------------------------------------


async def test_a_persistent_profile_keeps_the_sign_in_between_runs(model, site, tmp_path):
    profile = tmp_path / "profile"
    first = await agent(model, user_data_dir=profile).run(TASK, site.url("/account"), out_dir=tmp_path / "one")
    assert first.status == "success" and first.steps == SIGN_IN_STEPS
    logins = site.logins
    from surfer.tools.browser.profile import lock_holder

    held: list[str | None] = []  # the profile is locked while a run has it, also in a headless shell (no lock of its own)
    second = await agent(model, user_data_dir=profile).run(TASK, site.url("/account"), out_dir=tmp_path / "two",
                                                           listeners=[lambda event: held.append(lock_holder(profile))])
    assert second.status == "success" and second.steps == 1 and site.logins == logins
    assert f"process {os.getpid()}" in held and lock_holder(profile) is None, held  # (the first event comes before the launch)
    assert not any(p.name == "Cookies" for p in (tmp_path / "two").rglob("*"))  # the profile is never copied


def test_a_profile_in_use_is_a_clear_error_not_a_hang(model, site, tmp_path):
    profile = tmp_path / "profile"
    profile.mkdir()
    import socket

    os.symlink(f"{socket.gethostname()}-{os.getpid()}", profile / "SingletonLock")  # what a running Chromium leaves
    started = time.monotonic()
    proc = command(*run_args(model, site, tmp_path / "run", "--user-data-dir", str(profile)))
    assert proc.returncode == 2 and time.monotonic() - started < 30
    assert f"in use by another Chromium (process {os.getpid()}; SingletonLock)" in said(proc)
    (profile / "SingletonLock").unlink()
    os.symlink(f"{socket.gethostname()}-999999999", profile / "SingletonLock")  # a stale lock: Chromium takes it over
    from surfer.tools.browser.profile import lock_holder

    assert lock_holder(profile) is None


# -- a browser surfer did not launch ----------------------------------------------------


@pytest.fixture
def users_browser(site, tmp_path):  # type: ignore[no-untyped-def]
    """A Chromium the test launched as a user would, with a first tab of its own, DevTools on a free port."""
    folder = tmp_path / "users-profile"
    chromium = find_headless_shell() or "/usr/bin/chromium"
    proc = subprocess.Popen([chromium, *LAUNCH_ARGS, "--headless=new" if "headless-shell" not in chromium else "--headless",
                             "--remote-debugging-port=0", f"--user-data-dir={folder}", site.url("/login?next=/first-tab")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = folder / "DevToolsActivePort"
    deadline = time.monotonic() + 20
    while not (port_file.exists() and port_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield proc, f"http://127.0.0.1:{port_file.read_text().split()[0]}"
    finally:
        proc.terminate()
        proc.wait(10)


def tabs(cdp_url: str) -> list[str]:
    with urllib.request.urlopen(cdp_url + "/json/list", timeout=5) as response:
        return [t["url"] for t in json.load(response) if t["type"] == "page"]


async def test_attaching_over_cdp_uses_the_users_sign_in_and_leaves_the_browser_and_its_tab(model, site, users_browser, tmp_path):
    proc, cdp_url = users_browser
    first_tab = site.url("/login?next=/first-tab")
    assert tabs(cdp_url) == [first_tab]
    # the user signs in in their own browser (a tab of theirs), as they would by hand
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.connect_over_cdp(cdp_url)
        page = await browser.contexts[0].new_page()
        await page.goto(site.url("/login"))
        await page.fill("#username", "alice")
        await page.fill("#password", PASSWORD)
        await page.click("#submit")
        await page.wait_for_url("**/account")
        await page.close()
    logins = site.logins
    run = await agent(model, cdp_url=cdp_url, browser={"trace": "on"}).run(TASK, site.url("/account"), out_dir=tmp_path / "cdp")
    assert run.status == "success" and run.steps == 1 and site.logins == logins and not typed_password(tmp_path / "cdp")
    assert (tmp_path / "cdp" / "trace.zip").exists()  # traces work on a browser surfer did not launch
    assert proc.poll() is None and tabs(cdp_url) == [first_tab]  # still running, the user's tab intact, surfer's closed
    assert not any("open tabs" in r.text for r in model.requests)  # the agent saw its own tab only, never the user's
    print(f"\nsteps attached over CDP to the user's signed-in browser: {run.steps}")


async def test_over_cdp_a_saved_state_opens_a_context_of_its_own(model, site, users_browser, tmp_path):
    from surfer.tools.browser.state import write_storage_state

    proc, cdp_url = users_browser
    # a saved sign-in (the form's POST, by HTTP: the runs that sign in and save are the tests above)
    write_storage_state(site.sign_in_state(), tmp_path / "state.json")
    run = await agent(model, cdp_url=cdp_url, storage_state=str(tmp_path / "state.json")).run(TASK, site.url("/account"))
    assert run.status == "success" and run.steps == 1
    assert proc.poll() is None and len(tabs(cdp_url)) == 1

    def user_closes_the_browser(request):  # type: ignore[no-untyped-def]
        proc.kill()
        proc.wait(10)
        return {"thought": "reload", "notes": "", "action": {"type": "refresh"}}

    # the user's browser goes away mid-run: said as that, not as a crash of a Chromium surfer launched
    gone = await Agent(backend=ScriptedModel(policy=[user_closes_the_browser]), cdp_url=cdp_url, max_steps=2).run(TASK, site.url("/account"))
    assert (gone.status, gone.error_kind) == ("error", "browser_crash"), gone
    assert gone.reason == f"the browser at {cdp_url} (--cdp-url) went away: it was closed, its process ended, or the connection to it was lost"


def test_an_unreachable_cdp_url_is_a_clear_error(model, site, tmp_path):
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = command(*run_args(model, site, tmp_path / "run", "--cdp-url", f"http://127.0.0.1:{port}"))
    assert proc.returncode == 2, proc.stderr
    assert f"cannot attach to the browser at http://127.0.0.1:{port} (--cdp-url)" in said(proc)
    bad = command(*run_args(model, site, tmp_path / "run2", "--browser-ws", "http://127.0.0.1:1/"))
    assert bad.returncode == 2 and "--browser-ws takes a ws: or wss: URL" in said(bad)


@pytest.fixture(scope="module")
def browser_server():  # type: ignore[no-untyped-def]
    """A Playwright browser server (chromium.launchServer) the tests started: its ws endpoint. One for the module
    (a Node process and a Chromium, ~1 s of CPU): each client that connects gets browser contexts of its own."""
    import playwright

    driver = Path(playwright.__file__).parent / "driver"
    script = ("const pw = require(process.argv[1]); pw.chromium.launchServer({executablePath: process.argv[2], "
              "args: JSON.parse(process.argv[3]), headless: true}).then(s => console.log(s.wsEndpoint()))")
    executable = find_headless_shell() or "/usr/bin/chromium"
    proc = subprocess.Popen([str(driver / "node"), "-e", script, str(driver / "package"), executable, json.dumps(LAUNCH_ARGS)],
                            stdout=subprocess.PIPE, text=True)
    try:
        yield proc.stdout.readline().strip()  # type: ignore[union-attr]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


async def test_a_playwright_browser_server_runs_signed_in_and_routing_enforces_the_allow_list(model, site, browser_server, tmp_path):
    assert browser_server.startswith("ws://")
    state = tmp_path / "state.json"
    first = await agent(model, browser_ws=browser_server, save_storage_state=str(state)).run(TASK, site.url("/account"))
    assert first.status == "success" and first.steps == SIGN_IN_STEPS and state.exists()
    second = await agent(model, browser_ws=browser_server, storage_state=str(state)).run(TASK, site.url("/account"))
    assert second.status == "success" and second.steps == 1
    # no proxy can stand between a remote browser and the network: the domain rules are enforced by routing
    other = site.base_url.replace("127.0.0.1", "localhost")
    site.pixels.clear()
    beacon = site.url(f"/beacon?other={other}")
    guarded = await agent(model, max_steps=1, allowed_domains=["127.0.0.1"], browser={"browser_ws": browser_server}).run(
        "look", beacon, out_dir=tmp_path / "guarded")
    assert site.pixels == []  # the image on another host was never fetched
    step = json.loads((tmp_path / "guarded" / "trajectory.jsonl").read_text().splitlines()[0])
    assert guarded.steps == 1 and step["url"] == beacon
    await agent(model, max_steps=1, browser={"browser_ws": browser_server}).run("look", beacon)
    assert site.pixels == [other.removeprefix("http://")]  # without the rule it is
    # a redirect hop passes no route: the page it reaches on a refused host is left before anything is captured
    from surfer.tools.browser import BrowserEnvironment

    env = BrowserEnvironment(browser_ws=browser_server, allowed_domains=["127.0.0.1"], viewport=VIEWPORT)
    try:
        await env.start(site.url(f"/go?to={other}/login"))
        observation = await env.observe()
        assert env.page.url == "about:blank" and observation.url == "about:blank"
        assert any(f"the page went to {other}/login past the domain rules" in n for n in env.url_policy.take_notices())
    finally:
        await env.close()


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("content, message", [
    (None, "does not exist (make one with `surfer auth save"),
    ("{not json", "is not JSON"),
    ('{"cookies": [{"name": "sid"}]}', "is not a Playwright storage state: cookies[0] needs a string name and value"),
    ('["cookies"]', "expected an object with 'cookies' and 'origins'"),
])
def test_a_missing_or_invalid_state_file_is_a_clear_error(content, message, tmp_path):
    state = tmp_path / "state.json"
    if content is not None:
        state.write_text(content)
    proc = command("run", "t", "--url", "http://127.0.0.1:9/", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
               "--profile", "holo2", "--storage-state", str(state), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and message in said(proc), said(proc)
    assert not (tmp_path / "r").exists()


def test_a_state_file_others_can_read_gets_a_warning_and_contradictions_are_refused(tmp_path):
    state = tmp_path / "state.json"
    state.write_text('{"cookies": [], "origins": []}')
    state.chmod(0o644)
    from surfer.agent.config import AgentConfig
    from surfer.agent.environments import check_browser_start
    from surfer.core.errors import ConfigError

    warnings = check_browser_start(AgentConfig.model_validate({"browser": {"storage_state": str(state)}}))
    assert len(warnings) == 1 and "readable by others (mode 0644)" in warnings[0] and "chmod 600" in warnings[0]
    with pytest.raises(ConfigError, match="persistent profile .* keeps its own state"):
        Agent(base_url="http://127.0.0.1:9/v1", storage_state=str(state), user_data_dir=str(tmp_path / "p"))
    with pytest.raises(ConfigError, match="choose one browser"):
        Agent(base_url="http://127.0.0.1:9/v1", cdp_url="http://127.0.0.1:9222", browser_ws="ws://127.0.0.1:1/")
    with pytest.raises(ConfigError, match="is a file, not a directory"):
        check_browser_start(AgentConfig.model_validate({"browser": {"user_data_dir": str(state)}}))


def test_a_batch_cannot_share_one_profile_between_concurrent_sessions(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task": "x", "url": "http://127.0.0.1:9/"}\n{"task": "y", "url": "http://127.0.0.1:9/"}\n')
    proc = command("batch", str(tasks), "--out", str(tmp_path / "out"), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
               "--profile", "holo2", "--user-data-dir", str(tmp_path / "profile"), "--concurrency", "2")
    assert proc.returncode == 2 and "holds one session at a time: run with --concurrency 1" in said(proc)
    (tmp_path / "tasks2.jsonl").write_text('{"task": "x", "storage_state": "missing.json"}\n')
    bad = command("batch", str(tmp_path / "tasks2.jsonl"), "--out", str(tmp_path / "out2"), "--base-url", "http://127.0.0.1:9/v1",
              "--model", "m", "--profile", "holo2")
    assert bad.returncode == 2 and "task line-1: storage state file" in said(bad) and "missing.json does not exist" in said(bad)


@pytest.mark.parametrize("where", ["cdp_url", "browser_ws"])
async def test_downloads_land_in_the_run_directory_from_a_browser_surfer_did_not_launch(where, request, pages, tmp_path):
    from surfer.core.actions import Click, CssPoint
    from surfer.tools.browser import BrowserEnvironment
    from surfer.tools.browser.capture import REPORT_WAIT_S
    from surfer.tools.widgets import drawn

    address = request.getfixturevalue("users_browser")[1] if where == "cdp_url" else request.getfixturevalue("browser_server")
    env = BrowserEnvironment(**{where: address})
    env.begin_run(tmp_path)
    try:
        await env.start(pages.url("widgets/files.html"))
        shot = await env.observe()
        assert shot.title  # screenshots and the page's facts come back as from a launched browser
        box = await env.page.locator("#report").bounding_box()  # where the link is drawn
        outcome = await env.perform(Click(target="the 'Download the report' link", point=CssPoint(x=box["x"] + 5, y=box["y"] + 5)))
        assert "a file arrived: report.csv" in outcome.detail
        downloads = await env.end_run("success")
        if where == "cdp_url":  # (a context of surfer's own, over browser_ws: its new tabs are as in a launched browser)
            # a tab the page opens (target=_blank) is the run's, with its widgets: its select opens where it is drawn
            box = await env.page.locator("#plans").bounding_box()
            outcome = await env.perform(Click(target="the plans link", point=CssPoint(x=box["x"] + 5, y=box["y"] + 5)))
            # settled there when it came, not after waiting out the 2 s for a tab the browser never reported
            assert env.page.url.endswith("select.html") and outcome.settle_seconds < REPORT_WAIT_S
            box = await env.page.locator("#plan").bounding_box()
            await env.perform(Click(target="the plan select", point=CssPoint(x=box["x"] + 10, y=box["y"] + 5)))
            gold = next(i for i in await drawn(env.page) if i["label"] == "Gold")
            await env.perform(Click(target="Gold", point=CssPoint(x=gold["x"] + 10, y=gold["y"] + gold["height"] / 2)))
            assert await env.page.evaluate("window.received") == ["plan:input:Gold", "plan:change:Gold"]
    finally:
        await env.close()
    assert [d["status"] for d in downloads] == ["saved"] and (tmp_path / "downloads" / "report.csv").stat().st_size > 0


def test_a_saved_trace_loses_credential_headers_and_the_states_values(tmp_path):
    from surfer.tools.browser.tracing import HIDDEN, strip_credentials

    trace = tmp_path / "trace.zip"
    event = {"type": "resource-snapshot", "snapshot": {
        "request": {"url": "https://app/x", "headers": [{"name": "Authorization", "value": "Bearer tok-123456"},
                                                        {"name": "Cookie", "value": "sid=s3cr3t-value"},
                                                        {"name": "Accept", "value": "*/*"}],
                    "cookies": [{"name": "sid", "value": "s3cr3t-value"}]},
        "response": {"headers": [{"name": "set-cookie", "value": "sid=s3cr3t-value"}], "cookies": [{"name": "sid"}]}}}
    with zipfile.ZipFile(trace, "w") as archive:
        archive.writestr("trace.network", json.dumps(event) + "\n")
        archive.writestr("resources/page.html", "<p>echo s3cr3t-value</p>")
    strip_credentials(trace, ["s3cr3t-value"])
    with zipfile.ZipFile(trace) as archive:
        network, page = archive.read("trace.network").decode(), archive.read("resources/page.html").decode()
    snapshot = json.loads(network.splitlines()[0])["snapshot"]
    assert snapshot["request"]["headers"] == [{"name": "Accept", "value": "*/*"}] and snapshot["request"]["cookies"] == []
    assert snapshot["response"] == {"headers": [], "cookies": []}
    assert "tok-123456" not in network and "s3cr3t-value" not in network + page and HIDDEN in page


def test_a_run_in_a_profile_or_an_attached_browser_starts_no_chromium_of_its_own_early():
    from surfer.apps.early_start import wants_early_browser

    assert wants_early_browser(["run", "t", "--storage-state", "s.json"]) is True  # its own Chromium, with the state
    for flag in ("--user-data-dir", "--cdp-url", "--browser-ws"):
        assert wants_early_browser(["run", "t", flag, "x"]) is None
        assert wants_early_browser(["run", "t", f"{flag}=x"]) is None
