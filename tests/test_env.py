"""`surfer.env`: the Gymnasium environment over real Chromium — Gymnasium's checker, the
action as the policy's own text, points given or found by the localizer (a model over HTTP),
the validator's verdict as the terminal reward, errors as info, misuse as clear errors."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from surfer.agent.config import AgentConfig, BrowserSettings
from surfer.agent.confirm import SensitiveRules
from surfer.apps.demo.oracle import DEMO_TASK, EMAIL, NAME, confirmation_code
from surfer.env import AsyncSurferEnv, EpisodeOver
from surfer.models.scripted import ScriptedModel
from test_batch import VIEWPORT, centres  # noqa: F401 - fixture
from test_desktop import tk_form  # noqa: F401 - fixture

gymnasium = pytest.importorskip("gymnasium")
ROOT = Path(__file__).resolve().parents[1]
CODE = confirmation_code(NAME, EMAIL)


def decision(action: dict, thought: str = "") -> str:
    """What a policy model answers: its JSON in a code fence."""
    return "```json\n" + json.dumps({"thought": thought, "notes": "", "action": action}) + "\n```"


@pytest.fixture(scope="module")
def env_loop():  # type: ignore[no-untyped-def]
    """The background loop (and Chromium) of this module's SurferEnvs, kept between tests."""
    from surfer.env import BrowserLoop

    loop = BrowserLoop.acquire()
    yield loop
    loop.release()
    assert loop.loop.is_closed()  # the last environment's close closes the loop too (no ResourceWarning at exit)


def test_the_environment_passes_gymnasiums_checker_and_refuses_misuse(demo_site, env_loop):
    from gymnasium.utils.env_checker import check_env

    from surfer.env import SurferEnv

    config = AgentConfig(browser=BrowserSettings(viewport=(640, 400)), max_steps=3)
    env = SurferEnv(config, task="Look at the page.", url=demo_site.url("index.html"), render_mode="rgb_array")
    other = SurferEnv(config, task="Another episode 🔑 (𠀋, Ünïcode).", url=demo_site.url("register.html"))
    try:
        check_env(env, skip_render_check=True)
        observation, info = other.reset()  # (a task beyond the Basic Multilingual Plane is in the space too)
        assert observation in other.observation_space and observation["url"].endswith("register.html")
        # the text spaces' character tables (tens of MB) are built once, not per space, environment or vector copy
        import copy

        tables = {id(space._char_index) for space in (env.action_space, copy.deepcopy(other.action_space),
                                                       *[e.observation_space[k] for e in (env, other) for k in ("url", "task")])}
        assert len(tables) == 1
        assert repr(env.action_space) == "UnicodeText(0, 16384, charset=printable characters of Unicode planes 0-3)"
        assert env._env.browser is other._env.browser and len(env_loop.browsers) == 1  # one Chromium for all
        observation, _ = env.reset(options={"task": "Scroll.", "url": demo_site.url("index.html")})
        assert observation["task"] == "Scroll." and env.render().shape == (400, 640, 3)
        _, reward, terminated, truncated, info = env.step({"type": "fail", "reason": "nothing here"})
        assert (reward, terminated, truncated) == (0.0, True, False) and info["result"]["status"] == "failed"
        with pytest.raises(EpisodeOver, match=r"call reset\(\) before step\(\)"):
            env.step({"type": "wait"})
        with pytest.raises(ValueError, match="reset options are task and url, not seed"):
            env.reset(options={"seed": 1})
        from surfer import ActionFailed  # a start URL that does not open, as the guide says: raised, then a new reset

        with pytest.raises(ActionFailed, match="could not open http://127.0.0.1:9/"):
            env.reset(options={"task": "Scroll.", "url": "http://127.0.0.1:9/"})
        assert env.reset(options={"task": "Scroll.", "url": demo_site.url("index.html")})[0]["url"].endswith("index.html")
    finally:
        env.close()
        other.close()
    env.close()  # closing twice is allowed
    made = gymnasium.make("surfer.env.gym:surfer/Browser-v0", config=config, task="t", url=demo_site.url("index.html"))
    assert isinstance(made.unwrapped, SurferEnv) and made.unwrapped._loop is env_loop
    made.close()
    with pytest.raises(EpisodeOver, match="closed"):
        env.reset()


def test_the_sync_and_async_environments_agree(demo_site, env_loop):
    from gymnasium.utils.env_checker import data_equivalence

    from surfer.env import SurferEnv

    config = AgentConfig(browser=BrowserSettings(viewport=(640, 400)), max_steps=5)
    url = demo_site.url("index.html")
    actions = [{"type": "scroll", "direction": "down"}, "not an action", decision({"type": "fail", "reason": "done"})]
    env = SurferEnv(config, task="Scroll.", url=url)
    try:
        sync = [env.reset()] + [env.step(action) for action in actions]
    finally:
        env.close()

    async def episode() -> list:
        env = AsyncSurferEnv(config, browser=await env_loop.browser(config), task="Scroll.", url=url)
        try:
            return [await env.reset()] + [await env.step(action) for action in actions]
        finally:
            await env.close()

    asynchronous = env_loop.run(episode())
    assert data_equivalence(sync, asynchronous, exact=True)
    assert [step[2] for step in sync[1:]] == [False, False, True] and "error" in sync[2][4]


