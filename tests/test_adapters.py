"""The policy between iterations: adapters (LoRA) loaded and unloaded on running servers — every
server of a batch alike, or none — a batch's policy taken by each session at its start and never
mixed within one, switched while the batch runs (from the SDK and from another process), every
call recording the adapter that answered and the policy's version; `surfer serve --lora`'s flags.
The servers are stand-ins that load adapters like vLLM 0.25-0.26 (errors included); the sessions
replay the shipped recordings (placement and the model calls are what is tested here, not pages)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

import surfer
from surfer import policy
from surfer.apps.cli import app
from surfer.apps.options import DEMO_RECORDINGS
from surfer.agent.formats import TrajectoryLine
from surfer.fleet.batch import Batch, ResultsIndex
from surfer.fleet.batch.results import ResultLine
from surfer.models.adapters import AdapterError, PolicyRef
from surfer.models.json_http import http_library
from surfer.models.standin import StandInServer
from surfer.tools.replay import load_recordings
from test_servers import Answerer, config_of, tasks

@pytest.fixture
def adapter_dirs(tmp_path):  # type: ignore[no-untyped-def]
    """Two adapter directories (the stand-in loads no weights: a directory is an adapter)."""
    made = {}
    for name in ("step-1", "step-2"):
        (tmp_path / "ckpt" / name).mkdir(parents=True)
        made[name] = str(tmp_path / "ckpt" / name)
    return made


def flat(text: str) -> str:
    """Output with the console's line wrapping undone."""
    return " ".join(text.split())


def calls_of(run_dir: Path) -> list[dict]:
    """Every model call of a run directory's trajectory, all roles."""
    calls = []
    for line in (run_dir / "trajectory.jsonl").read_text().splitlines():
        TrajectoryLine.model_validate_json(line)  # the documented format holds the new fields
        for role_calls in json.loads(line)["calls"].values():
            calls.extend(role_calls)
    return calls


def test_the_stand_in_loads_and_serves_adapters_like_vllm(standin, adapter_dirs):
    server = standin(Answerer(), lora="on")
    base = server.base_url
    with http_library().Client(timeout=10) as http:
        ok = http.post(f"{base}/load_lora_adapter", json={"lora_name": "a", "lora_path": adapter_dirs["step-1"]})
        assert ok.status_code == 200 and ok.text == "Success: LoRA adapter 'a' added successfully."
        again = http.post(f"{base}/load_lora_adapter", json={"lora_name": "a", "lora_path": adapter_dirs["step-2"]})
        assert again.status_code == 400 and "has already been loaded" in again.json()["error"]["message"]
        missing = http.post(f"{base}/load_lora_adapter", json={"lora_name": "b", "lora_path": "/nowhere/b"})
        assert missing.status_code == 404  # vLLM 0.25-0.26: LoRAAdapterNotFoundError is a NotFoundError
        assert missing.json()["error"]["message"] == "Loading lora b failed: No adapter found for /nowhere/b"
        cards = http.get(f"{base}/models").json()["data"]
        assert [(c["id"], c.get("parent"), c.get("root")) for c in cards] == [
            (server.model, None, None), ("a", server.model, adapter_dirs["step-1"])]
        chat = {"messages": [{"role": "user", "content": "Localize an element"}]}
        answered = http.post(f"{base}/chat/completions", json={**chat, "model": "a"})
        assert answered.status_code == 200 and answered.json()["model"] == "a"  # the adapter answers by its name
        unknown = http.post(f"{base}/chat/completions", json={**chat, "model": "zz"})
        assert unknown.status_code == 404 and unknown.json()["error"]["message"] == "The model `zz` does not exist."
        gone = http.post(f"{base}/unload_lora_adapter", json={"lora_name": "zz"})
        assert gone.status_code == 404 and gone.json()["error"]["message"] == "The lora adapter 'zz' cannot be found."
        assert http.post(f"{base}/unload_lora_adapter", json={"lora_name": "a"}).status_code == 200
        assert [c["id"] for c in http.get(f"{base}/models").json()["data"]] == [server.model]
        off = standin(Answerer())  # vLLM without VLLM_ALLOW_RUNTIME_LORA_UPDATING: no route
        refused = http.post(f"{off.base_url}/load_lora_adapter", json={"lora_name": "a", "lora_path": adapter_dirs["step-1"]})
        assert refused.status_code == 404 and refused.json() == {"detail": "Not Found"}


