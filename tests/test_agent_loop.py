"""The loop's decisions with the scripted model double, in real Chromium:
retries with feedback, step failures, validator rejections, limits, bounded
prompts, the event stream and page crashes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from surfer import Agent, ScriptedModel
from surfer.agent.events import Finished, ModelCalled, RunStarted, StepFinished, StepStarted, Validated
from surfer.models.backend import ModelRequest
from surfer.core.actions import Goto
from surfer.tools.browser import BrowserEnvironment
from conftest import crash_page

CLICK = {"thought": "click it", "notes": "", "action": {"type": "click", "target": "the button"}}
SCROLL = {"thought": "scroll", "notes": "saw more", "action": {"type": "scroll", "direction": "down", "amount": 1}}


def answer(text: str) -> dict:
    return {"thought": "done", "notes": "", "action": {"type": "answer", "text": text}}


ACCEPT = {"verdict": "accept", "reasons": "matches"}


@pytest.fixture
async def env(shared_browser, pages):
    environment = BrowserEnvironment(browser=shared_browser)
    await environment.start(pages.url("actions.html"))
    yield environment
    await environment.close()


def make_agent(model: ScriptedModel, env: BrowserEnvironment, **settings) -> Agent:
    return Agent(backend=model, environment=env, profile="holo2", **settings)


async def test_malformed_policy_output_is_retried_with_feedback(env):
    model = ScriptedModel(
        policy=["this is not json", {"thought": "x", "action": {"type": "teleport"}}, CLICK, answer("ok")],
        localizer=[{"x": 125, "y": 150}], validator=[ACCEPT],
    )
    result = await make_agent(model, env).run("click the button")
    assert result.status == "success" and result.answer == "ok"
    policy_requests = [r for r in model.requests if r.schema_name == "policy"]
    feedback = policy_requests[1].messages[-1].content[0].text
    assert "not JSON" in feedback
    feedback2 = policy_requests[2].messages[-1].content[0].text
    assert "does not match the required format" in feedback2 and "action" in feedback2
    assert await env.page.evaluate("window.__log") == ["click:0"]  # 125/1000*1280 = 160, 150/1000*800 = 120
    # the report shows what the model said beside why it was rejected, folded open (escaped: the answer is not markup)
    report = (Path(result.run_dir) / "report.html").read_text(encoding="utf-8")
    assert '<details class="calls" open><summary>model answers (4, 2 rejected)' in report
    assert "this is not json</pre>" in report and "rejected: The answer is not JSON" in report
    assert "&quot;teleport&quot;" in report and '"teleport"' not in report


async def test_out_of_range_point_is_retried_never_clicked(env):
    model = ScriptedModel(
        policy=[CLICK, answer("ok")], localizer=[{"x": 1500, "y": 10}, {"x": 125, "y": 150}], validator=[ACCEPT],
    )
    result = await make_agent(model, env).run("click the button")
    assert result.status == "success"
    localizer_requests = [r for r in model.requests if r.schema_name == "localizer"]
    assert "outside the image" in localizer_requests[1].messages[-1].content[0].text
    assert await env.page.evaluate("window.__log") == ["click:0"]


async def test_unusable_output_fails_the_step_then_the_run(env, tmp_path):
    model = ScriptedModel(default={"policy": "{broken"})
    agent = make_agent(model, env, output_retries=1, max_failed_steps=2)
    result = await agent.run("anything", out_dir=tmp_path / "run")
    assert result.status == "error" and result.error_kind == "model"
    assert "2 failed steps in a row" in result.reason
    lines = [json.loads(line) for line in (tmp_path / "run" / "trajectory.jsonl").read_text().splitlines()]
    assert len(lines) == 2
    assert lines[0]["error"].startswith("policy output unusable after 2 attempt(s)")
    assert [c["completion"] for c in lines[0]["calls"]["policy"]] == ["{broken", "{broken"]


async def test_validator_rejection_goes_into_memory_and_the_loop_goes_on(env):
    model = ScriptedModel(
        policy=[answer("41"), answer("42")],
        validator=[{"verdict": "reject", "reasons": "the page shows 42"}, ACCEPT],
    )
    events = []
    agent = make_agent(model, env, listeners=[events.append])
    result = await agent.run("what number?")
    assert result.status == "success" and result.answer == "42" and result.steps == 2
    second_policy = [r for r in model.requests if r.schema_name == "policy"][1]
    prompt = second_policy.messages[1].content[0].text
    assert "The validator rejected the answer '41': the page shows 42" in prompt
    verdicts = [e.verdict.accepted for e in events if isinstance(e, Validated)]
    assert verdicts == [False, True]


async def test_too_many_rejections_fail_the_run(env):
    model = ScriptedModel(default={"policy": answer("wrong"), "validator": {"verdict": "reject", "reasons": "no"}})
    result = await make_agent(model, env, max_rejections=1).run("what number?")
    assert result.status == "failed" and result.answer == "wrong"
    assert "rejected the answer 2 times" in result.reason


async def test_no_validator_accepts_answers(env):
    model = ScriptedModel(policy=[answer("fine")])
    result = await make_agent(model, env, validate_answers=False).run("anything")
    assert result.status == "success" and result.answer == "fine"
    assert not [r for r in model.requests if r.schema_name == "validator"]


async def test_fail_action_ends_the_run_as_failed(env):
    model = ScriptedModel(policy=[{"thought": "", "action": {"type": "fail", "reason": "no such page"}}])
    result = await make_agent(model, env).run("impossible")
    assert result.status == "failed" and result.reason == "no such page"


async def test_step_limit_asks_the_policy_once_for_a_final_answer(env):
    model = ScriptedModel(policy=[SCROLL, SCROLL, answer("partial")], validator=[ACCEPT])
    result = await make_agent(model, env, max_steps=2).run("scroll forever")
    assert result.status == "success" and result.answer == "partial"
    assert "step limit of 2 reached" in result.reason
    final_request = [r for r in model.requests if r.schema_name == "policy"][-1]
    assert "limit has been reached" in final_request.messages[1].content[-1].text
    schema_types = json.dumps(final_request.schema)
    assert '"answer"' in schema_types and '"click"' not in schema_types


async def test_time_limit_without_a_final_answer(env):
    model = ScriptedModel(policy=[SCROLL], default={"policy": "garbage"})
    result = await make_agent(model, env, max_seconds=0.001, output_retries=0).run("slow")
    assert result.status == "limit" and "time limit" in result.reason


async def test_prompt_size_stops_growing(env):
    counter = iter(range(1000))

    def scroll_with_new_note(request: ModelRequest) -> dict:
        return {**SCROLL, "notes": f"saw more content, part {next(counter)}"}

    model = ScriptedModel(default={"policy": scroll_with_new_note})
    await env.perform(Goto(url=env.page.url.replace("actions.html", "long.html")))  # 8,000 px: every scroll shows new lines
    agent = make_agent(model, env, max_steps=30, history_window=5)
    await agent.run("scroll a lot")
    policy = [r for r in model.requests if r.schema_name == "policy"][:30]
    sizes = [r.summary()["text_chars"] for r in policy]
    images = [r.summary()["images"] for r in policy]
    assert max(images) == 3 and images[-1] == 3
    # after the history window fills, the prompt stays within a few characters
    steady = sizes[12:]
    assert max(steady) - min(steady) <= 40, sizes
    assert max(sizes) < sizes[6] + 200


async def test_event_stream_is_typed_and_ordered(env):
    model = ScriptedModel(policy=[CLICK, answer("ok")], localizer=[{"x": 125, "y": 150}], validator=[ACCEPT])
    agent = make_agent(model, env)
    events = [event async for event in agent.stream("click")]
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "RunStarted" and kinds[-1] == "Finished"
    assert isinstance(events[0], RunStarted) and isinstance(events[-1], Finished)
    assert events[-1].result.status == "success"
    assert kinds.count("StepStarted") == kinds.count("StepFinished") == 2
    roles = [e.call.role for e in events if isinstance(e, ModelCalled)]
    assert roles == ["policy", "localizer", "policy", "validator"]
    assert "ActionPerformed" in kinds and "Validated" in kinds
    first = next(e for e in events if isinstance(e, StepFinished)).record
    assert first.points[0].x == pytest.approx(160) and first.points[0].y == pytest.approx(120)
    assert first.timings.model >= 0 and first.timings.screenshot > 0 and first.timings.total >= first.timings.model


async def test_crashed_page_ends_the_run_with_a_browser_crash(env):
    class CrashesThePage(ScriptedModel):
        async def complete(self, request: ModelRequest):  # type: ignore[no-untyped-def]
            if not self.requests:
                await crash_page(env.page)  # the renderer dies while the model thinks
            return await super().complete(request)

    model = CrashesThePage(policy=[SCROLL, SCROLL])
    result = await make_agent(model, env).run("crash")
    assert result.status == "error" and result.error_kind == "browser_crash"  # an environment error of its own kind
    assert "crashed" in result.reason


async def test_the_step_a_server_outage_ends_says_why_and_counts_its_wait_as_the_model_s(env, tmp_path):
    # the localizer's call waits for a server that never comes back: that step's record names the error, the
    # failed call is in it, and its wait is model time (it was surfer's overhead, and its p50)
    from surfer.core.errors import ModelServerUnreachable

    class GoneMidStep(ScriptedModel):
        async def complete(self, request: ModelRequest):  # type: ignore[no-untyped-def]
            if request.schema_name == "localizer":
                await asyncio.sleep(0.3)
                raise ModelServerUnreachable("the model server at http://x/v1 has not answered for 0.3 s (--server-wait)")
            return await super().complete(request)

    result = await make_agent(GoneMidStep(policy=[CLICK]), env).run("click", out_dir=tmp_path / "run")
    assert result.status == "error" and result.error_kind == "unreachable"
    step = json.loads((tmp_path / "run" / "trajectory.jsonl").read_text())
    assert step["error"] == result.reason and "has not answered" in step["error"]
    failed = step["calls"]["localizer"][0]
    assert failed["completion"] == "" and failed["error"].startswith("no answer: the model server") and failed["seconds"] >= 0.3
    timings = step["timings"]  # the wait is the model's (overhead is what is left of the step: not it, under any load)
    assert 0.3 <= timings["model"] <= timings["total"]
    assert result.timings.overhead_p50 < 0.3


async def test_scripted_model_reports_exhaustion_clearly():
    model = ScriptedModel()
    with pytest.raises(AssertionError, match=r"no more 'policy' answers: .*give more replies, or default=\{'policy': reply\}"):
        await model.complete(ModelRequest(messages=(), schema_name="policy"))


def test_steps_started_before_finished_is_enforced_by_types():
    assert StepStarted(1).index == 1


async def test_unreachable_start_url_is_an_environment_error(tmp_path):
    model = ScriptedModel(policy=[answer("x")])
    result = await Agent(backend=model).run("task", url="http://127.0.0.1:1/", out_dir=tmp_path / "run")
    assert result.status == "error" and result.error_kind == "environment"
    assert "could not open http://127.0.0.1:1/" in result.reason
    assert (tmp_path / "run" / "result.json").exists()


async def test_an_environment_can_end_the_episode_with_a_reward(shared_browser, pages):
    from surfer.tools.base import EpisodeEnd

    class Rewarded(BrowserEnvironment):
        async def episode_end(self) -> EpisodeEnd | None:
            log = await self.page.evaluate("window.__log")
            return EpisodeEnd("success", "button clicked", 1.0) if "click:0" in log else None

    env = Rewarded(browser=shared_browser)
    await env.start(pages.url("actions.html"))
    wait = {"thought": "", "action": {"type": "wait", "seconds": 0.01}}
    model = ScriptedModel(policy=[wait, CLICK, wait], localizer=[{"x": 125, "y": 150}])
    result = await make_agent(model, env).run("click the button")
    await env.close()
    assert result.status == "success" and result.reward == 1.0 and result.reason == "button clicked"
    assert result.reward_source == "environment" and result.signals == []
    assert result.steps == 2  # ended right after the rewarding action, no third policy call
    assert len([r for r in model.requests if r.schema_name == "policy"]) == 2


async def test_clip_captures_a_region_and_points_map_back_through_its_origin(browser_env, pages):
    from surfer.core.coordinates import model_to_css
    from surfer.models.imaging import ImagePolicy, prepare_image

    env = await browser_env(pages.url("actions.html"), clip=(80, 80, 200, 100), device_scale_factor=2)
    shot = (await env.observe()).screenshot
    assert (shot.size.width, shot.size.height) == (400, 200) and shot.origin == (80.0, 80.0)
    prepared = await prepare_image(shot, ImagePolicy())
    point = model_to_css(400, 400, "normalized_1000", prepared.geometry)  # 40% across, 40% down the clip
    assert (point.x, point.y) == (160.0, 120.0)
    await env.perform(__import__("surfer").actions.Click(target="button", point=point))
    assert await env.page.evaluate("window.__log") == ["click:0"]


async def test_a_localizer_that_never_answers_usably_ends_the_run(env):
    model = ScriptedModel(default={"policy": CLICK, "localizer": '{"x": "left"}'})
    result = await make_agent(model, env, output_retries=0, max_failed_steps=2).run("click")
    assert result.status == "error" and result.error_kind == "model"
    assert "localizer output unusable" in result.reason and result.steps == 2


class _CheckWatchingModel(ScriptedModel):
    """A model whose server check lasts until the browser has opened the start page (or fails)."""

    def __init__(self, env: BrowserEnvironment, *, down: bool = False, **answers) -> None:
        super().__init__(**answers)
        self.env, self.down, self.saw_page = env, down, False

    async def check(self) -> None:
        import asyncio

        from surfer.core.errors import ModelServerUnreachable

        if self.down:
            await asyncio.sleep(0.3)  # the browser's start fails meanwhile: the server's error still wins
            raise ModelServerUnreachable("cannot reach the model server (test)")
        for _ in range(200):
            page = self.env._page
            if page is not None and page.url.endswith("actions.html"):
                self.saw_page = True
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the browser did not open the start page while the model check ran")


async def test_the_browser_opens_the_start_page_while_the_model_server_is_checked(shared_browser, pages):
    env = BrowserEnvironment(browser=shared_browser)
    model = _CheckWatchingModel(env, policy=[answer("done")], validator=[ACCEPT])
    result = await make_agent(model, env).run("task", url=pages.url("actions.html"))
    await env.close()
    assert model.saw_page and result.status == "success", result


async def test_a_server_that_is_down_wins_over_a_start_url_that_fails(shared_browser):
    env = BrowserEnvironment(browser=shared_browser)
    model = _CheckWatchingModel(env, down=True)
    result = await make_agent(model, env).run("task", url="http://127.0.0.1:1/")
    await env.close()
    assert result.status == "error" and result.error_kind == "unreachable", result
