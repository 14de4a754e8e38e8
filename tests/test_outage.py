"""A model server that goes away mid-run: the sessions hold and go on when it is back
(models/outage.py), within --server-wait; past it the batch stops with nothing recorded as
finished because of the outage, and a plain re-run completes it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from surfer.agent.config import AgentConfig, BrowserSettings
from surfer.agent.events import Waiting
from surfer.apps.demo.oracle import DemoOracle, frame_mapper
from surfer.core.deadline import run_deadline, time_left
from surfer.core.errors import ModelServerUnreachable
from surfer.fleet.batch import Batch, BatchTask
from surfer.fleet.batch.results import is_final
from surfer.fleet.browser_pool import SharedBrowser
from surfer.models.backend import Message, ModelRequest
from surfer.models.http import Endpoint, OpenAICompatibleBackend
from surfer.models.outage import outage_note, vouch, watch_of
from surfer.models.standin import StandInServer

VIEWPORT = (1024, 700)


def _port(server: StandInServer) -> int:
    return int(server.base_url.rsplit(":", 1)[1].split("/")[0])


def _request() -> ModelRequest:
    return ModelRequest(messages=(Message.text("user", "hi"),), schema_name="policy")


NOTES: list[str] = []  # what outage_note() said while a server was down


async def _restart_after(server: StandInServer, seconds: float) -> StandInServer:
    """Stop `server` now (its open connections reset) and start one like it on the same port after `seconds`."""
    server.stop()
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        note = outage_note()
        if note and note not in NOTES:
            NOTES.append(note)
        await asyncio.sleep(0.05)
    return StandInServer(server.respond, model=server.model, port=_port(server)).start()


async def test_a_call_holds_through_an_outage_and_the_run_is_not_charged_for_it():
    server = StandInServer(lambda r: {"x": 1}).start()
    backend = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model=server.model, server_wait=30))
    await backend.check()  # it answered once: a refusal from now on is an outage
    with run_deadline(asyncio.get_running_loop().time() + 1.5) as clock:
        restarting = asyncio.create_task(_restart_after(server, 2.5))
        await asyncio.sleep(0.05)
        started = time.monotonic()
        async with clock.limit():  # the run's limit (1.5 s) passes while held: it moves instead
            calling = asyncio.create_task(backend.complete(_request()))
            while outage_note() is None:
                assert not calling.done()
                await asyncio.sleep(0.02)
            # what `surfer run`'s status line shows meanwhile (rendered from its refresh thread too)
            shown = await asyncio.to_thread(Waiting(1, "policy").describe)
            assert shown.startswith(f"step 1: waiting for the model server at {server.base_url} since "), shown
            completion = await calling
        held = time.monotonic() - started
        assert completion.text == '{"x": 1}'
        assert held > 2.0, held
        assert clock.paused > 2.0 and time_left() > 0  # the held time went back to the run
    watch = watch_of(server.base_url)
    assert watch is not None and watch.outages == 1 and not watch.down
    (await restarting).stop()
    await backend.aclose()


async def test_a_process_the_driver_vouched_for_holds_before_its_first_answer():
    """A Ray worker (re)started during an outage has never seen the server answer; the driver has,
    so the worker's first call holds until the server is back instead of failing its task."""
    server = StandInServer(lambda r: {"x": 2}).start()
    port = _port(server)
    server.stop()  # down before this process ever reached it
    backend = OpenAICompatibleBackend(Endpoint(
        base_url=f"http://127.0.0.1:{port}/v1", model=server.model, server_wait=30, max_retries=0, connect_retries=0))
    with pytest.raises(ModelServerUnreachable):  # without the driver's word: a mistake to report at once
        await backend.complete(_request())
    vouch(f"http://127.0.0.1:{port}/v1")
    calling = asyncio.create_task(backend.complete(_request()))
    await asyncio.sleep(1.5)
    assert not calling.done() and outage_note() is not None  # held, not failed
    back = StandInServer(server.respond, model=server.model, port=port).start()
    assert (await asyncio.wait_for(calling, 20)).text == '{"x": 2}'
    back.stop()
    await backend.aclose()


async def test_past_server_wait_the_call_fails_clearly():
    server = StandInServer(lambda r: {"x": 1}).start()
    backend = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model=server.model, server_wait=1.5))
    await backend.check()
    server.stop()
    started = time.monotonic()
    with pytest.raises(ModelServerUnreachable, match=r"has not answered for 1.5 s \(Agent\(server_wait=\.\.\.\)\).*run the task again .*a new out_dir"):
        await backend.complete(_request())
    assert 1.2 < time.monotonic() - started < 10
    await backend.aclose()


async def test_a_server_that_keeps_failing_calls_while_it_lists_its_models_is_held_at_most_server_wait():
    server = StandInServer(lambda r: {"x": 1}).start()
    backend = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model=server.model, server_wait=2.5))
    await backend.check()
    server.fail_next(503, count=1000)  # /models answers, every chat call gets 503
    started = time.monotonic()
    with pytest.raises(ModelServerUnreachable, match="kept failing this call for 2.5 s|has not answered"):
        await backend.complete(_request())
    assert time.monotonic() - started < 15
    server.stop()
    await backend.aclose()


@pytest.fixture(scope="module")
async def centres(demo_site, measure):  # type: ignore[no-untyped-def]
    return await measure(demo_site.base_url, VIEWPORT)


