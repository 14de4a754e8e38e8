"""Sessions and questions: tasks one after another in one browser (the next one
starts signed in where the last ended, its prompt telling of the earlier ones),
the agent asking the user (a person at a real pseudo-terminal, an SDK callback,
replies given beforehand), and `needs_input` where nobody can reply."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from inprocess import surfer
from login_site import ORDER, PASSWORD, TASK, USER, USERNAME_FIELD, PASSWORD_FIELD, VIEWPORT, AcmeOracle
from surfer import Agent, Reply, ScriptedModel
from surfer.agent.config import AgentConfig, BrowserSettings
from surfer.agent.questions import PresetAnswers, Question
from surfer.agent.session import earlier_tasks
from surfer.apps.demo.oracle import frame_mapper
from surfer.apps.exit_codes import EXIT_NEEDS_INPUT, exit_code
from surfer.core.errors import ConfigError

QUESTION = "What is your password?"
FOLLOW_UP = "Which name does the account page greet?"
NAME = USER.title()
ROOT = Path(__file__).resolve().parents[1]


def act(action: dict[str, Any]) -> dict[str, Any]:
    return {"thought": "", "notes": "", "action": action}


TYPE_USER = act({"type": "type", "text": USER, "target": USERNAME_FIELD, "clear": True})
ASK = act({"type": "ask_user", "question": QUESTION, "secret": True})
TYPE_REPLY = act({"type": "type", "text": "{{REPLY_1}}", "target": PASSWORD_FIELD, "clear": True, "submit": True})


def at(centre: Any) -> dict[str, int]:
    """A field's drawn centre in the holotron frame (0..1000 of the screenshot, sent as is)."""
    return {"x": round(centre.x / VIEWPORT[0] * 1000), "y": round(centre.y / VIEWPORT[1] * 1000)}


def files_holding(folder: Path, value: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and value.encode() in p.read_bytes()]


def steps_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]


def prompt_text(request: Any) -> str:
    return "".join(p.text for m in request.messages for p in m.content if hasattr(p, "text"))


class AskingOracle(AcmeOracle):
    """The Acme site's ground truth, asking the user for the password instead of knowing a secret;
    on the account page it answers the task it is given now (the order, or the greeted name)."""

    def policy(self, request: Any) -> dict[str, Any]:
        text = request.text
        location = text.rsplit("Current page:", 1)[-1].strip().splitlines()[0] if "Current page:" in text else ""
        history = text.split("History:", 1)[-1].rsplit("Current page:", 1)[0]
        if location.startswith("Account"):
            return act({"type": "answer", "text": NAME if FOLLOW_UP in text else ORDER})
        if location.startswith("Sign in"):
            if f"text={USER!r}" not in history:
                return TYPE_USER
            if "the user replied" not in history:
                return ASK
            return TYPE_REPLY
        return act({"type": "fail", "reason": f"lost at {location}"})


# -- the SDK ----------------------------------------------------------------------------


