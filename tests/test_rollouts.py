"""`surfer.rollouts`: a batch as an async stream of results (local runner; the
Ray runner shares the same recording path, see test_batch_ray.py)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

import surfer
from surfer.fleet.batch import ResultsIndex
from test_batch import centres, config_for, oracle_server  # noqa: F401 - fixtures
from surfer.apps.demo.oracle import DEMO_TASK


async def test_rollouts_yield_each_sample_as_it_finishes_and_resume(demo_site, oracle_server, tmp_path):
    tasks = [{"id": "reg", "task": DEMO_TASK, "url": demo_site.url("index.html")}]
    config = config_for(oracle_server)
    seen, index = [], ResultsIndex(tmp_path / "results.jsonl")
    async with contextlib.aclosing(surfer.rollouts(config, tasks, samples=2, out_dir=tmp_path, concurrency=2)) as stream:
        async for record in stream:
            assert (tmp_path / record["run_dir"] / "result.json").exists()  # published before it is yielded
            seen.append(record)
            # a second batch over the directory while this one runs is refused: nothing twice
            with pytest.raises(surfer.ConfigError, match="another batch is running in"):
                [r async for r in surfer.rollouts(config, tasks, samples=2, out_dir=tmp_path)]
            async with asyncio.timeout(60):  # the trainer learns from it while the other sample finishes...
                while len(index.read()) < 2:
                    await asyncio.sleep(0.05)
            break  # ...and stops: that sample's line is yielded by the next call over the directory, once
    seen += [r async for r in surfer.rollouts(config, tasks, samples=2, out_dir=tmp_path)]
    assert sorted(r["id"] for r in seen) == ["reg#0", "reg#1"]
    assert sorted((r["group"]["id"], r["group"]["index"], r["group"]["size"]) for r in seen) == [("reg", 0, 2), ("reg", 1, 2)]
    assert {r["status"] for r in seen} == {"success"} and {(r["reward"], r["reward_source"]) for r in seen} == {(1.0, "outcome")}
    assert index.read() == seen
    again = [r async for r in surfer.rollouts(config, tasks, samples=2, out_dir=tmp_path)]
    assert again == [] and oracle_server.oracle.answers_given == 2  # resumed: nothing ran twice


async def test_rollouts_stop_when_the_loop_breaks_and_refuse_bad_tasks(demo_site, oracle_server, tmp_path):
    config = config_for(oracle_server)
    tasks = [{"id": f"t{i}", "task": DEMO_TASK, "url": demo_site.url("index.html")} for i in range(4)]
    async with contextlib.aclosing(surfer.rollouts(config, tasks, out_dir=tmp_path, concurrency=1)) as stream:
        async for first in stream:
            break
    assert [r["id"] for r in ResultsIndex(tmp_path / "results.jsonl").read()] == [first["id"]]
    with pytest.raises(surfer.ConfigError, match="must be at least 1"):
        [r async for r in surfer.rollouts(config, tasks, samples=0, out_dir=tmp_path)]
    # a task given twice would run twice and write its results line twice (GRPO groups of twice the size);
    # a bad task is named in one line, as a tasks file's line is
    with pytest.raises(surfer.ConfigError, match=r"task 5: duplicate task id 't0'"):
        [r async for r in surfer.rollouts(config, tasks + tasks[:1], samples=2, out_dir=tmp_path)]
    with pytest.raises(surfer.ConfigError, match=r"^task 2: bogus: unknown key; a task line has task, url, .*metadata\)$"):
        [r async for r in surfer.rollouts(config, [tasks[0], {"task": "x", "bogus": 1}], out_dir=tmp_path)]
    with pytest.raises(surfer.ConfigError, match=r"^task 2: 7, not a task: give its text, a dict"):
        [r async for r in surfer.rollouts(config, [tasks[0], 7], out_dir=tmp_path)]
    assert [r["id"] for r in ResultsIndex(tmp_path / "results.jsonl").read()] == [first["id"]]  # nothing ran
    # a model server that is not there stops the batch: said by the stream, not an empty iteration
    gone = config.model_copy(update={"base_url": "http://127.0.0.1:9/v1", "server_wait": 0})
    with pytest.raises(surfer.ModelServerUnreachable, match="cannot reach the model server at http://127.0.0.1:9/v1"):
        [r async for r in surfer.rollouts(gone, tasks[1:2], out_dir=tmp_path)]
    assert [r["id"] for r in ResultsIndex(tmp_path / "results.jsonl").read()] == [first["id"]]