async def test_adapters_load_on_every_server_or_on_none(standin, adapter_dirs):
    a, b = standin(Answerer(), lora="on"), standin(Answerer(), lora="on")
    config = config_of(a, b)
    outcomes = await policy.load(config, "step-1", adapter_dirs["step-1"])
    assert [o.detail for o in outcomes] == ["loaded", "loaded"]
    assert [o.detail for o in await policy.load(config, "step-1", adapter_dirs["step-1"])] == ["loaded already"] * 2
    listed = await policy.adapters(config)
    assert [(s.engine, s.models, s.adapters) for s in listed] == [("vllm", [a.model], {"step-1": adapter_dirs["step-1"]})] * 2

    with pytest.raises(AdapterError, match=r"every server \(2\): HTTP 404: no adapter at /nowhere/x"):
        await policy.load(config, "lost", "/nowhere/x")
    with pytest.raises(AdapterError, match="loaded from .*step-1 already"):
        await policy.load(config, "step-1", adapter_dirs["step-2"])

    off = standin(Answerer())  # started without runtime loading: the one failure undoes the load on the others
    with pytest.raises(AdapterError) as failed:
        await policy.load(config_of(a, off, b), "step-2", adapter_dirs["step-2"])
    message = str(failed.value)
    assert "server 2" in message and "does not load adapters at run time" in message and "surfer serve --lora" in message
    assert "server 1 (" in message and "unloaded it again" in message
    assert [a.adapters.loaded, b.adapters.loaded] == [{"step-1": adapter_dirs["step-1"]}] * 2  # step-2 is nowhere
    assert ("load", "step-2") in a.adapters.events and ("unload", "step-2") in a.adapters.events

    no_lora = standin(Answerer(), lora="not-enabled")  # the routes, but no --enable-lora
    with pytest.raises(AdapterError, match="started without --enable-lora"):
        await policy.load(no_lora.base_url, "step-2", adapter_dirs["step-2"])
    gone = StandInServer(Answerer()).start()
    gone.stop()
    with pytest.raises(AdapterError, match="unreachable") as unreachable:
        await policy.load([gone.base_url], "step-2", adapter_dirs["step-2"])
    assert unreachable.value.unreachable

    await policy.unload(config, "step-1")
    assert a.adapters.loaded == {} == b.adapters.loaded
    with pytest.raises(AdapterError, match="no server has an adapter named 'step-1'"):
        await policy.unload(config, "step-1")


