"""One endpoint over the engine's own data parallelism (vLLM --data-parallel-size, SGLang --dp-size): surfer
finds out how many ranks it has when it checks the backend, keeps each session's requests on one rank (the
stand-in records the X-Data-Parallel-Rank header each request carried), records it, and sends no rank to a
server of one rank, in the benchmarks' round-robin-per-request, or when the probe fails. SGLang's vocabulary
and its /generate body: tests/test_tokens_in.py; `surfer doctor`: tests/test_servers.py. Replay environment: a browser adds nothing here."""

from __future__ import annotations

from collections import Counter, defaultdict

from surfer.agent.config import AgentConfig
from surfer.apps.options import DEMO_RECORDINGS
from surfer.fleet.batch import Batch, BatchTask
from surfer.fleet.batch.results import ResultLine
from surfer.models import data_parallel
from surfer.models.json_http import HttpStatusError, TimedOut
from surfer.models.standin import StandInServer
from surfer.tools.replay import load_recordings
from test_servers import Answerer


def ranks_by_session(server: StandInServer) -> dict[str, set[str | None]]:
    where: dict[str, set[str | None]] = defaultdict(set)
    for request in server.requests:
        where[request.session or ""].add(request.rank)
    return where


async def batch_on(server: StandInServer, tmp_path, n: int, **settings) -> Batch:  # type: ignore[no-untyped-def]
    config = AgentConfig(base_url=server.base_url, model=server.model, profile="holotron", max_steps=6, **settings)
    tasks = [BatchTask(id=f"t{k}", task="Register Ada", group=f"t{k}") for k in range(n)]
    batch = Batch(config, tasks, tmp_path, concurrency=n, replay=load_recordings(DEMO_RECORDINGS))
    summary = await batch.run()
    assert summary.statuses == {"success": n}, summary.statuses
    return batch


async def test_each_session_keeps_one_rank_of_a_data_parallel_endpoint(standin, tmp_path):
    server = standin(Answerer(answer_at=2, together=4), data_parallel=2)  # vLLM: its /metrics has a series per engine
    batch = await batch_on(server, tmp_path / "dp", 4)
    where = ranks_by_session(server)
    assert set(where) == {f"t{k}" for k in range(4)}
    assert all(len(ranks) == 1 and None not in ranks for ranks in where.values()), where  # every request: one rank
    assert Counter(next(iter(r)) for r in where.values()) == {"0": 2, "1": 2}  # the fewest live sessions: two each
    assert data_parallel.ranks_of(server.base_url).sessions == [0, 0]  # each given back when its session ended
    assert all({r.role for r in server.requests if r.session == s} == {"policy", "localizer", "validator"} for s in where)
    lines = {r["id"]: r for r in batch.index.read()}
    for task, ranks in where.items():  # the record says which rank the session had
        assert str(lines[task]["data_parallel_rank"]) == next(iter(ranks)) and "server" not in lines[task]
        ResultLine.model_validate(lines[task])

    # the benchmarks' round-robin-per-request: no rank, the engine spreads the requests itself
    naive = standin(Answerer(answer_at=2), data_parallel=2)
    await batch_on(naive, tmp_path / "naive", 1, server_placement="round-robin-per-request")
    # a server of one rank: no rank header
    plain = standin(Answerer(answer_at=2), kv_capacity=10**6)
    lines = (await batch_on(plain, tmp_path / "plain", 1)).index.read()
    assert all(s.requests and all(r.rank is None for r in s.requests) for s in (naive, plain))
    assert "data_parallel_rank" not in lines[0]


async def test_a_probe_that_fails_or_goes_unanswered_sends_no_rank_and_the_run_goes_on(standin, tmp_path, monkeypatch):
    monkeypatch.setattr(data_parallel, "PROBE_TIMEOUT", 0.2)
    wedged = standin(Answerer(answer_at=2), data_parallel=2)
    wedged.hang_paths = {"/metrics"}  # accepted, never answered
    await batch_on(wedged, tmp_path, 1)
    assert wedged.requests and all(r.rank is None for r in wedged.requests)

    async def refused(url: str) -> str:
        raise HttpStatusError(500, "boom")

    async def late(url: str) -> str:
        raise TimedOut("no answer")

    async def page(text):  # type: ignore[no-untyped-def]
        return text

    assert await data_parallel.count_ranks("http://x", "vllm", refused, refused) == 0
    assert await data_parallel.count_ranks("http://x", "vllm", late, refused) == 0
    assert await data_parallel.count_ranks("http://x", "sglang", refused, lambda url: page({"dp_size": "two"})) == 0
    assert await data_parallel.count_ranks("http://x", "sglang", refused, lambda url: page({"dp_size": 4})) == 4
    metrics = 'vllm:num_requests_running{engine="0",model_name="m"} 1.0\nvllm:num_requests_running{engine="1",model_name="m"} 0.0\n'
    assert await data_parallel.count_ranks("http://x", "vllm", lambda url: page(metrics), refused) == 2
    # a server that is neither (a hosted API, owned_by "openai") is not asked for pages it does not have
    assert await data_parallel.count_ranks("http://x", "openai", lambda url: page(metrics), lambda url: page({"dp_size": 4})) == 0
