"""`surfer run` starts its browser at process start (surfer/apps/early_start.py,
surfer/tools/early_browser.py): the run takes that launch, and its page when
the options are the defaults; anything that does not fit is opened anew and
the rest closed. Real Chromium, real Playwright driver."""

from __future__ import annotations

import asyncio

import pytest

from surfer.apps.early_start import wants_early_browser
from surfer.tools.browser import BrowserEnvironment
from surfer.tools.chromium import spawn_driver
from surfer.tools.early_browser import EarlyBrowser


@pytest.mark.parametrize("args, wanted", [
    (["run", "task", "--url", "http://x"], True),
    (["run", "task", "--headful"], False),
    (["run", "task", "--env", "browser"], True),
    (["run", "task", "--env", "desktop"], None),
    (["run", "task", "--env=replay"], None),
    (["run", "task", "--replay", "runs/x"], None),
    (["run", "--help"], None),
    (["batch", "tasks.jsonl"], None),
    ([], None),
])
def test_only_a_browser_run_starts_a_browser_early(args, wanted) -> None:
    assert wants_early_browser(args) is wanted


async def test_a_run_takes_the_early_browser_and_page(pages) -> None:
    early = EarlyBrowser(headless=True, driver=spawn_driver())  # the driver spawned without Playwright, then connected
    env = BrowserEnvironment(early=early)
    try:
        await env.start(pages.url("actions.html"))
        _, browser = await early._launch
        context, page = await early._page
        assert env._browser is browser and env.page is page and env.context is context
        shot = (await env.observe()).screenshot
        assert (shot.size.width, shot.size.height) == (1280, 800)
        assert await env.page.evaluate("!!window.__surferSettle")  # the init scripts reached the taken page
    finally:
        await env.close()
    assert not browser.is_connected()  # the run owned it, and closed it


async def test_other_options_get_their_own_context_and_the_early_one_is_closed(pages) -> None:
    early = EarlyBrowser(headless=True)
    env = BrowserEnvironment(early=early, device_scale_factor=2.0)
    try:
        await env.start(pages.url("actions.html"))
        context, _ = await early._page
        assert env.context is not context
        for _ in range(100):  # closed in the background
            if context not in env._browser.contexts:
                break
            await asyncio.sleep(0.02)
        assert env._browser.contexts == [env.context]
        shot = (await env.observe()).screenshot
        assert (shot.size.width, shot.size.height) == (2560, 1600)  # scale factor 2 holds
    finally:
        await env.close()


async def test_a_launch_nobody_fits_is_closed(pages) -> None:
    early = EarlyBrowser(headless=True)
    assert early.take(headless=False) is None  # a headful run starts its own
    _, browser = await early._launch
    await early.discard()
    assert not browser.is_connected()


def test_a_whole_run_through_the_early_start(standin, pages, tmp_path) -> None:
    """A whole `surfer run` in a spawned process, through `python -m surfer` (early start on)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    server = standin(lambda r: {"thought": "Done.", "notes": "", "action": {"type": "answer", "text": "done"}}
                     if r.role == "policy" else {"verdict": "accept", "reasons": "ok"})
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-m", "surfer", "run", "What is here?", "--url", pages.url("actions.html"), "--base-url",
         server.base_url, "--model", server.model, "--out", str(tmp_path / "run"), "--json"],
        env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=60, cwd=root,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["answer"] == "done"