async def test_a_session_continues_signed_in_and_the_next_prompt_tells_of_the_first_task(
        browser_env, acme_site, acme_centres, tmp_path):
    env = await browser_env(viewport=VIEWPORT)
    model = ScriptedModel(
        policy=[TYPE_USER, ASK, TYPE_REPLY, act({"type": "answer", "text": ORDER}), act({"type": "answer", "text": NAME})],
        localizer=[at(acme_centres[USERNAME_FIELD]), at(acme_centres[PASSWORD_FIELD])],
    )
    asked: list[Question] = []

    async def on_question(question: Question) -> Reply:
        asked.append(question)
        return Reply(PASSWORD, secret=True)

    logins = acme_site.logins
    agent = Agent(backend=model, profile="holotron", environment=env, validate_answers=False, on_question=on_question)
    async with agent.session(url=acme_site.url("/account"), out_dir=tmp_path / "session") as session:
        first = await session.run(TASK)
        second = await session.run(FOLLOW_UP)
    assert (first.status, first.answer, second.status, second.answer) == ("success", ORDER, "success", NAME)
    assert acme_site.logins == logins + 1  # the follow-up started signed in, on the page the first task ended on
    assert len(asked) == 1 and asked[0].text == QUESTION and asked[0].secret and asked[0].url.endswith("/login?next=/account")
    summary = json.loads((tmp_path / "session" / "session.json").read_text())
    assert [(t["number"], t["status"], t["answer"]) for t in summary["tasks"]] == [(1, "success", ORDER), (2, "success", NAME)]
    first_dir, second_dir = (tmp_path / "session" / t["run_dir"] for t in summary["tasks"])
    assert json.loads((first_dir / "result.json").read_text())["answer"] == ORDER and (second_dir / "report.html").exists()
    assert steps_of(first_dir)[1]["outcome"] == {"question": QUESTION, "reply": "{{REPLY_1}}", "by": "on_question", "secret": True}
    assert steps_of(second_dir)[0]["url"].endswith("/account")
    follow_up_prompt = prompt_text([r for r in model.requests if r.schema_name == "policy"][-1])
    assert "Earlier tasks in this session" in follow_up_prompt and f"{TASK} -> success, answer: {ORDER}" in follow_up_prompt
    assert files_holding(tmp_path / "session", PASSWORD) == []
    assert not any(PASSWORD in prompt_text(r) for r in model.requests)
    assert not env.page.is_closed()  # the caller's environment stays open


def test_the_sync_session_agrees_with_the_async_one(pages, tmp_path):
    def replies() -> dict[str, Any]:
        return {"policy": [act({"type": "scroll", "direction": "down"}), act({"type": "answer", "text": "one"}),
                           act({"type": "answer", "text": "two"})]}

    from concurrent.futures import Future, ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool, Agent(backend=ScriptedModel(**replies()), validate_answers=False).session_sync(
            url=pages.url("actions.html"), out_dir=tmp_path / "sync") as session:
        later: list[Future[Any]] = []

        def meanwhile(event: object) -> None:  # another thread (a web app's worker) gives the next task meanwhile
            if not later:
                later.append(pool.submit(session.run, "second"))

        # it waits its turn (it found the session's event loop running: "This event loop is already running")
        sync = [session.run("first", listeners=[meanwhile])]
        sync.append(later[0].result())
    # (not the event loop's "Runner is closed"), and what to do instead
    with pytest.raises(RuntimeError, match=r"this session is closed .*a new one, agent.session\(...\) or agent.session_sync"):
        session.run("third")

    async def run_async() -> list[Any]:
        agent = Agent(backend=ScriptedModel(**replies()), validate_answers=False)
        try:
            async with agent.session(url=pages.url("actions.html"), out_dir=tmp_path / "async") as s:
                return [await s.run("first"), await s.run("second", out_dir=False)]  # (that task recorded nowhere)
        finally:
            await agent.aclose()

    import asyncio

    keep = {"status", "answer", "steps", "task", "url"}
    assert [r.model_dump(include=keep) for r in sync] == [r.model_dump(include=keep) for r in asyncio.run(run_async())]
    assert [r.url for r in sync] == [pages.url("actions.html"), None]  # the follow-up stays where the first ended
    assert [t["status"] for t in json.loads((tmp_path / "sync" / "session.json").read_text())["tasks"]] == ["success"] * 2
    tasks = json.loads((tmp_path / "async" / "session.json").read_text())["tasks"]
    assert [(t["status"], t["run_dir"]) for t in tasks] == [("success", "01-first"), ("success", None)]
    assert sorted(p.name for p in (tmp_path / "async").iterdir()) == ["01-first", "session.json"]


