"""Settle waiting in real Chromium: what an action starts is waited for,
bounded by the timeout, and the reason is recorded."""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from surfer.core.actions import Click, CssPoint, Goto
from surfer.tools.settle import SettleConfig

pytestmark = pytest.mark.serial  # settle times checked against the wall clock

HELD_PAGE = b"""<!doctype html><title>Held</title>
<button id="poll" style="position:absolute;left:20px;top:20px;width:150px;height:40px"
  onclick="fetch('held?again'); out.textContent = 'polling'">Poll</button>
<button id="stream" style="position:absolute;left:20px;top:80px;width:150px;height:40px" onclick="stream()">Stream</button>
<p id="out">idle</p>
<script>
fetch('held?first');  // a long poll, held open by the server
async function stream() {  // server-sent events read by fetch: the response never ends
  const reader = (await fetch('events')).body.getReader();
  for (let n = 1; !(await reader.read()).done; n++) out.textContent = 'event ' + n;
}
</script>"""


@pytest.fixture
def held_site() -> Iterator[tuple[str, threading.Event]]:
    """A page whose server holds a long poll open (until the test ends) and streams events."""
    done = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            kind = "text/event-stream" if self.path == "/events" else "application/json" if self.path.startswith("/held") else "text/html"
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.end_headers()
            if kind == "text/html":
                self.wfile.write(HELD_PAGE)
            elif kind == "application/json":
                done.wait(10)
                self.wfile.write(b"{}")
            else:
                while True:
                    self.wfile.write(b"data: tick\n\n")
                    self.wfile.flush()
                    if done.wait(0.1):
                        break

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", done
    done.set()
    server.shutdown()

LATE = CssPoint(x=95, y=40)
FETCH = CssPoint(x=95, y=100)
NAV = CssPoint(x=95, y=220)
TICK = CssPoint(x=275, y=40)
FADE = CssPoint(x=275, y=100)


async def test_waits_for_a_timer_the_action_started(browser_env, pages):
    env = await browser_env(pages.url("settle.html"))
    outcome = await env.perform(Click(target="late", point=LATE))
    assert await env.page.text_content("#out") == "late done"
    assert outcome.settle_reason.endswith("quiet")
    assert outcome.settle_seconds >= 0.35  # the 400 ms timer was waited for
    assert "for a moment" not in outcome.detail  # what it replaced ("idle") was not a toast
    # the wait outlasts a toast that lasts a moment (its timer is the action's): the model reads its text
    outcome = await env.perform(Click(target="copy", point=CssPoint(x=275, y=220)))
    assert not await env.page.evaluate("document.body.innerText.includes('Link copied')")
    assert '"Link copied" for a moment, gone before this screenshot' in outcome.detail


async def test_waits_for_the_first_tick_of_an_interval_the_action_started(browser_env, pages):
    env = await browser_env(pages.url("settle.html"))
    outcome = await env.perform(Click(target="tick", point=TICK))
    assert await env.page.text_content("#out") == "ticked"
    assert outcome.settle_reason.endswith("quiet") and outcome.settle_seconds >= 0.25


async def test_waits_for_a_transition_the_action_started_to_end(browser_env, pages):
    # a menu fading in over 0.4 s: a screenshot taken at once shows it (nearly) invisible
    env = await browser_env(pages.url("settle.html"))
    outcome = await env.perform(Click(target="fade", point=FADE))
    assert await env.page.evaluate("getComputedStyle(document.getElementById('menu')).opacity") == "1", outcome
    assert outcome.settle_reason.endswith("quiet")


async def test_waits_for_a_request_the_action_started(browser_env, pages):
    env = await browser_env(pages.url("settle.html"))

    async def slow(route):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.5)
        await route.fulfill(status=200, body="ok")

    await env.context.route("**/slow-endpoint", slow)
    outcome = await env.perform(Click(target="fetch", point=FETCH))
    assert await env.page.text_content("#out") == "fetched ok"
    assert "network-timeout" not in outcome.settle_reason


async def test_waits_for_a_navigation_the_action_started(browser_env, pages):
    env = await browser_env(pages.url("settle.html"))
    outcome = await env.perform(Click(target="nav", point=NAV))
    assert env.page.url.endswith("page2.html")
    assert await env.page.text_content("h1") == "Page two"
    assert outcome.settle_reason