async def test_an_episode_steps_on_the_policys_text_with_points_given_or_localized(demo_site, centres, shared_browser):
    scale = 2.0
    link, name_field = centres["the 'Register as a member' link"], centres["the 'Full name' text field"]
    model = ScriptedModel(
        localizer=[{"x": round(name_field.x / VIEWPORT[0] * 1000), "y": round(name_field.y / VIEWPORT[1] * 1000)}],
        validator=[{"verdict": "reject", "reasons": "The page shows another code."},
                   {"verdict": "accept", "reasons": "The welcome page shows it."}],
    )
    config = AgentConfig(profile="holotron", max_steps=8,
                         browser=BrowserSettings(viewport=VIEWPORT, device_scale_factor=scale))
    env = AsyncSurferEnv(config, browser=shared_browser, backend=model)
    try:
        with pytest.raises(EpisodeOver):
            await env.step(decision({"type": "wait"}))
        observation, _ = await env.reset(task=DEMO_TASK, url=demo_site.url("index.html"))
        assert observation["screenshot"].shape == (round(VIEWPORT[1] * scale), round(VIEWPORT[0] * scale), 3)
        # a point in pixels of the observation's screenshot (twice the CSS pixels here); no target needed with it
        click = {"type": "click", "point": {"x": link.x * scale, "y": link.y * scale}}
        observation, reward, terminated, _, info = await env.step(decision(click))
        assert observation["url"].endswith("register.html") and (reward, terminated) == (0.0, False)
        assert info["points"] == [{"x": round(link.x, 2), "y": round(link.y, 2)}] and "error" not in info
        # no point: the localizer finds the target on the screenshot
        typing = {"type": "type", "text": NAME, "target": "the 'Full name' text field"}
        _, _, _, _, info = await env.step(decision(typing))
        assert abs(info["points"][0]["x"] - name_field.x) < 2 and "error" not in info
        # errors are the step's information, the screen unchanged
        _, _, terminated, _, info = await env.step('```json\n{"type": "click", "point": {"x": 99999, "y": 1}}\n```')
        assert "outside the image" in info["error"] and not terminated
        _, _, _, _, info = await env.step("I would click the button")
        assert info["error"].startswith("The answer is not JSON") and env.steps == 4
        # an answer the validator rejects lets the episode go on; the accepted one ends it with the reward
        _, reward, terminated, _, info = await env.step(decision({"type": "answer", "text": "ACME-000000"}))
        assert (reward, terminated, info["verdict"]["accepted"]) == (0.0, False, False)
        _, reward, terminated, truncated, info = await env.step(decision({"type": "answer", "text": CODE}))
        assert (reward, terminated, truncated) == (1.0, True, False)
        result = info["result"]
        assert (result["status"], result["answer"], result["reward_source"]) == ("success", CODE, "outcome")
        assert [(s["step"], s["value"]) for s in result["signals"]] == [(5, 0.0), (6, 1.0)]
        with pytest.raises(EpisodeOver):
            await env.step(decision({"type": "wait"}))
        # at max_steps the episode is truncated; a sensitive action is refused as in a run (every action on a
        # confirm_domains host is)
        env.config = env.config.model_copy(update={"max_steps": 1})
        env.agent.sensitive = SensitiveRules(domains=["127.0.0.1"])
        await env.reset()
        observation, reward, terminated, truncated, info = await env.step(decision(click))
        assert info["error"] == "not performed: 127.0.0.1 is a domain where every action is confirmed (sensitive; " \
            'allow it with sensitive_actions = "approve" or approve_domains)'
        assert observation["url"].endswith("index.html")
        assert (reward, terminated, truncated, info["result"]["status"]) == (0.0, False, True, "limit")
    finally:
        await env.close()


def test_the_guides_example_runs_an_episode(demo_site, env_loop, capsys):
    example = runpy.run_path(str(ROOT / "examples" / "gym" / "episode.py"))
    example["main"]([demo_site.url("index.html")])
    assert capsys.readouterr().out.strip() == "reward 0.0 (failed: not found) after 3 steps"
    with pytest.raises(SystemExit) as stop:  # without its URL: the usage line, not an IndexError
        example["main"]([])
    assert stop.value.code == 2 and "usage: python examples/gym/episode.py URL" in capsys.readouterr().err


def test_the_desktop_is_an_environment_too(xvfb, tk_form, env_loop):
    from test_desktop import is_event

    from surfer.core.errors import ConfigError
    from surfer.env import SurferEnv
    from surfer.tools.desktop import DesktopEnvironment

    env = SurferEnv(AgentConfig(max_steps=3), task="Tick Multiply.", environment=lambda: DesktopEnvironment(display=xvfb))
    try:
        observation, _ = env.reset()
        assert observation["screenshot"].shape == (tk_form.screen[1], tk_form.screen[0], 3)
        assert observation in env.observation_space
        box = tk_form.centre("multiply")
        _, reward, terminated, _, info = env.step({"type": "click", "target": "the Multiply checkbox",
                                                   "point": {"x": box.x, "y": box.y}})
        assert "error" not in info and (reward, terminated) == (0.0, False)
        assert tk_form.wait_for(is_event("checkbox"))["multiply"] is True
        with pytest.raises(ConfigError, match="does not open URLs"):
            env.reset(options={"url": "https://example.com"})
        with pytest.raises(EpisodeOver):  # no episode after a reset that failed
            env.step({"type": "wait"})
        assert env.reset()[0]["task"] == "Tick Multiply."  # the failed reset's URL is not kept
    finally:
        env.close()
