"""Loop detection: a model that repeats an action on an unchanged screen, or
goes round in a short cycle, is told so and ends as `stuck`."""

from __future__ import annotations

import json

from surfer import Agent, ScriptedModel
from surfer.agent.repetition import RepetitionDetector, same_screen, step_seen
from surfer.core.actions import CssPoint

BLANK_CLICK = {"thought": "click it again", "notes": "", "action": {"type": "click", "target": "the empty area"}}


def click(target: str) -> dict:
    return {"thought": f"click {target}", "notes": "", "action": {"type": "click", "target": target}}


async def test_the_same_click_on_an_unchanged_screen_ends_stuck(browser_env, pages, tmp_path):
    env = await browser_env(pages.url("actions.html"))
    model = ScriptedModel(default={"policy": BLANK_CLICK, "localizer": {"x": 900, "y": 900}})
    result = await Agent(backend=model, profile="holo2", environment=env, max_repeats=3).run("x", out_dir=tmp_path / "run")
    assert result.status == "stuck" and result.steps == 4, result
    assert "same action on an unchanged screen" in result.reason
    steps = [json.loads(line) for line in (tmp_path / "run" / "trajectory.jsonl").read_text().splitlines()]
    assert [("repetition" in s["outcome"]) for s in steps] == [False, True, True, True]
    assert "warning 1 of 3" in steps[1]["outcome"]["repetition"]
    policy = [r for r in model.requests if r.schema_name == "policy"]
    told = policy[2].messages[-1].content[0].text
    assert "You are repeating yourself" in told and "You are repeating yourself" not in policy[1].messages[-1].content[0].text


async def test_a_cycle_between_two_screens_ends_stuck(browser_env, pages):
    env = await browser_env(pages.url("pingpong.html"))
    # "Go to pong" is drawn at (200, 130) on the first screen; after the jump "Go to ping" is drawn at the same spot
    model = ScriptedModel(
        policy=[click("Go to pong"), click("Go to ping")] * 4,
        localizer=[{"x": 156, "y": 162}, {"x": 156, "y": 162 + 1}] * 4,
    )
    result = await Agent(backend=model, profile="holo2", environment=env, max_repeats=1).run("x")
    assert result.status == "stuck", result
    assert "cycle of 2 actions" in result.reason


async def test_progress_is_not_repetition(browser_env, pages):
    env = await browser_env(pages.url("pingpong.html"))
    scroll = {"thought": "read on", "notes": "", "action": {"type": "scroll", "direction": "down", "amount": 3}}
    answer = {"thought": "done", "notes": "", "action": {"type": "answer", "text": "end"}}
    model = ScriptedModel(policy=[scroll, scroll, scroll, answer])
    result = await Agent(backend=model, profile="holo2", environment=env, max_repeats=1, validate_answers=False).run("x")
    assert result.status == "success", result  # the same scroll, but the screen moved each time


def test_detector_patterns():
    a, b = bytes([10] * 2560), bytes([200] * 2560)
    noisy = bytes([12] * 2560)  # compression noise: not a different screen
    caret = bytes([10] * 100 + [90] + [10] * 2459)  # one cell changed (a blinking caret)
    month = bytes(([10] * 9 + [60]) * 256)  # many small changes (a calendar's digits)
    assert same_screen(a, noisy) and same_screen(a, caret) and not same_screen(a, b) and not same_screen(a, month)
    here = step_seen(a, "click(target='x')", [CssPoint(x=100, y=100)])
    assert here.same_action(step_seen(b, "click(target='x')", [CssPoint(x=104, y=96)]))
    assert not here.same_action(step_seen(a, "click(target='x')", [CssPoint(x=300, y=100)]))
    detector = RepetitionDetector()
    assert detector.seen(step_seen(a, "type")) is None and detector.seen(step_seen(b, "type")) is None  # the screen changed
    assert detector.seen(step_seen(noisy, "click")) is None and detector.seen(step_seen(a, "click")) is not None
    cycle = RepetitionDetector()
    assert [cycle.seen(step_seen(s, act)) for s, act in [(a, "p"), (b, "q"), (a, "p")]] == [None, None, None]
    assert "cycle of 2" in cycle.seen(step_seen(b, "q"))


async def test_waiting_is_not_repetition(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    wait = {"thought": "the page is loading", "notes": "", "action": {"type": "wait", "seconds": 0.05}}
    answer = {"thought": "done", "notes": "", "action": {"type": "answer", "text": "end"}}
    model = ScriptedModel(policy=[wait] * 5 + [answer])
    result = await Agent(backend=model, profile="holo2", environment=env, max_repeats=1, validate_answers=False).run("x")
    assert result.status == "success" and result.steps == 6, result