async def test_a_switch_reaches_the_sessions_started_after_it_and_no_session_mixes_two(standin, adapter_dirs, tmp_path):
    gate, arrived = threading.Event(), threading.Semaphore(0)
    first_two: set[str] = set()

    class Held(Answerer):
        """Holds the first policy call of the first two sessions until the test has switched."""

        def __call__(self, request):  # type: ignore[no-untyped-def]
            if request.role == "policy" and request.session in ("t0", "t1") and request.session not in first_two:
                first_two.add(request.session)
                arrived.release()
                gate.wait(30)
            return super().__call__(request)

    model = Held()
    a, b = standin(model, lora="on"), standin(model, lora="on")
    config = config_of(a, b)
    for name, path in adapter_dirs.items():
        await policy.load(config, name, path)
    switch = policy.PolicySwitch("step-1@1")
    stream = surfer.rollouts(config, tasks(4), out_dir=tmp_path / "out", concurrency=2, policy=switch,
                             replay=load_recordings(DEMO_RECORDINGS))
    records = asyncio.ensure_future(_collect(stream))
    for _ in range(2):  # both running sessions started on step-1 and wait in their first call
        assert await asyncio.to_thread(arrived.acquire, True, 30)
    with pytest.raises(AdapterError, match="'missing' is not served by every server"):
        await switch.to("missing@9")  # refused: nothing switched
    assert switch.current == PolicyRef("step-1", "1")
    await switch.to("step-2@2")
    assert switch.running() == {"step-1": 2}
    gate.set()
    await asyncio.wait_for(switch.drained("step-1"), 30)  # the two old sessions end on their own policy
    lines = {r["id"]: r for r in await asyncio.wait_for(records, 60)}

    assert {i: r["policy"] for i, r in lines.items()} == {"t0": "step-1@1", "t1": "step-1@1", "t2": "step-2@2", "t3": "step-2@2"}
    sent: dict[str, set[str]] = {}
    for request in a.requests + b.requests:
        sent.setdefault(request.session, set()).add(request.body["model"])
    assert sent == {"t0": {"step-1"}, "t1": {"step-1"}, "t2": {"step-2"}, "t3": {"step-2"}}  # one adapter a session
    for task_id, line in lines.items():
        ResultLine.model_validate(line)
        name, version = line["policy"].split("@")
        calls = calls_of(tmp_path / "out" / line["run_dir"])
        assert {c["role"] for c in calls} == {"policy", "localizer", "validator"}  # every role on the shared model
        assert {(c["model"], c["policy_version"]) for c in calls} == {(name, version)}
        run = json.loads((tmp_path / "out" / line["run_dir"] / "run.json").read_text())
        assert run["config"]["policy"] == line["policy"]
    log = [json.loads(x) for x in (tmp_path / "out" / "policy.jsonl").read_text().splitlines()]
    assert [(x["policy"], x["reason"]) for x in log] == [("step-1@1", "start"), ("step-2@2", "switch")]


async def _collect(stream) -> list[dict]:  # type: ignore[no-untyped-def]
    return [record async for record in stream]


async def test_a_batch_refuses_to_start_on_a_policy_a_server_lacks(standin, adapter_dirs, tmp_path):
    a, b = standin(Answerer(), lora="on"), standin(Answerer(), lora="on")
    await policy.load([a.base_url], "step-1", adapter_dirs["step-1"])  # on one server of the two
    batch = Batch(config_of(a, b), tasks(2), tmp_path, concurrency=2, replay=load_recordings(DEMO_RECORDINGS),
                  policy="step-1@1")
    with pytest.raises(AdapterError, match=r"server 2 \(.*\): serves standin-model"):
        await batch.run()
    assert a.requests == [] == b.requests and ResultsIndex(tmp_path / "results.jsonl").read() == []
    with pytest.raises(surfer.ConfigError, match="names version 1, and --policy-version .* v7: give the version once"):
        Batch(config_of(a, b).model_copy(update={"policy_version": "v7"}), tasks(2), tmp_path, policy="step-1@1")


def test_the_policy_commands_load_list_unload_and_say_what_failed(standin, adapter_dirs, tmp_path):
    a, b = standin(Answerer(), lora="on"), standin(Answerer(), lora="on")
    urls = ["--base-url", a.base_url, "--base-url", b.base_url]
    runner = CliRunner()
    loaded = runner.invoke(app, ["policy", "load", "step-1", adapter_dirs["step-1"], *urls])
    assert loaded.exit_code == 0, loaded.output
    assert "loaded: step-1 on 2 server(s)" in flat(loaded.output)
    listed = runner.invoke(app, ["policy", "list", "--json", *urls])
    assert [json.loads(line)["adapters"] for line in listed.stdout.splitlines()] == [{"step-1": adapter_dirs["step-1"]}] * 2
    bad = runner.invoke(app, ["policy", "load", "x", "/nowhere/x", *urls])
    assert bad.exit_code == 2 and "no adapter at /nowhere/x" in flat(bad.output) and "Traceback" not in flat(bad.output)
    assert runner.invoke(app, ["policy", "unload", "step-1", *urls]).exit_code == 0
    again = runner.invoke(app, ["policy", "unload", "step-1", *urls])
    assert again.exit_code == 2 and "no server has an adapter named 'step-1'" in flat(again.output)
    off = standin(Answerer())
    refused = runner.invoke(app, ["policy", "load", "step-1", adapter_dirs["step-1"], "--base-url", off.base_url])
    assert refused.exit_code == 2 and "surfer serve --lora" in flat(refused.output) and "Traceback" not in flat(refused.output)

    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(json.dumps({"id": "t0", "task": "Register Ada"}) + "\n")
    batch = ["batch", str(tasks_file), "--quiet", "--env", "replay", "--replay", "demo", *urls, "--model", a.model]
    missing = runner.invoke(app, [*batch, "--out", str(tmp_path / "out"), "--policy", "step-1@1"])  # unloaded above
    assert missing.exit_code == 2 and "'step-1' is not served by every server" in flat(missing.output)
    assert "Traceback" not in missing.output and a.requests == [] == b.requests
    malformed = runner.invoke(app, [*batch, "--out", str(tmp_path / "out"), "--policy", "step-1@"])
    assert malformed.exit_code == 2 and "NAME@VERSION" in flat(malformed.output)


