"""A session's limits: `max_seconds` is each task's own, and time spent waiting for
a person is shown apart (a browser gone between tasks: test_sessions.py)."""

from __future__ import annotations

import asyncio
import json

import pytest

from surfer import Agent, ScriptedModel
from test_sessions import act


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
