"""SDK surface: sync/async parity, typed results, per-role backends, config errors."""

from __future__ import annotations

import asyncio

import pytest

from surfer import Agent, ConfigError, RunResult, ScriptedModel

REPLIES = dict(
    policy=[{"thought": "t", "action": {"type": "scroll", "direction": "down"}}, {"thought": "t", "action": {"type": "answer", "text": "42"}}],
    validator=[{"verdict": "accept", "reasons": "ok"}],
)


def test_run_sync_and_run_agree(pages, tmp_path):
    sync_result = Agent(backend=ScriptedModel(**REPLIES)).run_sync("task", url=pages.url("actions.html"), out_dir=tmp_path / "a")

    async def run_async() -> RunResult:
        agent = Agent(backend=ScriptedModel(**REPLIES))
        try:
            return await agent.run("task", url=pages.url("actions.html"), out_dir=tmp_path / "b")
        finally:
            await agent.aclose()

    async_result = asyncio.run(run_async())
    assert isinstance(sync_result, RunResult) and isinstance(async_result, RunResult)
    keep = {"status", "answer", "reason", "steps", "usage", "task", "url"}
    assert sync_result.model_dump(include=keep) == async_result.model_dump(include=keep)
    assert sync_result.status == "success" and sync_result.answer == "42" and sync_result.steps == 2
    assert (tmp_path / "a" / "result.json").exists() and (tmp_path / "b" / "result.json").exists()


def test_per_role_backends_override_the_shared_one(pages):
    shared = ScriptedModel(**REPLIES)
    validator = ScriptedModel(validator=[{"verdict": "accept", "reasons": "separate"}])
    result = Agent(backend=shared, backends={"validator": validator}).run_sync("task", url=pages.url("actions.html"))
    assert result.reason == "separate"
    assert [r.schema_name for r in validator.requests] == ["validator"]
    assert all(r.schema_name == "policy" for r in shared.requests)


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="max_steps"):
        Agent(max_steps=0)
    with pytest.raises(ConfigError, match="unknown profile 'nope'"):
        Agent(profile="nope")
    from surfer.agent.config import AgentConfig

    with pytest.raises(ConfigError, match="max_rejections"):
        Agent(AgentConfig(), max_rejections=-1)
    with pytest.raises(ConfigError, match="unknown role"):
        Agent(backends={"planner": ScriptedModel()})


async def test_concurrent_streams_on_one_agent_see_only_their_own_events(pages):
    def replies(answer: str) -> dict:
        return {"thought": "t", "action": {"type": "answer", "text": answer}}

    def policy(request):  # type: ignore[no-untyped-def]
        return replies("A" if "Task: first" in request.messages[1].content[0].text else "B")

    agent = Agent(backend=ScriptedModel(default={"policy": policy}), validate_answers=False)

    async def collect(task: str) -> list:
        return [event async for event in agent.stream(task, url=pages.url("actions.html"))]

    first, second = await asyncio.gather(collect("first"), collect("second"))
    assert first[0].task == "first" and first[-1].result.answer == "A"
    assert second[0].task == "second" and second[-1].result.answer == "B"
    assert len(first) == len(second)
    await agent.aclose()
