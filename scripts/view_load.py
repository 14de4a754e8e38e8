"""Load figures for `surfer view` (printed, and written as JSON; not a test):

- CPU of the view server process while 64 sessions each update once a second
  (state file + thumbnail, as a batch writes them) and a page follows them;
- the page's load time (navigation until the first state is drawn) with
  1,000 finished tasks.

    python scripts/view_load.py [--sessions 64] [--finished 1000] [--seconds 20] [--out .bench/view.json]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from PIL import Image

from surfer.fleet.sessions import LIVE, thumbnail, write_atomic


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_out(root: Path, sessions: int, finished: int) -> None:
    tasks = [{"id": f"task-{i:05d}", "task": f"Task number {i}", "url": "https://example.com"} for i in range(finished + sessions)]
    (root / "batch.json").write_text(json.dumps({"started_at": time.time() - 3600, "pid": 0, "tasks": tasks}))
    with (root / "results.jsonl").open("w") as handle:
        for i in range(finished):
            status = ("success", "failed", "error", "limit")[i % 4 if i % 5 == 0 else 0]
            handle.write(json.dumps({
                "id": f"task-{i:05d}", "task": f"Task number {i}", "status": status, "answer": f"answer {i}",
                "reason": None if status == "success" else f"reason {i % 7}", "steps": 7, "seconds": 12.5,
                "run_dir": f"runs/task-{i:05d}", "finished_at": "2026-01-01T00:00:00+00:00", "browser_crashes": 0,
            }) + "\n")
    with (root / "metrics.jsonl").open("w") as handle:
        for k in range(600):
            handle.write(json.dumps({"t": time.time(), "elapsed": 2.0 * k, "steps": 20 * k, "done": k, "succeeded": k,
                                     "latency": {"policy": {"p50": 1.0, "p95": 2.0}}}) + "\n")
    (root / LIVE).mkdir()


def writer(root: Path, sessions: int, stop: threading.Event) -> None:
    """Each session: one state file and one thumbnail a second, spread over the second."""
    frames = []
    for shade in range(8):
        image = Image.new("RGB", (1280, 800), (255 - 20 * shade, 240, 230))
        data = io.BytesIO()
        image.save(data, "JPEG")
        frames.append(thumbnail(data.getvalue()))
    version = 0
    while not stop.is_set():
        version += 1
        started = time.monotonic()
        for i in range(sessions):
            name = f"task-{100000 + i}"
            write_atomic(root / LIVE / f"{name}.jpg", frames[(version + i) % len(frames)])
            state = {"id": name, "task": f"Running task {i}", "status": "running", "step": version, "action": "click(...)",
                     "thought": "Looking at the page.", "asking": "policy", "asking_since": time.time(),
                     "thumb": f"{LIVE}/{name}.jpg", "thumb_version": version, "updated_at": time.time(), "attempt": 1}
            write_atomic(root / LIVE / f"{name}.json", json.dumps(state).encode())
            time.sleep(max(0.0, started + (i + 1) / sessions - time.monotonic()))


async def measure(args: argparse.Namespace) -> dict:
    from playwright.async_api import async_playwright

    from surfer.tools.browser import launch_chromium

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_out(root, args.sessions, args.finished)
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "surfer", "view", str(root), "--port", str(port)],
                                  stderr=subprocess.PIPE, env={**os.environ})
        try:
            for _ in range(200):
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            url = f"http://127.0.0.1:{port}/"
            async with async_playwright() as playwright:
                browser = await launch_chromium(playwright)
                loads = []
                for _ in range(5):  # page load with the finished tasks (no sessions running yet)
                    page = await browser.new_page()
                    started = time.perf_counter()
                    await page.goto(url)
                    await page.wait_for_function("() => document.body.dataset.loaded === '1'")
                    loads.append(time.perf_counter() - started)
                    rows = await page.locator("tr[data-task-id]").count()
                    await page.close()
                stop = threading.Event()
                thread = threading.Thread(target=writer, args=(root, args.sessions, stop), daemon=True)
                thread.start()
                page = await browser.new_page()
                await page.goto(url)
                await asyncio.sleep(3)  # warm up
                process = psutil.Process(server.pid)
                before, t0 = process.cpu_times(), time.monotonic()
                await asyncio.sleep(args.seconds)
                after, t1 = process.cpu_times(), time.monotonic()
                cards = await page.locator("[data-status=running]").count()
                loaded = await page.evaluate("() => [...document.querySelectorAll('[data-status=running] img')].filter(i => i.naturalWidth > 0).length")
                stop.set()
                thread.join()
                await browser.close()
        finally:
            server.terminate()
            server.wait()
    cpu = (after.user + after.system - before.user - before.system) / (t1 - t0)
    return {
        "benchmark": "view", "sessions": args.sessions, "finished": args.finished, "seconds": args.seconds,
        "server_cpu_share_of_a_core": round(cpu, 4), "page_load_s_median": round(statistics.median(loads), 3),
        "page_load_s": [round(x, 3) for x in loads], "rows_shown": rows, "running_cards": cards, "thumbnails_loaded": loaded,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--finished", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--out", type=Path, default=Path(".bench/view.json"))
    args = parser.parse_args()
    report = asyncio.run(measure(args))
    print(f"view server CPU with {report['sessions']} sessions updating once a second: "
          f"{100 * report['server_cpu_share_of_a_core']:.1f}% of a core; page load with {report['finished']} finished tasks: "
          f"{report['page_load_s_median']:.2f} s (median of 5); {report['running_cards']} cards, "
          f"{report['thumbnails_loaded']} thumbnails shown, {report['rows_shown']} rows")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
