"""Make docs/view.png, the README's picture of `surfer view`: a batch on the
demo site with a slow stand-in model (two tasks that fail, one that the
validator rejects), the page opened in headless Chromium mid-batch.

    python scripts/view_screenshot.py [docs/view.png]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from surfer.agent.config import AgentConfig, BrowserSettings
from surfer.fleet.batch import Batch, BatchTask
from surfer.apps.demo.oracle import DEMO_SITE, DEMO_TASK, DemoOracle, frame_mapper, measure_targets
from surfer.apps.demo.static_site import StaticSite
from surfer.apps.view.server import ViewServer
from surfer.models.standin import StandInServer

VIEWPORT = (1024, 700)


async def main(target: Path) -> None:
    from playwright.async_api import async_playwright

    from surfer.tools.browser import launch_chromium

    with StaticSite(DEMO_SITE) as site, tempfile.TemporaryDirectory() as tmp:
        centres = await measure_targets(site.base_url, VIEWPORT)
        oracle = DemoOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0))
        with StandInServer(oracle, delay=0.4) as server:
            config = AgentConfig(base_url=server.base_url, model=server.model, profile="holotron", max_steps=8,
                                 browser=BrowserSettings(viewport=VIEWPORT))
            tasks = [BatchTask(id=f"register-{i:02d}", task=DEMO_TASK, url=site.url("index.html")) for i in range(14)]
            tasks[3] = tasks[3].model_copy(update={"max_steps": 2})  # stops at the step limit
            tasks[6] = tasks[6].model_copy(update={"url": site.url("missing.html"), "max_steps": 1})
            batch = Batch(config, tasks, Path(tmp), concurrency=6)
            view = await ViewServer(tmp, port=0).start()
            running = asyncio.create_task(batch.run())
            async with async_playwright() as playwright:
                browser = await launch_chromium(playwright)
                page = await browser.new_page(viewport={"width": 1400, "height": 1000})
                await page.goto(view.url)
                while batch.stats.done < 7:
                    await asyncio.sleep(0.1)
                await page.wait_for_function(
                    "() => [...document.querySelectorAll('[data-status=running] img')].filter(i => i.naturalWidth > 0).length >= 4",
                    timeout=30_000)
                await asyncio.sleep(1.2)
                target.parent.mkdir(parents=True, exist_ok=True)
                await page.screenshot(path=str(target), full_page=True)
                await browser.close()
            await running
            await view.stop()
    print(f"wrote {target}")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/view.png")))