async def test_nobody_to_reply_ends_needs_input_and_answers_given_beforehand_reply(
        browser_env, acme_site, acme_centres, tmp_path):
    def model() -> ScriptedModel:
        return ScriptedModel(policy=[TYPE_USER, ASK, TYPE_REPLY, act({"type": "answer", "text": ORDER})],
                             localizer=[at(acme_centres[USERNAME_FIELD]), at(acme_centres[PASSWORD_FIELD])])

    env = await browser_env(viewport=VIEWPORT)
    alone = await Agent(backend=model(), profile="holotron", environment=env, validate_answers=False).run(
        TASK, acme_site.url("/account"), out_dir=tmp_path / "alone")
    assert (alone.status, alone.question) == ("needs_input", QUESTION) and exit_code(alone) == EXIT_NEEDS_INPUT
    saved = json.loads((tmp_path / "alone" / "result.json").read_text())
    assert saved["status"] == "needs_input" and saved["question"] == QUESTION
    env = await browser_env(viewport=VIEWPORT)
    answers = [{"pattern": r"\bpassword\b", "answer": PASSWORD, "secret": True}]
    given = await Agent(backend=model(), profile="holotron", environment=env, validate_answers=False, answers=answers).run(
        TASK, acme_site.url("/account"), out_dir=tmp_path / "given")
    assert (given.status, given.answer) == ("success", ORDER)
    assert steps_of(tmp_path / "given")[1]["outcome"]["by"] == "answers"
    assert files_holding(tmp_path / "given", PASSWORD) == []


def test_answers_files_and_the_account_of_earlier_tasks(tmp_path):
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({"which (colour|color)": "blue", "code": "1234"}))
    answers = PresetAnswers.load(path)
    assert answers.reply_to("Which colour do you want?").text == "blue" and answers.reply_to("Anything else?") is None
    for bad, message in (("[1, 2]", "string pattern"), ('{"(": "x"}', "not a regular expression"), ("{", "not valid JSON"),
                         ('{"colour": "  "}', "the answer to 'colour' is empty"),  # (was given as the user's reply)
                         ('[{"pattern": "code", "answer": "1", "secret": "false"}]', "secret must be true or false")):
        path.write_text(bad)
        with pytest.raises(ConfigError, match=re.escape(message)):
            PresetAnswers.load(path)
    from surfer.agent.result import RunResult

    results = [RunResult(status="success", task=f"task {i} " + "x" * 400, answer="a" * 500) for i in range(8)]
    account = earlier_tasks(results)
    assert "(3 earlier task(s) not shown)" in account and "task 0" not in account and "4. task 3" in account
    assert len(account) < 5 * (160 + 260) + 300  # bounded however many and however long the tasks


async def test_a_session_used_after_close_or_given_a_used_directory_refuses_at_once(tmp_path):
    import asyncio

    from surfer import TakeOverRefused

    agent = Agent(backend=ScriptedModel(policy=[]), validate_answers=False)
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "session.json").write_text("{}")  # an earlier session's (its tasks would be written over)
    with pytest.raises(ConfigError, match=r"session directory .*used is not empty \(it holds a session\)"):
        agent.session(out_dir=tmp_path / "used")
    def broken(event: Any) -> None:  # the caller's listener (or on_question) fails: raised to them, the task recorded
        raise ValueError("the caller's listener broke")

    async with agent.session(out_dir=tmp_path / "failed") as failing:
        with pytest.raises(ValueError, match="listener broke"):
            await failing.run("first", listeners=[broken])
        assert [r.status for r in failing.results] == ["error"]
    tasks = json.loads((tmp_path / "failed" / "session.json").read_text())["tasks"]
    assert [(t["status"], t["run_dir"]) for t in tasks] == [("error", "01-first")]  # (the next task is 02-)
    session = agent.session(out_dir=False)
    assert session.directory is None
    queued = session.start("never begins")
    queued.cancel()  # before its turn came: no take-over may wait for it
    assert (await queued.result()).status == "interrupted"  # as documented: cancel() gives an interrupted result
    with pytest.raises(TakeOverRefused, match="no task is running"):
        await asyncio.wait_for(session.take_over(), 2)
    await session.close()
    with pytest.raises(RuntimeError, match="closed"):
        session.start("after close")  # at once, not in the handle's result
    with pytest.raises(TakeOverRefused, match="closed"):
        await asyncio.wait_for(session.take_over(), 2)
    assert not session.hand_back() and [p.parent.name for p in tmp_path.glob("*/*/run.json")] == ["01-first"]


