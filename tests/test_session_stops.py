"""Stopping inside a session at the terminal (`surfer run` on a real pseudo-terminal):
Ctrl-C stops the task in progress and asks whether to end the session, a second
Ctrl-C ends it, SIGTERM ends it; every task is recorded (its run directory and
the session's summary) either way."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

from surfer.apps.signals import COPY_WINDOW_S
from login_site import VIEWPORT
from test_sessions import Terminal, act, run_args

NOW = "The task below is the one to do now."


class HeldModel:
    """Answers at once, but holds the model call of a task whose text says "slow" until released
    (the test stops that task while its step waits on the model)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.held = threading.Condition()
        self.tasks: list[str] = []  # the slow tasks whose call is (or was) held

    def __call__(self, request: Any) -> dict[str, Any]:
        task = request.text.split(NOW, 1)[-1]  # the task to do now, not the earlier ones the prompt tells of
        if "slow" in task:
            with self.held:
                self.tasks.append(task)
                self.held.notify_all()
            self.release.wait(30)
        return act({"type": "answer", "text": "done"})

    def await_held(self, task: str) -> None:
        with self.held:
            assert self.held.wait_for(lambda: any(task in t for t in self.tasks), 60), f"{task!r} never asked the model"


class Stops:
    """Stop signals sent to the command, a person's pace apart (a signal within the copy
    window of the last is a copy of it, signals.py)."""

    def __init__(self, terminal: Terminal) -> None:
        self.terminal = terminal
        self.last = -COPY_WINDOW_S

    def send(self, signum: int) -> None:
        time.sleep(max(0.0, self.last + COPY_WINDOW_S + 0.1 - time.monotonic()))
        self.terminal.process.send_signal(signum)  # SIGINT: what Ctrl-C at the terminal sends
        self.last = time.monotonic()


def summary(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "session.json").read_text())


def test_ctrl_c_stops_the_task_and_asks_and_a_second_ctrl_c_ends_the_session(standin, tmp_path):
    model = HeldModel()
    server = standin(model)
    folder = tmp_path / "session"
    terminal = Terminal(run_args(server, "--out", str(folder)))
    try:
        stops = Stops(terminal)
        terminal.expect("next task")
        terminal.type("a slow task")
        model.await_held("a slow task")
        stops.send(signal.SIGINT)
        terminal.expect("End the session? [y/N]")
        assert [t["status"] for t in summary(folder)["tasks"]] == ["interrupted"]  # recorded before the question
        terminal.type("n")
        terminal.expect("next task")
        terminal.type("a quick task")  # the session goes on, in the same browser
        terminal.expect("next task")
        terminal.type("another slow task")
        model.await_held("another slow task")
        stops.send(signal.SIGINT)
        terminal.expect("End the session? [y/N]")
        stops.send(signal.SIGINT)  # a second Ctrl-C at the question
    finally:
        code = terminal.close()
        model.release.set()
    assert code == 130, terminal.plain[-3000:]
    assert "Traceback" not in terminal.plain and "saved in" in terminal.plain
    record = summary(folder)
    assert [(t["task"], t["status"]) for t in record["tasks"]] == [
        ("a slow task", "interrupted"), ("a quick task", "success"), ("another slow task", "interrupted")]
    assert "ended" in record
    for number in (0, 2):
        task = record["tasks"][number]
        assert task["reason"] == "interrupted: stopped by Ctrl-C"
        assert json.loads((folder / task["run_dir"] / "result.json").read_text())["status"] == "interrupted"
    assert "1. a slow task -> interrupted" in server.requests[-1].text  # the next prompt tells of the stopped task


def test_sigterm_ends_the_session_with_every_task_recorded(standin, tmp_path):
    model = HeldModel()
    server = standin(model)
    folder = tmp_path / "session"
    terminal = Terminal(run_args(server, "a quick task", "--out", str(folder)))
    try:
        terminal.expect("next task")
        terminal.type("a slow task")
        model.await_held("a slow task")
        terminal.process.send_signal(signal.SIGTERM)
    finally:
        code = terminal.close()
        model.release.set()
    assert code == 143, terminal.plain[-3000:]
    assert "End the session?" not in terminal.plain and "Traceback" not in terminal.plain
    record = summary(folder)
    assert [(t["task"], t["status"]) for t in record["tasks"]] == [("a quick task", "success"), ("a slow task", "interrupted")]
    assert record["tasks"][1]["reason"] == "interrupted: stopped by SIGTERM" and "ended" in record
    assert json.loads((folder / record["tasks"][1]["run_dir"] / "result.json").read_text())["status"] == "interrupted"


def test_a_browser_that_dies_between_tasks_is_replaced_and_the_terminal_says_so(standin, pages, tmp_path):
    import psutil

    from surfer.agent.session import RESTARTED

    def shop(request: Any) -> dict[str, Any]:  # the second task buys the lamp (a sensitive click, confirmed at the terminal)
        if request.role == "localizer":
            return {"x": round(200 / VIEWPORT[0] * 1000), "y": round(130 / VIEWPORT[1] * 1000)}  # the button's centre
        if "buy the lamp" in request.text.split(NOW)[-1] and "bought=1" not in request.text.rsplit("Current page:", 1)[-1]:
            return act({"type": "click", "target": "the Buy now button"})
        return act({"type": "answer", "text": "done"})

    server = standin(shop)
    folder = tmp_path / "session"
    terminal = Terminal(run_args(server, "first", "--url", pages.url("shop.html"), "--out", str(folder)))
    try:
        terminal.expect("next task")
        browsers = []
        for process in psutil.Process(terminal.process.pid).children(recursive=True):
            try:  # (a helper process that just ended is a zombie: psutil refuses its command line)
                if "chrom" in process.name().lower() and not any(a.startswith("--type=") for a in process.cmdline()):
                    browsers.append(process)
            except psutil.Error:
                continue
        assert browsers, "no browser process under the command"
        for process in browsers:
            process.kill()  # the browser dies while the person thinks of the next task
        psutil.wait_procs(browsers, timeout=30)
        terminal.type("buy the lamp")
        terminal.expect("perform it?")
        terminal.type("y")
        terminal.expect("next task")
        terminal.type("")
    finally:
        code = terminal.close()
    assert code == 0, terminal.plain[-3000:]
    said = " ".join(terminal.plain.split())
    assert "browser: it stopped working and was restarted: the pages, sign-ins and tabs of the earlier tasks are gone" in said
    assert said.index("was restarted") < said.index("surfer buy the lamp")  # said before the task began
    tasks = summary(folder)["tasks"]
    assert [(t["task"], t["status"]) for t in tasks] == [("first", "success"), ("buy the lamp", "success")]
    assert RESTARTED in server.requests[-1].text
    assert json.loads((folder / tasks[1]["run_dir"] / "trajectory.jsonl").read_text().splitlines()[0])["url"] == pages.url("shop.html")
    # the screenshot the person was pointed to is the task's own (in the session's, the next task's confirmation
    # at the same step would overwrite it)
    shot = folder / tasks[1]["run_dir"] / "confirm-step-001.jpg"
    assert shot.stat().st_size > 1000 and f"screenshot: {shot}" in said and not list(folder.glob("confirm-*"))
