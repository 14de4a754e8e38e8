"""A person takes over and hands back: the agent stops between steps, a person
uses a real (headful, under Xvfb) Chromium with its mouse and keyboard at drawn
positions, hands back, and what they did is in the trajectory as human steps
(`actor: "human"`, screens before and after, a typed password redacted), in
the agent's next prompt, in the report and in the export. A headless browser
refuses, in the SDK and when the agent itself asks."""

from __future__ import annotations

import asyncio
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from login_site import ORDER, PASSWORD, TASK, USER, USERNAME_FIELD, PASSWORD_FIELD, VIEWPORT
from surfer import Agent, Reply, ScriptedModel, TakeOverRefused
from surfer.agent.formats import TrajectoryLine
from surfer.agent.handover import POLL_S, HumanStep
from surfer.agent.questions import Question
from surfer.apps.live import LiveView
from surfer.apps.export import export_records
from surfer.core.actions import CloseTab, headline
from surfer.core.deadline import time_left
from surfer.tools.person import REDACTED

CAPTCHA = "Please sign in for me: the page wants a person"


def act(action: dict[str, Any]) -> dict[str, Any]:
    return {"thought": "", "notes": "", "action": action}


def prompt_text(request: Any) -> str:
    return "".join(p.text for m in request.messages for p in m.content if hasattr(p, "text"))


def on_page(title: str, then: dict[str, Any]) -> Any:
    """A policy reply that acts only where the prompt says the page is `title` (as a model reading the screen would)."""
    def reply(request: Any) -> dict[str, Any]:
        page = prompt_text(request).rsplit("Current page:", 1)[-1].strip()
        return then if page.startswith(title) else act({"type": "fail", "reason": f"not on {title}: {page[:60]}"})
    return reply


ANSWER_ON_ACCOUNT = on_page("Account", act({"type": "answer", "text": ORDER}))


def lines_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]


def files_holding(folder: Path, value: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and value.encode() in p.read_bytes()]


@pytest.fixture(scope="module")
async def headful_browser(xvfb):  # type: ignore[no-untyped-def]
    """A real Chromium window on a private X display: what a person would see and use."""
    from playwright.async_api import async_playwright

    from surfer.tools.browser import launch_chromium

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISPLAY", xvfb)
        patch.delenv("SURFER_CHROMIUM", raising=False)  # a window needs the full browser
        async with async_playwright() as playwright:
            browser = await launch_chromium(playwright, headless=False)
            yield browser
            await browser.close()


@pytest.fixture
async def window(headful_browser):  # type: ignore[no-untyped-def]
    from surfer.tools.browser import BrowserEnvironment

    env = BrowserEnvironment(browser=headful_browser, headless=False, viewport=VIEWPORT)
    yield env
    await env.close()


async def sign_in_as_a_person(page: Any, centres: dict[str, Any]) -> None:
    """What a person does at the login form: click each field where it is drawn, type, press Enter."""
    username, password = centres[USERNAME_FIELD], centres[PASSWORD_FIELD]
    await page.mouse.click(username.x, username.y)
    await page.keyboard.type(USER)
    await page.mouse.click(password.x, password.y)
    await page.keyboard.type(PASSWORD)
    await page.keyboard.press("Enter")
    await page.wait_for_url("**/account")


def check_human_steps(run_dir: Path, centres: dict[str, Any], after_step: int) -> list[dict[str, Any]]:
    lines = lines_of(run_dir)
    for line in lines:
        TrajectoryLine.model_validate(line)  # the documented format holds human steps too
    human = [line for line in lines if line.get("actor") == "human"]
    assert [h["action"]["type"] for h in human] == ["click", "type", "click", "type", "press"], human
    assert [h["human"] for h in human] == [1, 2, 3, 4, 5] and {h["index"] for h in human} == {after_step}
    assert human[1]["action"]["text"] == USER and human[3]["action"]["text"] == REDACTED and human[3]["outcome"]["redacted"]
    assert human[4]["action"]["keys"] == "Enter" and human[4]["outcome"]["detail"].endswith("/account")
    for click, field in ((human[0], USERNAME_FIELD), (human[2], PASSWORD_FIELD)):
        point = click["points"][0]
        assert abs(point["x"] - centres[field].x) < 1 and abs(point["y"] - centres[field].y) < 1
        assert click["element"]["tag"] == "input"
    for h in human:
        assert (run_dir / h["screenshot"]).is_file() and (run_dir / h["screenshot_after"]).is_file()
        assert h["screenshot"] != h["screenshot_after"]
    assert human[0]["url"].endswith("/login?next=/account") and human[-1]["outcome"]["url"].endswith("/account")
    agent = [line for line in lines if line.get("actor") is None]
    assert lines.index(human[0]) == after_step and agent  # written after the agent step they follow
    return human