async def test_an_empty_secret_reply_at_the_terminal_is_not_said_to_be_received(tmp_path):
    import io

    from rich.console import Console

    from surfer.apps.controls import TerminalControls

    shown = io.StringIO()
    read_end, write_end = os.pipe()
    with os.fdopen(read_end) as stream:
        controls = TerminalControls(Console(file=shown, width=200), tmp_path, stream)
        for typed, said in ((b"\n", "(no reply)"), (b"492817\n", "(reply received)")):
            os.write(write_end, typed)
            reply = await controls.ask_user(Question(1, "Your one-time code?", secret=True))
            said_last = shown.getvalue().splitlines()[-1].strip()
            assert (reply and reply.text, said_last) == (typed.strip().decode() or None, said)
    os.close(write_end)




async def test_a_long_unicode_reply_cut_by_the_terminal_is_text_and_the_cut_is_said(tmp_path):
    """A terminal passes at most 4095 bytes of a line: a longer reply pasted at the prompt was cut in the middle
    of a character, read as a lone surrogate, and the task ended `error` when its record could not be written."""
    import io

    from rich.console import Console

    from surfer.apps.controls import TerminalControls

    shown = io.StringIO()
    leader, follower = pty.openpty()
    with os.fdopen(follower, encoding="utf-8", errors="surrogateescape") as stream:  # (stdin's, in a C.UTF-8 locale)
        controls = TerminalControls(Console(file=shown, width=200), tmp_path, stream)
        os.write(leader, "é🙂".encode() * 1000 + b"\n")  # 6000 bytes, the 4095th inside an emoji
        reply = await controls.ask_user(Question(1, "Which colour?"))
    os.close(leader)
    assert reply is not None and reply.text.startswith("é🙂é🙂") and reply.text.endswith("\ufffd")
    json.dumps(reply.text, ensure_ascii=False).encode("utf-8")  # what the trajectory writes: no lone surrogate
    assert "at most 4095 bytes of a line" in shown.getvalue()
# -- a batch --------------------------------------------------------------------------


async def test_a_batch_task_ends_needs_input_and_runs_again_with_answers(standin, acme_site, acme_centres, shared_browser, tmp_path):
    from surfer.fleet.batch import Batch
    from surfer.fleet.batch.tasks import BatchTask
    from surfer.fleet.browser_pool import SharedBrowser

    def in_shared_browser(batch: Batch) -> Batch:  # its sessions in the session's browser, not a Chromium of its own
        batch._browser = SharedBrowser.given(shared_browser)
        return batch

    server = standin(AskingOracle(acme_centres, frame_mapper("normalized_1000", VIEWPORT, 1.0)))
    config = AgentConfig(base_url=server.base_url, model=server.model, profile="holotron", max_steps=8,
                         validate_answers=False, browser=BrowserSettings(viewport=VIEWPORT))
    tasks = [BatchTask(task=TASK, url=acme_site.url("/account"), id="order")]
    await in_shared_browser(Batch(config, tasks, tmp_path)).run()
    first = json.loads((tmp_path / "results.jsonl").read_text().splitlines()[-1])
    assert (first["status"], first["question"]) == ("needs_input", QUESTION)
    await Batch(config, tasks, tmp_path).run()  # a plain resume: nothing new to reply with, nothing runs again
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 1
    answers = PresetAnswers.of([{"pattern": "password", "answer": PASSWORD, "secret": True}])
    await in_shared_browser(Batch(config, tasks, tmp_path, answers=answers)).run()
    last = json.loads((tmp_path / "results.jsonl").read_text().splitlines()[-1])
    assert (last["status"], last["answer"]) == ("success", ORDER)
    assert files_holding(tmp_path, PASSWORD) == []