def _tasks(site, n: int) -> list[BatchTask]:  # type: ignore[no-untyped-def]
    from surfer.apps.demo.oracle import DEMO_TASK

    return [BatchTask(id=f"t{i}", group=f"t{i}", task=DEMO_TASK, url=site.url("index.html")) for i in range(n)]


def _config(server: StandInServer, server_wait: float) -> AgentConfig:
    return AgentConfig(base_url=server.base_url, model=server.model, profile="holotron", max_steps=10,
                       server_wait=server_wait, browser=BrowserSettings(viewport=VIEWPORT))


async def _outage_after_records(batch: Batch, running: asyncio.Task, records: int, server: StandInServer,
                                down_for: float | None) -> StandInServer | None:
    """Once `records` tasks are recorded, stop the server; start it again after `down_for` s (None: not)."""
    while len(batch.index.read()) < records:
        assert not running.done(), "the batch ended before the outage"
        await asyncio.sleep(0.02)
    if down_for is None:
        server.stop()
        return None
    return await _restart_after(server, down_for)


def _final_by_id(out: Path) -> dict[str, list[dict]]:
    from surfer.fleet.batch import ResultsIndex

    final: dict[str, list[dict]] = {}
    for record in ResultsIndex(out / "results.jsonl").read():
        if is_final(record):
            final.setdefault(record["id"], []).append(record)
    return final


def in_shared_browser(batch: Batch, browser) -> Batch:  # type: ignore[no-untyped-def]
    """The batch's sessions in the test session's shared browser (a context each), not a Chromium and a Playwright
    driver launched for it (~1 s of CPU): these tests are of the model server's outages, not of the browser."""
    batch._browser = SharedBrowser.given(browser)
    return batch


async def test_a_batch_rides_out_a_server_restart(demo_site, centres, shared_browser, tmp_path):
    oracle = DemoOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0))
    server = StandInServer(oracle).start()
    batch = in_shared_browser(Batch(_config(server, 60), _tasks(demo_site, 6), tmp_path, concurrency=2), shared_browser)
    running = asyncio.create_task(batch.run())
    back = await _outage_after_records(batch, running, 2, server, down_for=3.0)
    summary = await running
    assert back is not None
    back.stop()
    records = batch.index.read()
    assert summary.stopped is None, summary
    assert [r["status"] for r in records] == ["success"] * 6, records  # no error line from the outage
    assert {ids: len(rs) for ids, rs in _final_by_id(tmp_path).items()} == {f"t{i}": 1 for i in range(6)}
    assert back.requests, "the sessions went on against the restarted server"
    watch = watch_of(server.base_url)
    assert watch is not None and watch.outages >= 1 and watch.held_seconds > 0  # calls were held, not failed
    assert any(n.startswith(f"waiting for the model server at {server.base_url} since ") for n in NOTES), NOTES
    assert outage_note() is None and batch.stats.metrics().get("server") is None  # said while down, not after


async def test_a_server_gone_past_server_wait_stops_the_batch_and_a_plain_rerun_completes_it(
        demo_site, centres, shared_browser, tmp_path):
    oracle = DemoOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0))
    server = StandInServer(oracle).start()
    port = _port(server)
    tasks = _tasks(demo_site, 5)
    batch = in_shared_browser(Batch(_config(server, 1.5), tasks, tmp_path, concurrency=2), shared_browser)
    running = asyncio.create_task(batch.run())
    await _outage_after_records(batch, running, 1, server, down_for=None)
    summary = await running
    assert summary.stopped_kind == "unreachable" and "Agent(server_wait=...)" in (summary.stopped or ""), summary
    lines = batch.index.read()  # every line of results.jsonl, not only the final ones
    assert 1 <= len(lines) < 5 and [r["status"] for r in lines] == ["success"] * len(lines), lines  # the outage finished nothing
    done = {r["id"]: [r] for r in lines}
    assert len(done) == len(lines)  # one line per task
    assert summary.statuses == {"success": len(lines)} and summary.stats["errors"] == 0
    held = summary.unfinished or {}
    assert held.get("unreachable", 0) >= 1 and sum(held.values()) <= 5 - len(lines), held  # counted apart, as attempts

    back = StandInServer(oracle, model=server.model, port=port).start()
    rerun = in_shared_browser(Batch(_config(back, 1.5), tasks, tmp_path, concurrency=2), shared_browser)
    assert {t.id for t in rerun.pending()} == {t.id for t in tasks} - set(done)
    summary = await rerun.run()
    back.stop()
    assert summary.stopped is None, summary
    final = _final_by_id(tmp_path)
    assert {i: [r["status"] for r in rs] for i, rs in final.items()} == {t.id: ["success"] for t in tasks}
    assert len(rerun.index.read()) == len(tasks)  # 5 lines for 5 tasks
    assert summary.statuses == {"success": len(tasks)} and not summary.unfinished


def test_stand_ins_and_sites_stop_as_soon_as_they_are_told(tmp_path):
    """A stand-in or a static site stopped (the end of every demo, bench and test that starts one) is gone
    within a twentieth of a second, not after the half second Python's server loop waits by default."""
    from surfer.apps.demo.static_site import StaticSite

    servers = [StandInServer(lambda request: {"x": 1}).start() for _ in range(10)]
    sites = [StaticSite(tmp_path).__enter__() for _ in range(10)]
    started = time.monotonic()
    for server in servers:
        server.stop()
    for site in sites:
        site.__exit__(None, None, None)
    assert time.monotonic() - started < 2.5  # twenty stops: ~0.5 s; at Python's default, ~5 s
