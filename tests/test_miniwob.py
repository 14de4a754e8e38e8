"""MiniWoB++ through the whole stack: seeded episodes in real Chromium, the
ground-truth oracle answering over real HTTP (stand-in server), points
mapped back from a cropped 3x screenshot, rewards read from the page."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image
from typer.testing import CliRunner

from surfer.agent.config import AgentConfig
from surfer.apps.cli import app
from surfer.bench.miniwob.bench import SUITES, resolve_tasks, run_miniwob
from surfer.bench.miniwob.environment import MiniWobEnvironment, miniwob_html_dir
from surfer.apps.demo.static_site import StaticSite
from surfer.core.errors import ConfigError

import miniwob  # noqa: E402,F401 - the test extra installs it; fail loudly if missing


# The benchmark's own Chromium is launched by the command's test (test_bench_command_prints_a_table_and_writes_json);
# the others run their episodes in the session's shared browser (a context each), not a driver and a Chromium apiece.


async def test_oracle_solves_representative_tasks_at_concurrency_2(shared_browser):
    # clicks + submit, a multi-step form, autocomplete, key presses (copy/paste via the keyboard)
    contexts = len(shared_browser.contexts)
    report = await run_miniwob(AgentConfig(max_steps=20), SUITES["smoke"], seeds=1, concurrency=2, oracle=True,
                               browser=shared_browser)
    failures = [r for r in report["runs"] if not r["success"]]
    assert not failures, failures
    # a browser given is left open, the episodes' contexts closed
    assert shared_browser.is_connected() and len(shared_browser.contexts) == contexts
    assert report["success_rate"] == 1.0 and set(report["tasks"]) == set(SUITES["smoke"])
    for run in report["runs"]:
        assert run["done"] and run["raw_reward"] > 0 and run["agent_status"] == "success"
    steps = {r["task"]: r["steps"] for r in report["runs"]}
    assert steps["login-user"] == 3 and steps["copy-paste"] == 7  # type, type, submit / click, keys x4, click, submit


@pytest.mark.parametrize("profile", ["holo2", "holo1.5"])
async def test_points_map_back_through_resizing_profiles(profile: str, shared_browser):
    # holo2 resizes the 480x630 crop (factor 32) and answers in 0..1000; holo1.5 answers in pixels
    report = await run_miniwob(
        AgentConfig(profile=profile, max_steps=5),
        ["click-button", "click-link"],
        seeds=1,
        concurrency=2,
        oracle=True,
        first_seed=7,
        browser=shared_browser,
    )
    assert [r["success"] for r in report["runs"]] == [True, True], report["runs"]
    assert all(r["steps"] == 1 for r in report["runs"])  # stopped as soon as the episode was done


async def test_environment_crops_the_task_area_at_scale_3_and_reads_rewards(shared_browser):
    from surfer.core.actions import Click, CssPoint

    truth: dict = {}
    with StaticSite(miniwob_html_dir()) as site:
        env = MiniWobEnvironment(browser=shared_browser, on_observe=truth.update)
        try:
            await env.start(site.url("miniwob/click-button.html"))
            utterance = await env.begin_episode(seed=3)
            assert utterance.startswith("Click on the") and (await env.reward()).done is False
            shot = (await env.observe()).screenshot
            assert (shot.size.width, shot.size.height, shot.scale) == (480, 630, 3.0)
            assert Image.open(io.BytesIO(shot.data)).size == (480, 630)
            assert truth["utterance"] == utterance and truth["dom"]["tag"] == "BODY"
            wrong = next(n for n in _flat(truth["dom"]) if n["tag"] == "BUTTON" and n.get("text") not in utterance)
            await env.perform(Click(target="x", point=CssPoint(x=wrong["left"] + 3, y=wrong["top"] + 3)))
            reward = await env.reward()
            assert reward.done and reward.raw == -1.0 and not reward.success
        finally:
            await env.close()


def _flat(node: dict) -> list[dict]:
    return [node, *(m for c in node.get("children", []) for m in _flat(c))]


def test_task_selection_errors_are_clear():
    assert len(SUITES["oracle"]) >= 20
    assert resolve_tasks("click-button, login-user", None) == ["click-button", "login-user"]
    with pytest.raises(ConfigError, match="unknown MiniWoB task"):
        resolve_tasks("click-buton", None)
    with pytest.raises(ConfigError, match="unknown suite"):
        resolve_tasks(None, "everything")


def test_bench_command_prints_a_table_and_writes_json(tmp_path):
    out = tmp_path / "mw.json"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "miniwob",
            "--oracle",
            "--tasks",
            "focus-text",
            "--seeds",
            "2",
            "--concurrency",
            "2",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "focus-text" in result.output and "100%" in result.output
    report = json.loads(out.read_text())
    assert report["episodes"] == 2 and report["tasks"]["focus-text"]["successes"] == 2 and report["oracle"] is True
    assert {r["seed"] for r in report["runs"]} == {0, 1}


def test_bench_with_a_model_server_down_says_so_instead_of_zero_percent(tmp_path):
    import socket

    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = tmp_path / "mw.json"
    result = CliRunner().invoke(app, ["bench", "miniwob", "--tasks", "click-button", "--base-url", f"http://127.0.0.1:{port}/v1",
                                      "--model", "m", "--out", str(out)])
    assert result.exit_code == 3, result.output
    assert f"cannot reach the model server at http://127.0.0.1:{port}/v1" in result.output and "0%" not in result.output
    assert not out.exists()


@pytest.mark.parametrize("oracle_input", ["keyboard", "pointer"])
async def test_selects_and_date_pickers_by_keyboard_and_by_clicking_what_is_drawn(oracle_input: str, shared_browser):
    # pointer: the select's popup and the date field's calendar are opened and clicked where they are drawn
    tasks = ["choose-list", "enter-date", "choose-date"]
    report = await run_miniwob(
        AgentConfig(max_steps=20), tasks, seeds=2 if oracle_input == "pointer" else 1, concurrency=3, oracle=True,
        oracle_input=oracle_input, browser=shared_browser,
    )
    assert [r for r in report["runs"] if not r["success"]] == []
    steps = {(r["task"], r["seed"]): r["steps"] for r in report["runs"]}
    if oracle_input == "pointer":  # open, (scroll / page through months,) click the option or day, submit
        assert all(n >= 3 for (task, _), n in steps.items() if task != "choose-date")
    else:  # type (and Enter), submit
        assert steps[("choose-list", 0)] == 2 and steps[("enter-date", 0)] == 2