# -- the command line -----------------------------------------------------------------


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURFER_")}
    return {**env, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "200", "TERM": "xterm"}


def run_args(server: Any, *extra: str) -> list[str]:
    return [sys.executable, "-m", "surfer", "run", *extra, "--base-url", server.base_url, "--model", server.model,
            "--profile", "holotron", "--viewport", f"{VIEWPORT[0]}x{VIEWPORT[1]}", "--no-validator", "--max-steps", "8"]


class Terminal:
    """A command on a pseudo-terminal (stdin, stdout and stderr), driven as a person would."""

    def __init__(self, args: list[str]) -> None:
        self.leader, follower = pty.openpty()
        self.process = subprocess.Popen(args, stdin=follower, stdout=follower, stderr=follower, env=child_env(), close_fds=True)
        os.close(follower)
        self.seen = ""

    def expect(self, text: str, timeout: float = 60) -> None:
        """Read until `text` has been shown (counted from what was already seen)."""
        start = len(self.seen)
        deadline = time.monotonic() + timeout
        while text not in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", self.seen[start:]):
            assert time.monotonic() < deadline and self.process.poll() is None, f"{text!r} never shown:\n{self.seen[-3000:]}"
            if select.select([self.leader], [], [], 0.2)[0]:
                try:
                    self.seen += os.read(self.leader, 65536).decode("utf-8", "replace")
                except OSError:
                    pass

    @property
    def plain(self) -> str:
        """What was shown, without terminal styling."""
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", self.seen)

    def type(self, line: str) -> None:
        os.write(self.leader, line.encode() + b"\n")

    def close(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            if select.select([self.leader], [], [], 0.2)[0]:
                try:
                    self.seen += os.read(self.leader, 65536).decode("utf-8", "replace")
                except OSError:
                    break
        if self.process.poll() is None:
            self.process.kill()
        code = self.process.wait()
        os.close(self.leader)
        return code


def test_a_person_at_the_terminal_replies_and_follows_up_in_the_same_browser(standin, acme_site, acme_centres, tmp_path):
    server = standin(AskingOracle(acme_centres, frame_mapper("normalized_1000", VIEWPORT, 1.0)))
    logins = acme_site.logins
    folder = tmp_path / "session"
    terminal = Terminal(run_args(server, TASK, "--url", acme_site.url("/account"), "--out", str(folder)))
    try:
        terminal.expect("the agent asks")
        assert QUESTION in terminal.plain
        terminal.type(PASSWORD)
        terminal.expect("next task")
        assert f"answer: {ORDER}" in terminal.plain and PASSWORD not in terminal.plain  # the reply was not echoed
        terminal.type(FOLLOW_UP)
        terminal.expect("next task")
        assert f"answer: {NAME}" in terminal.plain
        terminal.type("")  # an empty line ends the session
    finally:
        code = terminal.close()
    assert code == 0, terminal.plain[-3000:]
    assert acme_site.logins == logins + 1
    tasks = json.loads((folder / "session.json").read_text())["tasks"]
    assert [(t["task"], t["status"], t["answer"]) for t in tasks] == [(TASK, "success", ORDER), (FOLLOW_UP, "success", NAME)]
    first, second = (folder / t["run_dir"] for t in tasks)
    assert steps_of(first)[1]["outcome"] == {"question": QUESTION, "reply": "{{REPLY_1}}", "by": "person", "secret": True}
    assert [s["url"].endswith("/account") for s in steps_of(second)] == [True]
    assert "Earlier tasks in this session" in server.requests[-1].text
    assert files_holding(folder, PASSWORD) == []


def test_off_a_terminal_a_question_exits_needs_input_and_answers_reply_on_the_rerun(standin, acme_site, acme_centres, tmp_path):
    server = standin(AskingOracle(acme_centres, frame_mapper("normalized_1000", VIEWPORT, 1.0)))
    args = run_args(server, TASK, "--url", acme_site.url("/account"), "--json")
    asked = subprocess.run([*args, "--out", str(tmp_path / "asked")], capture_output=True, text=True, env=child_env(),
                           stdin=subprocess.DEVNULL, timeout=120)
    assert asked.returncode == EXIT_NEEDS_INPUT, asked.stderr
    assert (json.loads(asked.stdout)["status"], json.loads(asked.stdout)["question"]) == ("needs_input", QUESTION)
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps([{"pattern": "password", "answer": PASSWORD, "secret": True}]))
    # (the rerun and a missing task in this process, nobody at its input: tests/inprocess.py)
    replied = surfer(*args[3:], "--out", str(tmp_path / "replied"), "--answers", str(answers))
    assert replied.returncode == 0, replied.stderr
    assert json.loads(replied.stdout)["answer"] == ORDER
    assert files_holding(tmp_path / "replied", PASSWORD) == []
    no_task = surfer(*run_args(server)[3:])
    said = no_task.stdout + no_task.stderr
    assert no_task.returncode == 2 and "give the task to run" in said and "Traceback" not in said