async def test_a_person_takes_over_signs_in_and_hands_back(window, acme_site, acme_centres, tmp_path):
    model = ScriptedModel(policy=[ANSWER_ON_ACCOUNT])
    agent = Agent(backend=model, profile="holotron", environment=window, validate_answers=False, max_seconds=60)
    async with agent.session(url=acme_site.url("/account"), out_dir=tmp_path / "session") as session:
        handle = session.start(TASK)
        await session.take_over()  # returns once the agent stopped and the page is watched
        assert handle.taken_over and not model.requests  # before its first step: nothing asked yet
        await sign_in_as_a_person(window.page, acme_centres)
        assert session.hand_back()
        result = await handle.result()
    assert (result.status, result.answer) == ("success", ORDER)
    assert result.timings.human_seconds and result.timings.human_seconds > 0
    summary = json.loads((tmp_path / "session" / "session.json").read_text())
    assert summary["tasks"][0]["human_seconds"] == result.timings.human_seconds
    run_dir = Path(result.run_dir)
    human = check_human_steps(run_dir, acme_centres, after_step=0)
    assert lines_of(run_dir)[-1]["url"].endswith("/account")  # the agent looked again: it saw the signed-in page
    prompt = prompt_text(model.requests[0])
    assert "A person took over the controls and handed back" in prompt and "/login?next=/account" in prompt
    assert f"type {USER!r} into the 'username' field" in prompt and f"type {REDACTED!r}" in prompt
    assert files_holding(tmp_path / "session", PASSWORD) == [] and PASSWORD not in prompt
    assert "Human step 5" in (run_dir / "report.html").read_text()
    records = export_records(tmp_path / "session")
    assert [r["actor"] for r in records] == ["human"] * 5 + ["agent"]
    kept = [r for r in records if r["actor"] == "human"]
    assert [json.loads(r["action"])["type"] for r in kept] == [h["action"]["type"] for h in human]
    assert all(Path(r["screenshot"]).is_file() and Path(r["screenshot_after"]).is_file() for r in kept)
    # where in the screenshot (the model's frame) the person clicked: the CSS points with the screen's geometry
    screen = json.loads(kept[0]["screen"])
    assert (screen["width"], screen["height"], screen["origin"]) == (*VIEWPORT, [0.0, 0.0])
    assert kept[0]["points"] == [[human[0]["points"][0]["x"], human[0]["points"][0]["y"]]]
    assert records[-1]["screenshot_after"] is None and records[-1]["screenshot"].endswith("step-001.jpg")


async def test_the_agent_asks_a_person_to_take_over_and_is_told_what_changed(window, acme_site, acme_centres, tmp_path):
    asked: list[Question] = []

    held: list[float] = []

    async def person(question: Question) -> Reply:  # the person acts while the agent waits, then hands back
        asked.append(question)
        loop, left = asyncio.get_running_loop(), time_left()
        started = loop.time()
        await sign_in_as_a_person(window.page, acme_centres)
        await asyncio.sleep(0.5)  # (a person is slower: signed in in 0.2 s, the bound below had no room for a poll)
        held.extend([loop.time() - started, left - time_left()])
        return Reply("signed in")

    model = ScriptedModel(policy=[on_page("Sign in", act({"type": "ask_user", "question": CAPTCHA, "kind": "take_over"})),
                                  ANSWER_ON_ACCOUNT])
    agent = Agent(backend=model, profile="holotron", environment=window, validate_answers=False, on_question=person,
                  max_seconds=60)
    result = await agent.run(TASK, url=acme_site.url("/account"), out_dir=tmp_path / "run")
    assert (result.status, result.answer) == ("success", ORDER), result.reason
    assert len(asked) == 1 and asked[0].take_over and asked[0].text == CAPTCHA
    lines = lines_of(tmp_path / "run")
    assert lines[0]["action"]["kind"] == "take_over" and lines[0]["outcome"] == {"question": CAPTCHA, "take_over": True}
    check_human_steps(tmp_path / "run", acme_centres, after_step=1)
    prompt = prompt_text(model.requests[-1])
    assert "A person took over the controls" in prompt and "The person said: signed in" in prompt
    spent, charged = held
    print(f"\nthe person held the controls {spent:.2f} s; the task's time limit came {charged:.2f} s nearer")
    # (human_seconds is rounded to the millisecond)
    assert result.timings.human_seconds >= round(spent, 3) - 0.001 and charged < spent - 2 * POLL_S  # not the task's time