async def test_surfer_policy_switch_reaches_a_running_batch_through_its_output_directory(standin, adapter_dirs, tmp_path):
    gate = threading.Event()

    class Waits(Answerer):
        def __call__(self, request):  # type: ignore[no-untyped-def]
            if request.session == "t0":
                gate.wait(30)  # t0 runs until the switches are answered; t1 starts after it
            return super().__call__(request)

    server = standin(Waits(), lora="on")
    config = config_of(server)
    await policy.load(config, "step-1", adapter_dirs["step-1"])
    await policy.load(config, "step-2", adapter_dirs["step-2"])
    out = tmp_path / "out"
    batch = Batch(config, tasks(2), out, concurrency=1, replay=load_recordings(DEMO_RECORDINGS), policy="step-1@1")
    running = asyncio.ensure_future(batch.run())
    for _ in range(3000):  # until the batch runs (t0 waits at the gate): a switch before it found no --out yet
        if server.requests or running.done():
            break
        await asyncio.sleep(0.01)

    def switch(to: str):  # type: ignore[no-untyped-def]  # the command, in a thread: the batch runs in this loop
        return CliRunner().invoke(app, ["policy", "switch", to, "--out", str(out), "--wait", "30"])

    refused = await asyncio.to_thread(switch, "missing@2")
    assert refused.exit_code == 2 and "'missing' is not served" in flat(refused.output) and "stays step-1@1" in flat(refused.output)
    accepted = await asyncio.to_thread(switch, "step-2@2")
    assert accepted.exit_code == 0 and "sessions started from now on use step-2@2" in flat(accepted.output)
    gate.set()
    summary = await asyncio.wait_for(running, 60)
    assert summary.statuses == {"success": 2}
    assert {r["id"]: r["policy"] for r in ResultsIndex(out / "results.jsonl").read()} == {"t0": "step-1@1", "t1": "step-2@2"}
    log = [json.loads(x) for x in (out / "policy.jsonl").read_text().splitlines()]
    assert [(x["policy"], x["accepted"]) for x in log] == [("step-1@1", True), ("missing@2", False), ("step-2@2", True)]