async def test_asking_the_same_question_again_is_a_repetition(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    same = act({"type": "ask_user", "question": "Which colour?"})
    replies: list[str] = []

    def on_question(question: Question) -> str:  # a sync callback
        replies.append(question.text)
        return "I don't mind"

    agent = Agent(backend=ScriptedModel(policy=[same] * 6), environment=env, on_question=on_question, max_repeats=2)
    result = await agent.run("pick a colour")
    assert result.status == "stuck" and "repeated the same action" in (result.reason or "")
    assert len(replies) == 3  # asked, asked again (told), asked a third time: stopped


def test_a_qa_case_whose_agent_asks_fails_needs_input_without_a_retry(standin, demo_site, tmp_path):
    from junitparser import Failure, JUnitXml

    def asks(request: Any) -> dict[str, Any]:
        return act({"type": "ask_user", "question": "Which branch of the library do you mean?"})

    server = standin(asks)
    suite = tmp_path / "checks.yaml"
    suite.write_text(f"name: checks\nbase_url: {demo_site.base_url}\ncases:\n"
                     "  - name: hours\n    url: index.html\n    task: Find the opening hours\n    expect: [{answer: '9:00'}]\n")
    proc = surfer("qa", str(suite), "--out", str(tmp_path / "out"), "--retries", "1",  # (nobody at its input: tests/inprocess.py)
                  "--no-cache", "--quiet", "--base-url", server.base_url, "--model", server.model, "--profile", "holotron")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = json.loads((tmp_path / "out" / "results.jsonl").read_text().splitlines()[-1])
    assert (record["status"], record["attempts"]) == ("needs_input", 1)  # a question is not retried
    case = next(case for s in JUnitXml.fromfile(str(tmp_path / "out" / "junit.xml")) for case in s)
    failure = case.result[0]
    assert isinstance(failure, Failure) and failure.type == "needs_input"


@pytest.mark.parametrize("fault", ["page crashed", "browser closed"])
async def test_a_browser_that_dies_between_tasks_is_replaced_and_the_next_prompt_says_so(pages, tmp_path, fault):
    from conftest import crash_page
    from surfer.agent.session import RESTARTED

    model = ScriptedModel(policy=[act({"type": "answer", "text": "one"}), act({"type": "answer", "text": "two"})])
    agent = Agent(backend=model, validate_answers=False)
    try:
        async with agent.session(url=pages.url("actions.html"), out_dir=tmp_path / "s") as session:
            assert (await session.run("first")).status == "success"
            first_browser = session.environment
            if fault == "page crashed":
                await crash_page(first_browser.page)
            else:  # the browser goes away while the session waits for its next task
                await first_browser._browser.close()
                assert await session.renew_environment() and session.browser_restarted  # (the terminal says so here)
            second = await session.run("second")
            assert second.status == "success" and session.environment is not first_browser
            assert second.url == pages.url("actions.html")  # the new browser opens the session's page again
            assert not session.browser_restarted  # told once
    finally:
        await agent.aclose()
    assert RESTARTED in prompt_text(model.requests[-1])
    tasks = json.loads((tmp_path / "s" / "session.json").read_text())["tasks"]
    assert [(t["task"], t["status"]) for t in tasks] == [("first", "success"), ("second", "success")]


def test_bad_answers_are_usage_errors_naming_the_file_or_line(tmp_path):
    from typer.testing import CliRunner

    from surfer.apps.cli import app

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"task": "t", "answers": {"(unclosed": "x"}}) + "\n")
    bad_line = CliRunner().invoke(app, ["batch", str(tasks), "--out", str(tmp_path / "out"), "--base-url", "http://127.0.0.1:9/v1"])
    assert bad_line.exit_code == 2 and f"{tasks}:1: answers" in " ".join(bad_line.output.split()), bad_line.output
    tasks.write_text(json.dumps({"task": "t"}) + "\n")
    for command in (["batch", str(tasks), "--out", str(tmp_path / "out")], ["run", "t", "--json"]):
        missing = CliRunner().invoke(app, [*command, "--answers", str(tmp_path / "nope.json"), "--base-url", "http://127.0.0.1:9/v1"])
        assert missing.exit_code == 2 and "does not exist" in missing.output and "Traceback" not in missing.output, missing.output