async def test_a_key_reported_after_the_navigation_it_caused_is_still_where_it_led(window, acme_site, acme_centres, monkeypatch):
    """Under load the page's report of Enter reached surfer after the browser's report of the navigation that Enter
    caused (two channels), and the navigation was put on the typing before it (a clean-clone flake): here the
    page's reports all come 0.3 s late, in order, as under that load."""
    from surfer.tools.browser import person

    reported, loop = person._reported, asyncio.get_running_loop()

    def late(source: Any, event: Any) -> None:
        loop.call_later(0.3, reported, source, event)

    monkeypatch.setattr(person, "_reported", late)  # (installed with each new tab's binding)
    await window.start(acme_site.url("/account"))
    watch = window.watch_person()
    await watch.start()
    await sign_in_as_a_person(window.page, acme_centres)
    while len(watch.actions) < 5:  # Enter's action ends (its quiet window passed, its screen after taken)
        await asyncio.sleep(0.05)
    await window.page.goto(acme_site.url("/login"))  # then the person types an address, well within 2 s
    actions = await watch.stop()
    assert [type(a.action).__name__ for a in actions] == ["Click", "TypeText", "Click", "TypeText", "PressKeys", "Goto"]
    assert actions[4].detail.endswith("/account") and not actions[3].detail, [a.detail for a in actions]
    assert actions[4].after is not None and actions[4].after.url.endswith("/account")
    assert actions[5].action.url.endswith("/login") and actions[5].after.url.endswith("/login")  # not put on Enter

    # What a person does, read as demonstrations: a press moved before its release (selecting text, a slider) was a
    # click where it was pressed; it is a drag, both points in its human step as in an agent's drag. A checkbox
    # clicked was also "type 'on' into the checkbox", an option chosen in a list "type 'fr'" (its value, not what the
    # list shows). A dialog the page opened, answered by the person in the window, stayed held for the agent: drawn
    # over a stale screen, and answered again (an error) at its next action. A person who then opened a tab of their
    # own (Ctrl+T) and handed back there was said to have done nothing; one who closed the tab was not recorded at
    # all, and the agent's next action was told the tab had "closed itself".
    first, field = window.page, acme_centres[USERNAME_FIELD]
    window_ok = await first.context.new_cdp_session(first)  # what the window's own OK sends
    await window_ok.send("Page.enable")
    await first.evaluate("""() => document.body.insertAdjacentHTML('beforeend', `<button style="position:fixed;left:0;top:0;
        width:100px;height:40px" onclick="setTimeout(() => { alert('Hello, there'); document.title = 'after the alert' })">Greet</button>
        <input type="checkbox" style="position:fixed;left:0;top:50px;width:20px;height:20px" aria-label="Subscribe">
        <select id="country" style="position:fixed;left:0;top:80px"><option value="us">United States</option><option value="fr">France</option></select>`)""")
    watch = window.watch_person()
    await watch.start()
    await first.mouse.move(field.x - 100, field.y)
    await first.mouse.down()
    await first.mouse.move(field.x + 100, field.y, steps=4)
    await first.mouse.up()
    await first.mouse.click(10, 60)
    await first.select_option("#country", "fr")  # (the events of an option chosen in the list's popup)
    await first.mouse.click(50, 20)
    while window._dialog is None:
        await asyncio.sleep(0.05)
    await window_ok.send("Page.handleJavaScriptDialog", {"accept": True})
    mine = await first.context.new_page()  # the person's own tab, where the agent goes on
    actions = await watch.stop()
    assert [a.action and headline(a.action) for a in actions] == [
        "drag the 'username' field to the 'username' field", "click the 'Subscribe' checkbox", "type 'France' into the list",
        "click the 'Greet' button", None]
    assert HumanStep(1, 0, actions[0]).to_dict()["points"] == [{"x": field.x - 100, "y": field.y}, {"x": field.x + 100, "y": field.y}]
    assert actions[3].detail.endswith("'Hello, there', answered in the window"), [a.detail for a in actions]
    assert window._dialog is None and await first.title() == "after the alert"
    assert "another tab" in actions[4].detail and actions[4].after.url == mine.url == window.page.url
    watch = window.watch_person()
    await watch.start()
    await mine.close()
    actions = await watch.stop()
    assert [type(a.action) for a in actions] == [CloseTab] and actions[0].after.url == first.url == window.page.url
    assert "closed the tab at" in actions[0].detail and "closed itself" not in actions[0].detail
    assert not window._notices  # the agent's next outcome is not told that a tab closed itself

    # A page's permission request in a window (location, clipboard) waited on a prompt drawn outside the page, which
    # the agent never sees: it is denied at once, as in the headless browser.
    asked = """() => Promise.all([
        new Promise((done) => navigator.geolocation.getCurrentPosition(() => done('granted'), (e) => done('denied ' + e.code))),
        navigator.clipboard.readText().then(() => 'granted', (e) => 'denied ' + e.name)])"""
    assert await asyncio.wait_for(window.page.evaluate(asked), 10) == ["denied 1", "denied NotAllowedError"]


