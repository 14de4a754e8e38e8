"""A session's limits and losses: `max_seconds` is each task's own, and a browser
that is gone between tasks is replaced, the next task told that the pages of the
earlier ones are lost."""

from __future__ import annotations

import asyncio
import json

import pytest

from surfer import Agent, ScriptedModel
from surfer.agent.session import RESTARTED
from test_sessions import act, prompt_text


class SlowModel(ScriptedModel):
    """A model that takes `seconds` per call."""

    def __init__(self, seconds: float, **replies):  # type: ignore[no-untyped-def]
        super().__init__(**replies)
        self.seconds = seconds

    async def complete(self, request):  # type: ignore[no-untyped-def]
        await asyncio.sleep(self.seconds)
        return await super().complete(request)


@pytest.mark.serial  # each task's 1.6 s model call checked against its 3 s limit on the wall clock
async def test_max_seconds_is_each_tasks_own_and_waiting_for_a_person_is_shown_apart(browser_env, pages, tmp_path):
    env = await browser_env(pages.url("actions.html"))
    model = SlowModel(1.6, policy=[act({"type": "answer", "text": "one"}), act({"type": "answer", "text": "two"})])
    agent = Agent(backend=model, environment=env, validate_answers=False, max_seconds=3)
    async with agent.session(out_dir=tmp_path / "s") as session:
        first = await session.run("first")
        second = await session.run("second")  # its step would end after the first task's 3 s (2.4 s for steps)
    assert [(r.status, r.answer) for r in (first, second)] == [("success", "one"), ("success", "two")]
    assert first.timings.seconds + second.timings.seconds > 3  # the session took longer than one task may

    async def person(question):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.3)
        return "blue"

    model.seconds = 0.0
    model.enqueue("policy", act({"type": "ask_user", "question": "Which colour?"}), act({"type": "answer", "text": "blue"}))
    async with agent.session(out_dir=tmp_path / "asked", on_question=person) as session:
        asked = await session.run("pick a colour")
    assert asked.status == "success" and asked.timings.waiting_seconds >= 0.3
    recorded = json.loads((tmp_path / "asked" / "session.json").read_text())["tasks"][0]
    assert recorded["waiting_seconds"] == asked.timings.waiting_seconds  # shown apart from the task's own seconds
    result = json.loads((tmp_path / "asked" / recorded["run_dir"] / "result.json").read_text())
    assert result["timings"]["waiting_seconds"] == asked.timings.waiting_seconds


async def test_a_browser_closed_between_tasks_is_replaced_and_the_next_task_told(pages, tmp_path):
    model = ScriptedModel(policy=[act({"type": "answer", "text": "one"}), act({"type": "answer", "text": "two"})])
    agent = Agent(backend=model, validate_answers=False)
    try:
        async with agent.session(url=pages.url("actions.html"), out_dir=tmp_path / "s") as session:
            assert (await session.run("first")).status == "success"
            first_browser = session.environment
            await first_browser._browser.close()  # the browser goes away while the session waits for its next task
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
