"""`surfer view`: the live page over a batch's output directory, driven in a
real Chromium while a batch with a slow stand-in model runs; the server's
file and token checks over real HTTP."""

from __future__ import annotations

import asyncio
import http.client
import json
import shutil

import pytest

from surfer.agent.config import AgentConfig, BrowserSettings
from surfer.fleet.batch import Batch, BatchTask
from surfer.fleet.browser_pool import SharedBrowser
from surfer.apps.demo.oracle import DEMO_TASK, DemoOracle, frame_mapper
from surfer.apps.view.server import ViewServer
from surfer.core.errors import ConfigError

VIEWPORT = (1024, 700)


@pytest.fixture(scope="module")
async def centres(demo_site, measure):  # type: ignore[no-untyped-def]
    return await measure(demo_site.base_url, VIEWPORT)


@pytest.fixture(scope="module")
async def user_browser():  # type: ignore[no-untyped-def]
    """The full Chromium a person opens the view and the reports in (the headless shell the
    sessions use asks for no icon, so it cannot see what a person's browser logs)."""
    from playwright.async_api import async_playwright

    from surfer.tools.chromium import find_chromium, launch_args

    executable = find_chromium(headless=False)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, headless=True, args=launch_args(executable))
        yield browser
        await browser.close()


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    """A raw GET (the path goes out exactly as written: no client-side normalising)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        conn.close()


async def test_view_page_follows_a_running_batch(demo_site, standin, centres, user_browser, shared_browser, tmp_path):
    server = standin(DemoOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0)), delay=0.35)
    config = AgentConfig(base_url=server.base_url, model=server.model, profile="holotron", max_steps=10,
                         browser=BrowserSettings(viewport=VIEWPORT))
    # one round of sessions: each is seen running, then finished (more rounds would only repeat that)
    tasks = [BatchTask(id=f"task-{i}", group=f"task-{i}", task=DEMO_TASK, url=demo_site.url("index.html")) for i in range(3)]
    batch = Batch(config, tasks, tmp_path, concurrency=3)
    batch._browser = SharedBrowser.given(shared_browser)  # its sessions in the session's shared browser, not a Chromium and a driver of its own
    view = await ViewServer(tmp_path, port=0).start()
    context = await user_browser.new_context()
    page = await context.new_page()
    problems: list[str] = []
    # every page of the context (the reports opened from the view too) keeps an empty console
    context.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    running = asyncio.create_task(batch.run())
    try:
        await page.goto(view.url)
        # running sessions show their latest screen, loaded
        await page.wait_for_function(
            """() => [...document.querySelectorAll('[data-status=running] img')]
                     .some(img => img.complete && img.naturalWidth > 0)""", timeout=30_000)
        card = page.locator("[data-status=running]").first
        watched = await card.get_attribute("data-task-id")
        assert watched and watched.startswith("task-")
        # the same task turns from running into a finished row without a reload
        await page.wait_for_selector(f'tr[data-task-id="{watched}"][data-status=success]', timeout=60_000)
        await page.wait_for_function(
            "() => document.querySelector('[data-summary]').textContent.includes('3/3')", timeout=60_000)
        await running
        assert await page.locator("tr[data-status=success]").count() == 3
        assert await page.locator("[data-status=running]").count() == 0
        # a report opens from its link, served by the same server
        async with context.expect_page() as opened:
            await page.locator(f'tr[data-task-id="{watched}"] a').click()
        report = await opened.value
        await report.wait_for_load_state()
        assert DEMO_TASK[:30] in await report.locator("body").inner_text()
        assert problems == []
    finally:
        if not running.done():
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
        await context.close()
        await view.stop()


async def test_view_serves_only_files_inside_out(tmp_path):
    out = tmp_path / "out"
    (out / "runs" / "a").mkdir(parents=True)
    (out / "runs" / "a" / "report.html").write_text("<p>report a</p>")
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the page")
    (out / "runs" / "leak.txt").symlink_to(secret)
    (out / "runs" / "outside").symlink_to(tmp_path, target_is_directory=True)
    view = await ViewServer(out, port=0).start()
    try:
        status, body, _ = await asyncio.to_thread(get, view.port, "/files/runs/a/report.html")
        assert status == 200 and b"report a" in body
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{view.port}: the port is in use .*give another --port"):
            await ViewServer(out, port=view.port).start()  # its port is taken: one line, not uvicorn's exit
        attempts = [
            "/files/../secret.txt", "/files/runs/../../secret.txt", "/files/%2e%2e/secret.txt",
            "/files/runs/%2E%2E%2F%2E%2E%2Fsecret.txt", "/files/..%2fsecret.txt", "/files/%252e%252e/secret.txt",
            f"/files/{secret}", f"/files/%2F{str(secret)[1:]}", "/files/runs/leak.txt", "/files/runs/outside/secret.txt",
            "/files/runs", "/files/",
        ]
        for path in attempts:
            status, body, _ = await asyncio.to_thread(get, view.port, path)
            assert b"not for the page" not in body, path
            assert status in (400, 404), (path, status)
    finally:
        await view.stop()


async def test_view_off_loopback_needs_the_token(tmp_path):
    (tmp_path / "results.jsonl").write_text(json.dumps({"id": "a", "status": "success", "run_dir": "runs/a"}) + "\n")
    view = await ViewServer(tmp_path, host="0.0.0.0", port=0).start()
    try:
        assert view.token and f"?token={view.token}" in view.url
        for path in ("/", "/api/state", "/files/results.jsonl"):
            status, _, _ = await asyncio.to_thread(get, view.port, path)
            assert status in (401, 403), path
            status, _, _ = await asyncio.to_thread(get, view.port, path + "?token=wrong")
            assert status in (401, 403), path
        status, page, headers = await asyncio.to_thread(get, view.port, f"/?token={view.token}")
        assert status == 200 and b"data-summary" in page
        cookie = headers["set-cookie"].split(";")[0]
        status, body, _ = await asyncio.to_thread(get, view.port, "/api/state", {"Cookie": cookie})
        assert status == 200 and json.loads(body)["totals"]["done"] == 1
        status, _, _ = await asyncio.to_thread(get, view.port, "/api/state", {"Authorization": f"Bearer {view.token}"})
        assert status == 200
    finally:
        await view.stop()
    local = await ViewServer(tmp_path, port=0).start()  # loopback: no token
    try:
        assert local.token is None
        status, _, _ = await asyncio.to_thread(get, local.port, "/api/state")
        assert status == 200
    finally:
        await local.stop()


async def test_view_over_a_runs_folder_shows_run_text_as_text(shared_browser, tmp_path):
    from PIL import Image

    attack = "<img src=x onerror=\"document.title='owned'\"><b id=injected>bold</b>"
    finished, running, stopped = tmp_path / "20260101-a", tmp_path / "20260101-b", tmp_path / "20260101-c"
    for run_dir in (finished, running, stopped):
        (run_dir / "screenshots").mkdir(parents=True)
        (run_dir / "run.json").write_text(json.dumps({"task": f"task {attack}", "url": "https://example.com"}))
    (finished / "result.json").write_text(json.dumps(
        {"status": "success", "task": attack, "answer": attack, "steps": 2, "timings": {"seconds": 3.5},
         "artifacts": {"trace": "trace.zip", "video": "video.webp"}}))
    (finished / "report.html").write_text("<p>the report</p>")
    (stopped / "result.json").write_text(json.dumps(
        {"status": "interrupted", "task": "stopped", "reason": "interrupted: stopped by SIGTERM", "steps": 1}))
    (finished / "trace.zip").write_bytes(b"PK")
    Image.new("RGB", (640, 400), (200, 220, 240)).save(running / "screenshots" / "step-001.jpg")
    (running / "trajectory.jsonl").write_text(json.dumps(
        {"index": 1, "thought": attack, "action": {"type": "click", "target": "the 'Weiter' button", "button": "left"}}) + "\n")
    view = await ViewServer(tmp_path, port=0).start()
    context = await shared_browser.new_context()
    page = await context.new_page()
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    try:
        await page.goto(view.url)
        await page.wait_for_function("() => document.body.dataset.loaded === '1'")
        assert "2/3" in await page.locator("[data-summary]").inner_text()  # a stopped run has ended: it is not running
        assert await page.locator('tr[data-task-id="20260101-c"][data-status=interrupted]').count() == 1
        row = page.locator('tr[data-task-id="20260101-a"][data-status=success]')
        assert attack in await row.inner_text()
        # the run's trace and video are linked beside its report
        hrefs = await row.locator("a.artifact").evaluate_all("links => links.map(a => a.textContent + '=' + a.getAttribute('href'))")
        assert [h.split("=")[0] for h in hrefs] == ["trace", "video"] and hrefs[0].endswith("20260101-a/trace.zip"), hrefs
        card = page.locator('[data-task-id="20260101-b"][data-status=running]')
        assert attack in await card.inner_text()
        assert "click(target=\"the 'Weiter' button\")" in await card.inner_text()  # its last action, as a batch's card shows it
        await page.wait_for_function(
            "() => document.querySelector('[data-status=running] img').naturalWidth > 0")
        assert await page.locator("#injected").count() == 0 and await page.title() == "surfer view"
        await page.locator('[data-filter=failure]').click()
        assert await row.is_hidden()
        assert problems == []
        # the folder deleted while viewed: the page says so (each poll was an HTTP 500, and a traceback in the terminal)
        shutil.rmtree(tmp_path)
        await page.evaluate("poll()")  # (now, not at the next second's poll)
        await page.wait_for_function("() => document.getElementById('stale').textContent.includes('is gone')")
        assert f"(not updating: {tmp_path.name} is gone (deleted or moved))" == await page.locator("#stale").inner_text()
    finally:
        tmp_path.mkdir(exist_ok=True)
        await context.close()
        await view.stop()


def test_a_runs_folder_shows_the_tasks_of_a_terminal_session_and_a_qa_output_is_named(tmp_path):
    from surfer.apps.view.state import OutDir
    from surfer.core.errors import ConfigError

    session = tmp_path / "runs" / "20260101-120000-ab12-open-my-account"  # `surfer run` at a terminal
    (session / "session.json").parent.mkdir(parents=True)
    (session / "session.json").write_text("{}")
    for name, answer in (("01-open-my-account", "AB-7741"), ("02-which-name", "Alice")):
        (session / name).mkdir()
        (session / name / "run.json").write_text(json.dumps({"task": name}))
        (session / name / "result.json").write_text(json.dumps({"status": "success", "answer": answer, "steps": 1}))
    finished = OutDir(tmp_path / "runs").snapshot()["finished"]
    assert [(row["id"], row["answer"]) for row in finished] == [
        (f"{session.name}/01-open-my-account", "AB-7741"), (f"{session.name}/02-which-name", "Alice")]
    assert finished[0]["report"] == f"{session.name}/01-open-my-account/report.html"
    qa = tmp_path / "qa-out"
    (qa / "cases").mkdir(parents=True)
    (qa / "junit.xml").write_text("<testsuites/>")
    (qa / "results.jsonl").write_text(json.dumps({"id": "s/c", "suite": "s", "case": "c", "status": "passed"}) + "\n")
    with pytest.raises(ConfigError, match="is the output of `surfer qa`: open its index.html"):
        OutDir(qa)


def test_a_stopped_batch_shows_as_stopped_with_its_elapsed_time_at_the_stop(tmp_path):
    """A batch stopped before its tasks were done (Ctrl-C, a killed process) writes no more metrics: its elapsed
    time stays where it stopped (it grew for as long as the page was open) and it shows as stopped."""
    import time

    from surfer.apps.view.state import OutDir

    now = time.time()
    tasks = [{"id": i, "task": "t", "url": "https://example.com"} for i in ("a", "b")]
    (tmp_path / "batch.json").write_text(json.dumps({"started_at": now - 100, "pid": 1, "tasks": tasks}))
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"t": now - 60, "elapsed": 40, "steps": 3, "done": 0}) + "\n")
    (tmp_path / "live").mkdir()  # a killed batch (SIGKILL) leaves its sessions' live files: they are not running
    (tmp_path / "live" / "a.json").write_text(json.dumps({"id": "a", "task": "t", "status": "running", "step": 2}))
    snapshot = OutDir(tmp_path).snapshot()
    totals = snapshot["totals"]
    assert totals["stopped"] is True and totals["eta"] is None and round(totals["elapsed"]) == 40, totals
    assert totals["running"] == 0 and snapshot["running"] == [] and snapshot["queued_count"] == 2, snapshot
    with (tmp_path / "metrics.jsonl").open("a") as handle:  # still writing: running, its time going on
        handle.write(json.dumps({"t": time.time(), "elapsed": 100, "steps": 5, "done": 0}) + "\n")
    snapshot = OutDir(tmp_path).snapshot()
    totals = snapshot["totals"]
    assert totals["stopped"] is False and totals["elapsed"] >= 100, totals
    assert totals["running"] == 1 and [s["id"] for s in snapshot["running"]] == ["a"]


def test_a_resumed_batch_estimates_what_is_left_from_this_runs_pace(tmp_path):
    """Resumed: 2 tasks finished by the earlier run took none of this run's 10 s, which finished 1: the last task
    needs about 10 s more (it said 3 s, as if this run had finished 3 in 10 s)."""
    import time

    from surfer.apps.view.state import OutDir

    now = time.time()
    tasks = [{"id": i, "task": "t", "url": "https://example.com"} for i in "abcd"]
    (tmp_path / "batch.json").write_text(json.dumps({"started_at": now - 10, "pid": 1, "tasks": tasks}))
    (tmp_path / "results.jsonl").write_text("".join(json.dumps({"id": i, "task": "t", "url": "https://example.com",
                                                                "status": "success", "steps": 1}) + "\n" for i in "abc"))
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"t": now, "elapsed": 10, "steps": 1, "done": 1, "skipped": 2}) + "\n")
    totals = OutDir(tmp_path).snapshot()["totals"]
    assert totals["done"] == 3 and totals["stopped"] is False and round(totals["eta"]) == 10, totals


async def test_session_watch_writes_in_order_off_the_agents_path(tmp_path, monkeypatch):
    """Events return before their files are written; the files follow the events
    in order, and remove() waits for every pending write before deleting."""
    import io
    import threading
    from types import SimpleNamespace

    from PIL import Image

    from surfer.agent.events import ModelAsked, Observed
    from surfer.apps import sessions

    shot = io.BytesIO()
    Image.new("RGB", (640, 400), (10, 120, 200)).save(shot, "PNG")
    gate = threading.Event()
    written: list[int] = []
    real = sessions.SessionWatch._write_files

    def slow_write(self, text, image):  # type: ignore[no-untyped-def]
        gate.wait(10)  # a disk that stalls until the test lets it go
        written.append(json.loads(text)["step"])
        real(self, text, image)

    monkeypatch.setattr(sessions.SessionWatch, "_write_files", slow_write)
    task = SimpleNamespace(id="t1", task="look", url="http://127.0.0.1/")
    watch = sessions.SessionWatch(tmp_path / "live", "t1", task)
    for step in (1, 2, 3):
        await asyncio.wait_for(watch(Observed(step, "http://127.0.0.1/", shot.getvalue(), "png")), 1)
        await asyncio.wait_for(watch(ModelAsked(step, "policy")), 1)
    assert written == []  # nothing on disk yet, and the agent was not held up
    gate.set()
    await watch.flush()
    assert written == [1, 1, 2, 2, 3, 3]
    state = json.loads(watch.state_path.read_text())
    assert state["step"] == 3 and state["asking"] == "policy" and state["thumb_version"] == 3
    with Image.open(watch.thumb_path) as thumb:
        assert thumb.width == sessions.THUMB_WIDTH
    gate.clear()
    await watch(ModelAsked(4, "localizer"))
    removing = asyncio.create_task(watch.remove())
    await asyncio.sleep(0.2)
    assert not removing.done()  # waits for the pending write
    gate.set()
    await asyncio.wait_for(removing, 5)
    assert not watch.state_path.exists() and len(written) == 7  # the last write landed, then the file went


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
@pytest.mark.parametrize("size", [(1280, 800), (1024, 768), (300, 200)])
def test_a_thumbnail_is_a_jpeg_at_most_320_px_wide_of_the_screen(size, fmt):
    """A screenshot (JPEG, decoded at a fraction of its size where it is wide enough; PNG) becomes a
    JPEG as wide as the live view's card, showing what was on the screen."""
    import io

    from PIL import Image, ImageDraw

    from surfer.apps import sessions

    screen = Image.new("RGB", size, (10, 120, 200))
    ImageDraw.Draw(screen).rectangle((0, 0, size[0] // 2, size[1]), fill=(220, 30, 30))
    shot = io.BytesIO()
    screen.save(shot, fmt)
    with Image.open(io.BytesIO(sessions.thumbnail(shot.getvalue()))) as thumb:
        width = min(size[0], sessions.THUMB_WIDTH)
        assert thumb.format == "JPEG" and thumb.size == (width, round(size[1] * width / size[0]))
        left, right = thumb.getpixel((width // 4, thumb.height // 2)), thumb.getpixel((3 * width // 4, thumb.height // 2))
    assert all(abs(a - b) < 24 for a, b in zip(left, (220, 30, 30))), left
    assert all(abs(a - b) < 24 for a, b in zip(right, (10, 120, 200))), right


async def test_flush_returns_when_a_finished_write_is_still_listed(tmp_path):
    """A write can have finished while its own "discard me" callback has not run yet (it runs on a later turn of
    the loop); flush() must still return. On Python >= 3.12 gathering finished tasks does not yield to the loop,
    so a flush that waited for the set to empty itself spun at 100 % CPU with the loop held (seen on a GPU bench)."""
    from types import SimpleNamespace

    from surfer.apps import sessions

    async def written() -> None:
        return None

    watch = sessions.SessionWatch(tmp_path / "live", "t1", SimpleNamespace(id="t1", task="look", url="http://127.0.0.1/"))
    finished = asyncio.ensure_future(written())
    await finished
    watch._pending.add(finished)  # finished, and nothing left that would take it off the set
    await asyncio.wait_for(watch.flush(), 5)
    assert not watch._pending
    await asyncio.wait_for(watch.remove(), 5)
    assert not watch.state_path.exists()


async def test_pages_surfer_writes_keep_the_console_empty_on_any_server(user_browser, tmp_path):
    """A run's report.html and the QA summary, opened from a plain static server (one
    that answers /favicon.ico with 404, as most do): each declares its icon, so the
    browser asks for nothing the server lacks and its console stays empty."""
    import functools
    import http.server
    import threading

    from surfer.agent.report import render_report
    from surfer.qa.outcomes import QaSummary
    from surfer.qa.reports import summary_html

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "result.json").write_text(json.dumps({"status": "success", "task": "t", "answer": "42", "steps": 0}))
    (run_dir / "report.html").write_text(render_report(run_dir))
    (tmp_path / "index.html").write_text(summary_html(QaSummary(tmp_path, [], 1.0), tmp_path / "index.html"))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    context = await user_browser.new_context()
    problems: list[str] = []
    context.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    try:
        for path in ("run/report.html", "index.html"):
            page = await context.new_page()
            await page.goto(f"http://127.0.0.1:{server.server_address[1]}/{path}", wait_until="load")
            await page.wait_for_timeout(300)  # the icon request, if any, goes out after load
            assert await page.title()
        assert problems == []
    finally:
        await context.close()
        server.shutdown()
