"""The docs' pictures, made by the build itself: a batch of the bundled demo
task (the demo site and its oracle model, surfer/apps/demo/) runs in real
Chromium while `surfer view` follows it; the view is captured mid-batch, then
one finished run's report.html. Nothing here is committed: the PNGs go into
the built site (surfer_docs.py adds them as generated files).

    python docs/hooks/screenshots.py OUT_DIR     # the same pictures, written to OUT_DIR
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

VIEWPORT = (1024, 700)  # the agents' browser
PAGE = {"width": 1200, "height": 900}  # the reader's browser
TASKS = 8
CONCURRENCY = 4
PICTURES = ("view.png", "report.png")


async def _pictures() -> dict[str, bytes]:
    from playwright.async_api import async_playwright

    from surfer.agent.config import AgentConfig, BrowserSettings
    from surfer.apps.demo.oracle import DEMO_SITE, DEMO_TASK, DemoOracle, frame_mapper, measure_targets
    from surfer.apps.demo.static_site import StaticSite
    from surfer.apps.view.server import ViewServer
    from surfer.fleet.batch import Batch, BatchTask
    from surfer.models.standin import StandInServer
    from surfer.tools.browser import launch_chromium

    pictures: dict[str, bytes] = {}
    with StaticSite(DEMO_SITE) as site, tempfile.TemporaryDirectory() as parent:
        tmp = Path(parent) / "demo-batch"  # the batch's name on the page
        centres = await measure_targets(site.base_url, VIEWPORT)
        oracle = DemoOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0))
        with StandInServer(oracle, delay=0.25) as server:
            config = AgentConfig(base_url=server.base_url, model=server.model, profile="holotron", max_steps=8,
                                 browser=BrowserSettings(viewport=VIEWPORT))
            tasks = [BatchTask(id=f"register-{i:02d}", task=DEMO_TASK, url=site.url("index.html")) for i in range(TASKS)]
            tasks[2] = tasks[2].model_copy(update={"max_steps": 2})  # stops at the step limit
            tasks[5] = tasks[5].model_copy(update={"url": site.url("missing.html"), "max_steps": 1})  # a page that fails
            batch = Batch(config, tasks, Path(tmp), concurrency=CONCURRENCY)
            view = await ViewServer(tmp, port=0).start()
            running = asyncio.create_task(batch.run())
            try:
                async with async_playwright() as playwright:
                    browser = await launch_chromium(playwright)
                    page = await browser.new_page(viewport=PAGE)
                    await page.goto(view.url)
                    deadline = time.monotonic() + 60
                    while batch.stats.done < 2 and not running.done() and time.monotonic() < deadline:
                        await asyncio.sleep(0.1)
                    await page.wait_for_function(
                        "() => [...document.querySelectorAll('[data-status=running] img')]"
                        ".filter(i => i.naturalWidth > 0).length >= 2", timeout=30_000)
                    await asyncio.sleep(1.2)  # one refresh of the charts
                    pictures["view.png"] = await page.screenshot(full_page=True)
                    await running
                    reports = sorted(Path(tmp, "runs").glob("register-0[0-1]*/report.html"))
                    if not reports:
                        raise RuntimeError(f"the demo batch wrote no report: {sorted(Path(tmp).rglob('*'))[:20]}")
                    await page.set_viewport_size({"width": 1280, "height": 900})
                    await page.goto(reports[0].as_uri())
                    pictures["report.png"] = await page.screenshot()
                    await browser.close()
            finally:
                if not running.done():
                    running.cancel()
                await view.stop()
    return pictures


def make_pictures() -> dict[str, bytes]:
    """PNG bytes by file name; raises when any picture cannot be made."""
    pictures = asyncio.run(_pictures())
    missing = [name for name in PICTURES if not pictures.get(name, b"").startswith(b"\x89PNG")]
    if missing:
        raise RuntimeError(f"the docs' screenshots were not made: {missing}")
    return pictures


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "site-pictures")
    out.mkdir(parents=True, exist_ok=True)
    for name, data in make_pictures().items():
        (out / name).write_bytes(data)
        print(f"wrote {out / name}")