async def test_a_task_stopped_while_a_person_holds_the_controls_keeps_what_they_did(window, acme_site, acme_centres, tmp_path):
    model = ScriptedModel(policy=[act({"type": "answer", "text": "seen"})])
    agent = Agent(backend=model, profile="holotron", environment=window, validate_answers=False)
    async with agent.session(url=acme_site.url("/account"), out_dir=tmp_path / "session") as session:
        handle = session.start(TASK)
        await session.take_over()
        username = acme_centres[USERNAME_FIELD]
        await window.page.mouse.click(username.x, username.y)
        await window.page.keyboard.type(USER)
        handle.cancel("Ctrl-C")  # before handing back, before the agent's first step
        result = await handle.result()
        # the next task starts where the person left the page (its start URL was not opened again over their typing);
        # its person takes over with `t` at the terminal and presses Ctrl-D: no Enter can come any more, and the
        # turn, which never ended, is handed back
        from surfer.apps.controls import TerminalControls

        shown = io.StringIO()
        read_end, write_end = os.pipe()
        with os.fdopen(read_end) as stream:
            controls = TerminalControls(Console(file=shown, width=200, no_color=True), tmp_path, stream)
            handle = session.start("What does the username field hold?")
            controls.attach(handle)
            os.write(write_end, b"t\n")
            while not handle.taken_over:
                await asyncio.sleep(0.05)
            os.close(write_end)  # Ctrl-D
            follow_up = await asyncio.wait_for(handle.result(), 30)
            controls.detach()
        assert "handed back (the input ended)" in shown.getvalue()
    assert result.status == "interrupted" and result.timings.human_seconds > 0
    run_dir = Path(result.run_dir)
    human = [line for line in lines_of(run_dir) if line.get("actor") == "human"]
    assert [(h["action"]["type"], h["action"].get("text")) for h in human] == [("click", None), ("type", USER)], human
    assert all((run_dir / h["screenshot_after"]).is_file() for h in human)
    assert (follow_up.status, follow_up.url) == ("success", None)
    assert await window.page.locator("#username").input_value() == USER


async def test_a_person_who_declines_leaves_the_task_needing_input(window, acme_site, tmp_path):
    model = ScriptedModel(policy=[act({"type": "ask_user", "question": CAPTCHA, "kind": "take_over"})])
    agent = Agent(backend=model, profile="holotron", environment=window, validate_answers=False,
                  on_question=lambda question: None)  # the person says no
    shown = io.StringIO()
    result = await agent.run(TASK, url=acme_site.url("/account"), out_dir=tmp_path / "run",
                             listeners=[LiveView(Console(file=shown, width=200), spinner=False)])
    assert (result.status, result.question) == ("needs_input", CAPTCHA) and len(model.requests) == 1
    assert "the person declined to take over" in shown.getvalue() and "looks again" not in shown.getvalue()
    assert not [line for line in lines_of(tmp_path / "run") if line.get("actor") == "human"]  # nothing was done