def test_without_a_task_the_terminal_asks_for_one_a_line_typed_meanwhile_is_queued_and_ctrl_d_ends(standin, tmp_path):
    server = standin(lambda request: act({"type": "answer", "text": "done"}), delay=0.7)
    folder = tmp_path / "session"
    terminal = Terminal(run_args(server, "--out", str(folder)))
    try:
        terminal.expect("next task")
        terminal.type("first")
        terminal.expect("keys:")  # the task runs (its model call takes 0.7 s)
        terminal.type("second")
        terminal.expect("queued as the next task: second")
        terminal.expect("next task (")  # both ran; asked for a third
        os.write(terminal.leader, b"\x04")  # Ctrl-D at an empty prompt
    finally:
        code = terminal.close()
    assert code == 0, terminal.plain[-2000:]
    tasks = json.loads((folder / "session.json").read_text())["tasks"]
    assert [(t["task"], t["status"]) for t in tasks] == [("first", "success"), ("second", "success")]


async def test_time_waiting_for_a_reply_is_not_charged_to_the_time_limit(browser_env, pages, tmp_path):
    import asyncio

    env = await browser_env(pages.url("actions.html"))

    def slow_person(question: Question) -> str:  # a plain function, as `input()` would be
        time.sleep(1.7)  # a person who takes longer to reply than the task may run
        return "blue"

    ticks = 0

    async def meanwhile() -> None:  # the event loop goes on while the person thinks (another session would)
        nonlocal ticks
        while True:
            await asyncio.sleep(0.1)
            ticks += 1

    model = ScriptedModel(policy=[act({"type": "ask_user", "question": "Which colour?"}), act({"type": "answer", "text": "blue"})])
    ticking = asyncio.ensure_future(meanwhile())
    result = await Agent(backend=model, environment=env, on_question=slow_person, validate_answers=False,
                         max_seconds=1.5).run("pick a colour", out_dir=tmp_path / "run")
    ticking.cancel()
    assert ticks >= 10, ticks  # (a sync handler called on the loop held it up for the whole 1.7 s)
    assert (result.status, result.answer, result.reason) == ("success", "blue", None)  # not answered at the limit
    assert result.timings.waiting_seconds >= 1.7 and result.timings.seconds > 1.5
    asked = steps_of(tmp_path / "run")[0]["timings"]  # the wait is the person's, not surfer's overhead
    assert asked["waiting"] >= 1.7 and asked["overhead"] < 1 and result.timings.overhead_p50 < 1, asked
