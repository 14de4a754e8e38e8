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