async def test_a_headless_browser_refuses_a_take_over(browser_env, pages, tmp_path):
    env = await browser_env()
    model = ScriptedModel(policy=[act({"type": "scroll", "direction": "down"}), act({"type": "answer", "text": "done"})])
    agent = Agent(backend=model, profile="holotron", environment=env, validate_answers=False)
    async with agent.session(url=pages.url("long.html"), out_dir=tmp_path / "session") as session:
        handle = session.start("Scroll and say done")
        with pytest.raises(TakeOverRefused, match="--headful.*--cdp-url"):
            await session.take_over()
        result = await handle.result()
        assert result.status == "success" and result.timings.human_seconds is None  # the task went on
        with pytest.raises(TakeOverRefused, match="--headful"):  # refused at once now the browser is known
            await session.take_over()
    assert not handle.hand_back()


async def test_the_agent_asking_for_a_take_over_in_a_headless_browser_needs_input(browser_env, pages, tmp_path):
    env = await browser_env()
    model = ScriptedModel(policy=[act({"type": "ask_user", "question": CAPTCHA, "kind": "take_over"})])
    agent = Agent(backend=model, profile="holotron", environment=env, validate_answers=False,
                  on_question=lambda question: Reply("done"))
    result = await agent.run("Sign in", url=pages.url("long.html"), out_dir=tmp_path / "run")
    assert result.status == "needs_input" and result.question == CAPTCHA
    assert "--headful" in result.reason and "--cdp-url" in result.reason
    assert lines_of(tmp_path / "run")[0]["outcome"]["take_over"] is True


# -- the command line: `t`, act, Enter -----------------------------------------------------