async def test_what_never_stops_changing_costs_a_short_wait(browser_env, pages):
    # a page that ticks from the moment it loads (a progress bar on animation frames, a clock re-arming its
    # timer, a spinner): its load, and each action on it, settle without waiting for the timeout
    env = await browser_env(settle=SettleConfig(timeout=3.0, ticking=0.3))
    outcome = await env.perform(Goto(url=pages.url("ticking.html")))
    assert outcome.settle_reason.endswith("quiet") and outcome.settle_seconds < 1.5, outcome
    outcome = await env.perform(Click(target="late", point=LATE))  # renders 400 ms later: still waited for
    assert await env.page.text_content("#out") == "late done"
    assert outcome.settle_reason == "quiet" and 0.35 <= outcome.settle_seconds < 0.9, outcome
    outcome = await env.perform(Click(target="tick forever", point=CssPoint(x=95, y=100)))  # a ticker the action starts
    assert outcome.settle_reason == "quiet" and outcome.settle_seconds < 1.5, outcome
    # content streaming in (growing) is waited for, bounded by the timeout
    env.settle_config = SettleConfig(timeout=0.6, ticking=0.3)
    outcome = await env.perform(Click(target="stream forever", point=CssPoint(x=95, y=160)))
    assert outcome.settle_reason.endswith("timeout") and 0.5 <= outcome.settle_seconds < 1.5, outcome


async def test_what_the_page_was_already_doing_does_not_hold_the_settle(browser_env, pages):
    # a clock ticking every 20 ms and a status polled from the server, both running before the action
    env = await browser_env(pages.url("settle.html"), settle=SettleConfig(timeout=1.5, quiet=0.08))

    async def slow(route):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.1)
        await route.fulfill(status=200, body="{}")

    await env.context.route("**/status-endpoint*", slow)
    posted = asyncio.Event()

    async def post(route):  # type: ignore[no-untyped-def]
        if route.request.method != "POST":
            return await route.fallback()
        await asyncio.sleep(0.4)
        await route.fulfill(status=200, body="{}")
        posted.set()

    await env.context.route("**/status-endpoint*", post)  # (the last route added is asked first)
    await env.page.evaluate("""() => {
        const clock = document.body.appendChild(document.createElement('div'));
        const status = document.body.appendChild(document.createElement('div'));
        window.ticks = window.polls = 0;
        setInterval(() => { clock.textContent = String(++window.ticks); }, 20);
        const poll = async () => {
            await fetch('status-endpoint?n=' + window.polls++);
            status.textContent = 'polled ' + window.polls;
            setTimeout(poll, 10);
        };
        poll();
    }""")
    await env.page.wait_for_function("window.ticks >= 30")  # (changing on its own for over half a second)
    outcome = await env.perform(Click(target="late", point=LATE))  # renders 400 ms later: still waited for
    assert await env.page.text_content("#out") == "late done"
    assert outcome.settle_reason.endswith("quiet") and 0.35 <= outcome.settle_seconds < 1.0
    # the action's own request to the polled address, by another method (a form's POST): waited for
    await env.page.evaluate("""() => document.querySelector('#late').onclick = () => fetch('status-endpoint', {method: 'POST'})""")
    await env.perform(Click(target="late", point=LATE))
    assert posted.is_set()


async def test_an_action_that_changes_nothing_waits_only_briefly(browser_env, pages):
    env = await browser_env(pages.url("settle.html"))
    outcome = await env.perform(Click(target="nothing", point=CssPoint(x=600, y=500)))
    assert outcome.settle_reason == "quiet"
    assert outcome.settle_seconds < 0.5


async def test_a_held_open_request_or_an_event_stream_does_not_hold_the_settle(browser_env, held_site):
    url, _ = held_site
    env = await browser_env(settle=SettleConfig(timeout=0.4))
    env._tracker.POLL_WINDOW_MS = 300.0  # (a request in flight this long before the action is a long poll: 2 s by default)
    await env.perform(Goto(url=url))  # (its own long poll is in flight from the load on: the load's wait is not told)
    await env.page.wait_for_function("performance.now() > 400")
    env.settle_config = SettleConfig(timeout=1.5)
    outcome = await env.perform(Click(target="poll", point=CssPoint(x=95, y=40)))  # polls the held address again
    assert await env.page.text_content("#out") == "polling"
    assert outcome.settle_reason == "quiet" and outcome.settle_seconds < 1.0, outcome
    outcome = await env.perform(Click(target="stream", point=CssPoint(x=95, y=100)))  # a stream that never ends
    assert (await env.page.text_content("#out")).startswith("event")
    assert outcome.settle_reason == "quiet" and outcome.settle_seconds < 1.0, outcome
