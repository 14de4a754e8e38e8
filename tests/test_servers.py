"""Several model servers, one batch: sessions placed by room (sessions and the
waiting requests /metrics reports, by weight), every request of a session —
policy, localizer, validator — at one server (the stand-ins record each
request's X-Surfer-Session header), a server killed mid-batch (its sessions
held, then moved past --server-wait, nothing lost or recorded twice), server
lists in config and on the command line, bad URLs. Replay environment: a
browser adds nothing here (placement happens before any page)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter, defaultdict

import pytest
from inprocess import surfer
from typer.testing import CliRunner

from surfer.agent.config import AgentConfig, load_config
from surfer.apps.cli import app
from surfer.apps.options import DEMO_RECORDINGS
from surfer.core.errors import ConfigError
from surfer.fleet.batch import Batch, BatchTask
from surfer.fleet.batch.results import ResultLine
from surfer.models.endpoint import Endpoint
from surfer.models.servers import ServerPool, ServerSpec
from surfer.models.standin import StandInServer
from surfer.tools.replay import load_recordings

ANSWER_AT = 3  # the policy answers at its third call of a session: policy, localizer and validator all ask


class Answerer:
    """One model behind every stand-in: clicks, then answers at the session's `answer_at`-th policy call (the
    validator accepts). Counts policy calls per session (the X-Surfer-Session header), so a session that moved on
    goes on where it was. With `together`, each session's first request is answered once that many sessions have
    asked (they are all live at once)."""

    def __init__(self, answer_at: int = ANSWER_AT, together: int = 1) -> None:
        self.lock = threading.Lock()
        self.policy_calls: Counter[str] = Counter()
        self.answer_at = answer_at
        self.together = together
        self.all_asked = threading.Event()

    def __call__(self, request):  # type: ignore[no-untyped-def]
        if request.role == "localizer":
            return {"x": 500, "y": 500}
        if request.role == "validator":
            return {"verdict": "accept", "reasons": "It is there."}
        with self.lock:
            self.policy_calls[request.session or ""] += 1
            calls = self.policy_calls[request.session or ""]
            if len(self.policy_calls) >= self.together:
                self.all_asked.set()
        if calls == 1 and self.together > 1:
            assert self.all_asked.wait(20), "the sessions did not all start"
        if calls >= self.answer_at:
            return {"thought": "done", "notes": "", "action": {"type": "answer", "text": "done"}}
        return {"thought": "click", "notes": "", "action": {"type": "click", "target": "the middle"}}


def config_of(*servers: StandInServer, **settings) -> AgentConfig:  # type: ignore[no-untyped-def]
    return AgentConfig(servers=[s.base_url for s in servers], model=servers[0].model, profile="holotron",
                       max_steps=10, **settings)


def tasks(n: int) -> list[BatchTask]:
    return [BatchTask(id=f"t{k}", task="Register Ada", group=f"t{k}") for k in range(n)]


def sessions_by_server(*servers: StandInServer) -> dict[str, set[int]]:
    """Each session id -> the numbers (1..) of the servers its requests reached."""
    where: dict[str, set[int]] = defaultdict(set)
    for number, server in enumerate(servers, 1):
        for request in server.requests:
            where[request.session or ""].add(number)
    return where


def roles_of(session: str, *servers: StandInServer) -> set[str]:
    return {r.role for s in servers for r in s.requests if r.session == session}


def spec(server: StandInServer, weight: float = 1.0) -> ServerSpec:
    return ServerSpec(Endpoint(base_url=server.base_url, model=server.model), "holotron", weight)


async def test_placement_follows_sessions_waiting_requests_and_weights(standin):
    a, b = (standin(Answerer(), kv_capacity=100_000) for _ in range(2))
    pool = ServerPool([spec(a, weight=2.0), spec(b)])
    leases = [await pool.place() for _ in range(9)]
    assert Counter(lease.server.index for lease in leases) == {1: 6, 2: 3}  # weight 2 takes twice the sessions
    for lease in leases:
        pool.release(lease)
    assert [s.sessions for s in pool.servers] == [0, 0]

    a.waiting = 8  # eight requests queue at a (its /metrics says so): it takes fewer of the new sessions
    even = ServerPool([spec(a), spec(b)])
    placed = Counter([(await even.place()).server.index for _ in range(10)])
    assert placed[1] < placed[2] and placed == {1: 1, 2: 9}
    assert even.snapshot()[0]["waiting"] == 8 and even.snapshot()[1]["sessions"] == 9
    a.waiting = 0
    await even.aclose()


async def test_every_request_of_a_session_reaches_its_one_server(standin, shared_browser, tmp_path):
    model = Answerer()
    servers = [standin(model, kv_capacity=100_000) for _ in range(3)]
    batch = Batch(config_of(*servers), tasks(9), tmp_path, concurrency=6, replay=load_recordings(DEMO_RECORDINGS))
    summary = await batch.run()
    assert summary.statuses == {"success": 9} and summary.stopped is None

    where = sessions_by_server(*servers)
    assert set(where) == {f"t{k}" for k in range(9)}  # the batch names each task's session
    assert all(len(numbers) == 1 for numbers in where.values()), where  # affinity: one server per session
    assert all(roles_of(task, *servers) == {"policy", "localizer", "validator"} for task in where)
    assert sorted(Counter(next(iter(n)) for n in where.values()).values()) == [3, 3, 3]  # by room: evenly

    lines = {r["id"]: r for r in batch.index.read()}
    for task, numbers in where.items():
        assert lines[task]["server"] == servers[next(iter(numbers)) - 1].base_url and lines[task]["server_moves"] == 0
        ResultLine.model_validate(lines[task])
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rows = metrics[-1]["servers"]
    assert [row["base_url"] for row in rows] == [s.base_url for s in servers]
    assert sum(row["steps"] for row in rows) == summary.stats["steps"] and all(row["steps"] > 0 for row in rows)
    assert {"sessions", "waiting", "steps_per_s", "state"} <= set(rows[0])

    # the live display, drawn from its refresh thread: a line per server
    import io

    from rich.console import Console

    screen = io.StringIO()
    await asyncio.to_thread(Console(file=screen, width=200).print, batch.stats)
    assert all(f"server {n}" in screen.getvalue() and s.base_url in screen.getvalue() for n, s in enumerate(servers, 1))

    # `surfer view` shows them: a row per server
    from surfer.apps.view.server import ViewServer

    view = await ViewServer(tmp_path, port=0).start()
    page = await shared_browser.new_page()
    try:
        await page.goto(view.url)
        await page.wait_for_selector("#servers tr[data-server='3']", timeout=15_000)
        text = await page.locator("#servers").inner_text()
        assert all(s.base_url in text for s in servers) and "up" in text
    finally:
        await page.close()
        await view.stop()


async def test_a_killed_server_holds_its_sessions_then_they_move_and_the_batch_finishes(standin, tmp_path, monkeypatch):
    from surfer.models import servers as servers_module
    from surfer.models.outage import watch_of

    monkeypatch.setattr(servers_module, "FIRST_PROBE", 0.1)  # the lost server is probed often: back sooner
    monkeypatch.setattr(servers_module, "LONGEST_PROBE", 0.2)
    model = Answerer()
    a = StandInServer(model, delay=0.15).start()
    b = standin(model, delay=0.15)
    port = a._httpd.server_address[1]
    batch = Batch(config_of(a, b, server_wait=1.0), tasks(8), tmp_path, concurrency=4,
                  replay=load_recordings(DEMO_RECORDINGS))
    running = asyncio.create_task(batch.run())
    while len(a.requests) < 3:  # a's sessions are mid-run
        await asyncio.sleep(0.02)
    on_a = {r.session for r in a.requests}
    a.stop()
    killed_at = len(b.requests)
    summary = await running

    assert summary.stopped is None and summary.statuses == {"success": 8}
    lines = batch.index.read()
    assert sorted(r["id"] for r in lines) == [f"t{k}" for k in range(8)]  # nothing lost, nothing twice
    assert not (tmp_path / "attempts.jsonl").exists() or not (tmp_path / "attempts.jsonl").read_text().strip()
    moved = {r["id"] for r in lines if r["server_moves"]}
    assert moved and moved <= on_a and all(r["server"] == b.base_url for r in lines if r["id"] in moved)
    for session in moved:  # its run went on at b: the policy's later calls (and the answer) were b's
        assert any(r.session == session for r in b.requests[killed_at:])
    # sessions that started after the kill never went to a
    assert all(where == {2} for session, where in sessions_by_server(a, b).items() if session not in on_a)
    watch = watch_of(a.base_url)  # its sessions held first (outage.py), for --server-wait
    assert watch is not None and watch.outages >= 1 and watch.held_seconds >= 0.9
    snapshot = {row["base_url"]: row for row in batch.stats.server_rows()}
    assert snapshot[a.base_url]["state"] == "lost" and snapshot[a.base_url]["moved_away"] == len(moved)

    # a server that comes back takes new sessions again
    back = StandInServer(model, port=port).start()
    try:
        pool = batch.servers.pool
        assert pool is not None
        for _ in range(100):
            if pool.servers[0].state == "up":
                break
            await asyncio.sleep(0.05)
        assert pool.servers[0].state == "up"
    finally:
        back.stop()


async def test_with_no_server_left_the_batch_stops_for_a_rerun(standin, tmp_path):
    a = StandInServer(Answerer()).start()
    b = StandInServer(Answerer()).start()
    a.stop(), b.stop()  # both gone before the batch ever reached them
    batch = Batch(config_of(a, b), tasks(2), tmp_path, concurrency=2, replay=load_recordings(DEMO_RECORDINGS))
    summary = await batch.run()
    assert summary.stopped_kind == "unreachable" and "no model server" in (summary.stopped or "")
    assert not batch.index.read()  # nothing recorded as finished: a plain rerun does the tasks


def test_servers_in_config_and_on_the_command_line(standin, tmp_path):
    model = Answerer()
    a, b = standin(model), standin(model, model="other-name")
    config = tmp_path / "surfer.toml"
    config.write_text(f'model = "{a.model}"\nprofile = "holotron"\nserver_wait = 5\n'
                      f'servers = ["{a.base_url}", {{ base_url = "{b.base_url}", model = "other-name", weight = 3 }}]\n')
    cfg = load_config(config)
    specs = cfg.server_specs()
    assert [(s.endpoint.base_url, s.endpoint.model, s.weight, s.profile) for s in specs] == [
        (a.base_url, a.model, 1.0, "holotron"), (b.base_url, "other-name", 3.0, "holotron")]
    assert specs[1].endpoint.server_wait == 5 and cfg.placed("policy")
    # SURFER_BASE_URL is above the file (as one --base-url is): its servers gave way to it; OPENAI_BASE_URL is below
    env = load_config(config, environ={"SURFER_BASE_URL": "http://10.0.0.9:8000/v1"})
    assert [s.endpoint.base_url for s in env.server_specs()] == ["http://10.0.0.9:8000/v1"] and env.origin("servers") == "SURFER_BASE_URL"
    assert len(load_config(config, environ={"OPENAI_BASE_URL": "http://10.0.0.9:8000/v1"}).server_specs()) == 2

    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps({"id": f"s{k}", "task": "Register Ada"}) + "\n" for k in range(4)))
    base = ["batch", str(tasks_file), "-c", "4", "--quiet", "--env", "replay", "--replay", "demo"]
    from_file = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "one"), "--config", str(config)])
    assert from_file.exit_code == 0, from_file.output
    assert {r.session for r in b.requests} and {r.session for r in a.requests}  # weight 3: b took 3 of 4
    assert len({r.session for r in b.requests}) == 3

    flags = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "two"), "--base-url", a.base_url,
                                     "--base-url", a.base_url.replace("/v1", "/v1/"), "--model", a.model])
    assert flags.exit_code == 2 and "listed twice" in flags.output  # the same server twice

    bad = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "three"), "--base-url", a.base_url,
                                   "--base-url", "htp:/nowhere", "--model", a.model])
    assert bad.exit_code == 2 and "'htp:/nowhere' is not an http(s) URL" in bad.output

    down = StandInServer(model).start()
    down.stop()
    gone = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "four"), "--base-url", down.base_url,
                                    "--base-url", down.base_url.replace("127.0.0.1", "localhost"), "--model", a.model])
    assert gone.exit_code == 3 and "no model server" in gone.output


def test_config_errors_name_the_server():
    with pytest.raises(ConfigError, match=r"servers\.1\.base_url(.|\n)*'ftp://x' is not an http"):
        load_config(overrides={"servers": ["http://127.0.0.1:1/v1", "ftp://x"]})
    with pytest.raises(ConfigError, match=r"servers\.0\.weight"):
        load_config(overrides={"servers": [{"base_url": "http://a:1/v1", "weight": 0}, "http://b:1/v1"]})
    with pytest.raises(ConfigError, match="port"):
        load_config(overrides={"servers": ["http://a:port/v1", "http://b:1/v1"]})


async def test_a_role_on_its_own_endpoint_is_not_placed(standin, tmp_path):
    model = Answerer()
    a, b, own = (standin(model) for _ in range(3))
    config = config_of(a, b, localizer={"base_url": own.base_url})
    batch = Batch(config, tasks(4), tmp_path, concurrency=4, replay=load_recordings(DEMO_RECORDINGS))
    assert (await batch.run()).statuses == {"success": 4}
    assert {r.role for r in own.requests} == {"localizer"} and len({r.session for r in own.requests}) == 4
    assert all(r.role != "localizer" for r in a.requests + b.requests)
    assert all(len(n) == 1 for n in sessions_by_server(a, b).values())


async def test_the_sdk_places_each_run_and_round_robin_per_request_spreads_one(standin):
    from surfer import Agent
    from surfer.tools.replay import ReplayEnvironment

    model = Answerer()
    a, b = standin(model), standin(model)
    recording = DEMO_RECORDINGS / "demo-1280x800"
    # two agents of one process: one tally of the servers' sessions (one pool per event loop and server list)
    agents = [Agent(servers=[a.base_url, b.base_url], model=a.model, profile="holotron", max_steps=10,
                    environment=ReplayEnvironment(recording, variant=k)) for k in range(2)]
    runs = await asyncio.gather(*(agent.run("Register Ada") for agent in agents))
    for agent in agents:
        await agent.aclose()
    assert [r.status for r in runs] == ["success", "success"], [(r.status, r.error_kind, r.reason) for r in runs]
    assert sorted(next(iter(n)) for n in sessions_by_server(a, b).values()) == [1, 2]  # one run each

    naive = Agent(servers=[a.base_url, b.base_url], model=a.model, profile="holotron", max_steps=10,
                  server_placement="round-robin-per-request", environment=ReplayEnvironment(recording))
    before = set(sessions_by_server(a, b))
    result = await naive.run("Register Ada")
    await naive.aclose()
    assert result.status == "success"
    spread = {k: v for k, v in sessions_by_server(a, b).items() if k not in before}
    assert list(spread.values()) == [{1, 2}]  # no affinity: its requests alternate between the servers
    with pytest.raises(ConfigError, match="no configured server serves profile 'holo2'"):
        Agent(servers=[a.base_url, b.base_url], model=a.model, profile="holo2")  # the servers' profile: the config's


def test_doctor_checks_each_server_and_names_the_one_that_fails(standin):
    server = standin(Answerer(), data_parallel=2)  # one endpoint over the engine's two data-parallel ranks
    gone = StandInServer(Answerer()).start()
    gone.stop()
    result = CliRunner().invoke(app, ["doctor", "--no-browser", "--json", "--base-url", server.base_url,
                                      "--base-url", gone.base_url])
    assert result.exit_code == 1, result.output
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["server 1: endpoint"]["status"] == "ok"
    assert checks["server 1: data parallel"]["detail"] == f"{server.base_url}: 2 data-parallel ranks; each session kept on one"
    assert checks["server 2: endpoint"]["status"] == "fail" and gone.base_url in checks["server 2: endpoint"]["detail"]
    bad = CliRunner().invoke(app, ["doctor", "--no-browser", "--base-url", "nowhere"])
    assert bad.exit_code == 2 and "'nowhere' is not an http(s) URL" in bad.output


async def test_qa_places_each_case_on_one_server(standin, demo_site, shared_browser, tmp_path):
    """`surfer qa` with two --base-url: each case's session keeps one server (real Chromium, the sample suite)."""

    from surfer.apps.demo.qa_oracle import SAMPLE_SUITE, measure_qa_targets, qa_oracle
    from surfer.models.profiles import get_profile

    oracle = qa_oracle(await measure_qa_targets(demo_site.base_url, browser=shared_browser), get_profile("holotron").frame)
    a, b = standin(oracle), standin(oracle)
    proc = await asyncio.to_thread(surfer, "qa", str(SAMPLE_SUITE), "--var", f"demo_url={demo_site.base_url}", "--no-cache",  # (tests/inprocess.py)
                  "--out", str(tmp_path / "qa"), "--base-url", a.base_url, "--base-url", b.base_url, "--model", a.model,
                  "--profile", "holotron", "--quiet", env={"LIBRARY_PASSWORD": "Tr0ub4dor-qa-7f3e9"})
    assert proc.returncode == 0, proc.stderr
    where = sessions_by_server(a, b)
    assert len(where) == 3 and all(len(numbers) == 1 for numbers in where.values())  # three cases, one server each
    assert {next(iter(n)) for n in where.values()} == {1, 2}  # placed by room: both servers used