class WaitsForAPerson:
    """A stand-in policy that waits on the sign-in page (it cannot sign in) and answers on the account page."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> dict[str, Any]:
        self.requests.append(request)
        page = request.text.rsplit("Current page:", 1)[-1].strip()
        if page.startswith("Account"):
            return act({"type": "answer", "text": ORDER})
        return act({"type": "wait", "seconds": 0.2})


@pytest.fixture
def window_over_cdp(xvfb, tmp_path):  # type: ignore[no-untyped-def]
    """A Chromium window a person uses, on a private X display, DevTools on a free port (for --cdp-url)."""
    import subprocess
    import time

    from surfer.tools.chromium import LAUNCH_ARGS

    folder = tmp_path / "profile"
    proc = subprocess.Popen(["/usr/bin/chromium", *LAUNCH_ARGS, "--remote-debugging-port=0", f"--user-data-dir={folder}",
                             "about:blank"], env={**os.environ, "DISPLAY": xvfb}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = folder / "DevToolsActivePort"
    deadline = time.monotonic() + 20
    while not (port_file.exists() and port_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)  # (polling for the file Chromium writes once it listens)
    try:
        yield f"http://127.0.0.1:{port_file.read_text().split()[0]}"
    finally:
        proc.terminate()
        proc.wait(10)


class AsksOnTheFollowUp(WaitsForAPerson):
    """...and on the follow-up task, asks whose name to report, then reports the reply."""

    def __call__(self, request: Any) -> dict[str, Any]:
        if FOLLOW_UP not in request.text:
            return super().__call__(request)
        self.requests.append(request)
        if "the user replied" not in request.text.split("History:", 1)[-1]:
            return act({"type": "ask_user", "question": "Whose name should I report?"})
        return act({"type": "answer", "text": "Alice"})


FOLLOW_UP = "Now tell me whose account this is."


async def test_at_the_terminal_t_takes_over_and_enter_hands_back(standin, acme_site, acme_centres, window_over_cdp, tmp_path):
    """The whole conversation at a real terminal: a task, a take-over in a headful browser where the test acts as
    a person, the hand-back, a follow-up in the same browser whose question is answered at the prompt."""
    from playwright.async_api import async_playwright

    from test_sessions import Terminal, run_args

    policy = AsksOnTheFollowUp()
    server = standin(policy)
    folder = tmp_path / "session"
    terminal = Terminal(run_args(server, TASK, "--url", acme_site.url("/account"), "--out", str(folder),
                                 "--cdp-url", window_over_cdp))
    try:
        terminal.expect("take over")  # the keys are shown
        terminal.type("t")
        terminal.expect("you have the controls")
        async with async_playwright() as playwright:
            browser = await playwright.chromium.connect_over_cdp(window_over_cdp)
            page = next(p for c in browser.contexts for p in c.pages if "/login" in p.url)  # surfer's tab
            await sign_in_as_a_person(page, acme_centres)
        terminal.type("")  # Enter hands back
        terminal.expect("handed back")
        terminal.expect("next task")
        assert f"answer: {ORDER}" in terminal.plain
        assert f"person → type {USER!r} into the 'username' field" in terminal.plain  # the live view shows human steps
        told = len(policy.requests)
        terminal.type(FOLLOW_UP)
        terminal.expect("the agent asks")
        terminal.type("Alice")
        terminal.expect("next task")
        assert "answer: Alice" in terminal.plain
        terminal.type("")  # an empty line ends the session
    finally:
        code = terminal.close()
    assert code == 0, terminal.plain[-3000:]
    tasks = json.loads((folder / "session.json").read_text())["tasks"]
    assert [(t["task"], t["status"], t["answer"]) for t in tasks] == [(TASK, "success", ORDER), (FOLLOW_UP, "success", "Alice")]
    first, second = (folder / t["run_dir"] for t in tasks)
    check_human_steps(first, acme_centres, after_step=next(
        i for i, line in enumerate(lines_of(first)) if line.get("actor") == "human"))
    assert files_holding(folder, PASSWORD) == []
    assert json.loads((first / "result.json").read_text())["timings"]["human_seconds"] > 0 and tasks[0]["human_seconds"] > 0
    assert "A person took over the controls" in policy.requests[told - 1].text
    assert lines_of(second)[0]["url"].endswith("/account")  # the follow-up began where the first task ended, signed in
    exported = export_records(folder)  # the person's steps are kept as demonstrations
    assert sum(1 for r in exported if r.get("actor") == "human") == 5


async def test_t_in_a_headless_run_says_in_one_line_what_to_use_and_the_task_goes_on(browser_env, pages, tmp_path):
    import io

    from rich.console import Console

    from surfer.apps.controls import TerminalControls

    env = await browser_env()
    model = ScriptedModel(policy=[act({"type": "scroll", "direction": "down"}), act({"type": "answer", "text": "done"})])
    agent = Agent(backend=model, profile="holotron", environment=env, validate_answers=False)
    shown = io.StringIO()
    read_end, write_end = os.pipe()
    with os.fdopen(read_end) as stream:
        controls = TerminalControls(Console(file=shown, width=200, no_color=True), tmp_path, stream)
        os.write(write_end, b"t\n")  # typed before the first step
        async with agent.session(url=pages.url("long.html"), out_dir=tmp_path / "session") as session:
            handle = session.start("Scroll and say done")
            controls.attach(handle)
            try:
                result = await handle.result()
            finally:
                controls.detach()
                os.close(write_end)
    refusals = [line for line in shown.getvalue().splitlines() if "cannot take over" in line]
    assert result.status == "success" and len(refusals) == 1
    assert "--headful" in refusals[0] and "--cdp-url" in refusals[0]


async def test_on_the_desktop_the_screens_before_and_after_are_recorded(xvfb, tmp_path):
    from surfer.tools.desktop import DesktopEnvironment
    from surfer.tools.person import NOT_READ

    env = DesktopEnvironment(display=xvfb)
    await env.start()
    try:
        model = ScriptedModel(policy=[act({"type": "answer", "text": "done"}),
                                      act({"type": "ask_user", "question": CAPTCHA, "kind": "take_over"})])
        agent = Agent(backend=model, profile="holotron", environment=env, validate_answers=False)
        async with agent.session(out_dir=tmp_path / "session", on_question=lambda question: None) as session:
            handle = session.start("Say done")
            await session.take_over()
            assert session.hand_back()
            result = await handle.result()
            declined = await session.run("Ask for a person")  # who says no: nothing they did is recorded
    finally:
        await env.close()
    assert result.status == "success"
    human = [line for line in lines_of(Path(result.run_dir)) if line.get("actor") == "human"]
    assert len(human) == 1 and human[0]["action"] is None and human[0]["outcome"]["detail"] == NOT_READ
    assert (Path(result.run_dir) / human[0]["screenshot"]).is_file() and (Path(result.run_dir) / human[0]["screenshot_after"]).is_file()
    assert "A person took over the controls" in prompt_text(model.requests[0])
    assert declined.status == "needs_input" and not [l for l in lines_of(Path(declined.run_dir)) if l.get("actor") == "human"]