def test_surfer_serve_lora_turns_runtime_adapters_on_per_engine():
    runner = CliRunner()

    def plan(*args: str) -> tuple[int, str]:
        result = runner.invoke(app, ["serve", "--dry-run", "--vllm-version", "0.26.0", "--sglang-version", "0.5.15", *args])
        return result.exit_code, flat(result.output)

    code, out = plan("Hcompany/Holo2-8B", "--engine", "vllm", "--lora", "--adapter", "web=/ckpt/web")
    assert code == 0 and "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve Hcompany/Holo2-8B" in out
    assert "--enable-lora --max-lora-rank 16 --max-loras 2 --lora-modules web=/ckpt/web" in out
    code, out = plan("Hcompany/Holo2-8B", "--engine", "vllm", "--lora", "--gpus", "2", "--data-parallel")
    assert code == 0 and "--api-server-count 1" in out  # runtime updating needs a single API server
    code, out = plan("Hcompany/Holo2-8B", "--engine", "sglang", "--lora", "--max-lora-rank", "64")
    assert code == 0 and "--enable-lora --max-lora-rank 64 --lora-target-modules all" in out
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in out
    code, out = plan("Hcompany/Holotron-12B", "--engine", "vllm", "--lora")
    assert code == 2 and "NemotronH_Nano_VL_V2" in out and "SupportsLoRA" in out and "Traceback" not in out
    code, out = plan("Hcompany/Holo2-8B", "--engine", "vllm", "--lora", "--max-lora-rank", "24")
    assert code == 2 and "--max-lora-rank must be one of 1, 8, 16" in out
    code, out = plan("Hcompany/Holo2-8B", "--adapter", "no-path")
    assert code == 2 and "--adapter takes NAME=PATH" in out
    code, out = plan("Hcompany/Holo2-8B", "--engine", "vllm")
    assert code == 0 and "--enable-lora" not in out and "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in out
    # a LoRA size without --lora started a server without LoRA (found out at `surfer policy load`)
    code, out = plan("Hcompany/Holo2-8B", "--max-lora-rank", "64")
    assert code == 2 and "--max-lora-rank sizes LoRA adapters: add --lora (or --adapter NAME=PATH)" in out


def test_policies_are_name_at_version():
    assert PolicyRef.parse("web-rl@7") == PolicyRef("web-rl", "7") and str(PolicyRef.parse("web-rl@7")) == "web-rl@7"
    assert PolicyRef.parse("Hcompany/Holo2-8B") == PolicyRef("Hcompany/Holo2-8B", None)
    for bad in ("", "@3", "name@"):
        with pytest.raises(surfer.ConfigError, match="NAME@VERSION"):
            PolicyRef.parse(bad)


async def test_an_adapter_unloaded_under_running_sessions_stops_the_batch_with_nothing_lost(standin, adapter_dirs, tmp_path):
    gate, arrived = threading.Event(), threading.Event()

    class Waits(Answerer):
        def __call__(self, request):  # type: ignore[no-untyped-def]
            if not arrived.is_set():
                arrived.set()
                gate.wait(30)  # the first call of t0 is answered only after the adapter is gone
            return super().__call__(request)

    server = standin(Waits(), lora="on")
    await policy.load(server.base_url, "step-1", adapter_dirs["step-1"])
    batch = Batch(config_of(server), tasks(2), tmp_path, concurrency=1, replay=load_recordings(DEMO_RECORDINGS),
                  policy="step-1@1")
    running = asyncio.ensure_future(batch.run())
    assert await asyncio.to_thread(arrived.wait, 30)
    await policy.unload(server.base_url, "step-1")
    gate.set()
    summary = await asyncio.wait_for(running, 60)
    assert summary.stopped_kind == "config" and "does not serve policy 'step-1' (its adapter unloaded?)" in summary.stopped
    assert ResultsIndex(tmp_path / "results.jsonl").read() == []  # nothing recorded as finished: it runs again on resume
    attempts = [json.loads(x) for x in (tmp_path / "attempts.jsonl").read_text().splitlines()]
    assert [(a["id"], a["policy"]) for a in attempts] == [("t0", "step-1@1")]


async def test_sglang_takes_adapters_outside_v1_and_picks_them_by_lora_path(standin, adapter_dirs, tmp_path):
    server = standin(Answerer(), lora="on", engine="sglang")
    assert [o.detail for o in await policy.load(server.base_url, "step-1", adapter_dirs["step-1"])] == ["loaded"]
    assert [s.engine for s in await policy.adapters(server.base_url)] == ["sglang"]
    with pytest.raises(AdapterError, match="no adapter at /nowhere/x"):
        await policy.load(server.base_url, "lost", "/nowhere/x")
    summary = await Batch(config_of(server), tasks(1), tmp_path, replay=load_recordings(DEMO_RECORDINGS),
                          policy="step-1@1").run()
    assert summary.statuses == {"success": 1}
    assert {(r.body["model"], r.body.get("lora_path")) for r in server.requests} == {("step-1", "step-1")}
    assert server.adapters.events == [("load", "step-1")]