def test_run_takes_several_base_urls_and_keeps_one(standin, tmp_path):
    model = Answerer()
    a, b = standin(model), standin(model)
    result = CliRunner().invoke(app, [
        "run", "Register Ada", "--env", "replay", "--replay", str(DEMO_RECORDINGS / "demo-1024x768"), "--json",
        "--base-url", a.base_url, "--base-url", b.base_url, "--model", a.model, "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["status"] == "success"
    where = sessions_by_server(a, b)
    assert len(where) == 1 and [len(n) for n in where.values()] == [1]
    run_json = json.loads((tmp_path / "run" / "run.json").read_text())
    assert "2 servers" in run_json["config"]["backends"]["policy"]


async def test_rollouts_and_concurrency_auto_follow_every_server(standin, tmp_path):
    import contextlib

    import surfer
    from surfer.fleet.concurrency import AutoConcurrency
    from surfer.models.json_http import http_library

    model = Answerer()
    a, b = standin(model, kv_capacity=100_000), standin(model, kv_capacity=100_000)
    config = config_of(a, b)
    stream = surfer.rollouts(config, ["Register Ada"] * 4, out_dir=tmp_path, concurrency=4,
                             replay=load_recordings(DEMO_RECORDINGS))
    async with contextlib.aclosing(stream) as records:
        finished = [record async for record in records]
    assert sorted(r["status"] for r in finished) == ["success"] * 4
    assert {r["server"] for r in finished} == {a.base_url, b.base_url}
    assert all(len(n) == 1 for n in sessions_by_server(a, b).values())

    auto = AutoConcurrency.for_servers(config)
    assert auto.metrics_url == a.base_url.removesuffix("/v1") + "/metrics" and len(auto.more_urls) == 1
    a.waiting, b.waiting = 2, 3
    async with http_library().AsyncClient(timeout=5) as client:
        reading = await auto.read(client)
    a.waiting = b.waiting = 0
    assert reading is not None and reading["vllm:num_requests_waiting"] == 5  # the servers' queues together
