"""`surfer mcp` driven as an MCP client drives it: a subprocess over stdio
through the official `mcp` client library, running tasks on the demo site
through the stand-in model over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import asynccontextmanager

import pytest

pytest.importorskip("mcp")

from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from surfer.bench.responder import StepResponder, measure_centres  # noqa: E402


class FormModel(StepResponder):
    """The form-filling stand-in, with a validator that accepts the answer it gives ("done")."""

    def __call__(self, request):  # type: ignore[no-untyped-def]
        if request.role == "validator":
            return {"verdict": "accept", "reasons": "The form is filled in."}
        return super().__call__(request)


@asynccontextmanager
async def surfer_mcp(server, out):  # type: ignore[no-untyped-def]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURFER_")}
    params = StdioServerParameters(command=sys.executable, env=env, args=[
        "-m", "surfer", "mcp", "--base-url", server.base_url, "--model", server.model, "--out", str(out)])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


def _data(result):  # type: ignore[no-untyped-def]
    assert not result.is_error, result.content
    return result.structured_content.get("result", result.structured_content) if result.structured_content else \
        json.loads(result.content[0].text)


async def test_a_client_runs_a_task_with_progress_and_reads_its_report(demo_site, standin, tmp_path):
    server = standin(FormModel(await measure_centres(demo_site.base_url), "normalized_1000"))
    async with surfer_mcp(server, tmp_path / "runs") as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        assert {"run_task", "start_task", "task_status", "cancel_task", "run_suite"} <= tools
        progress: list[tuple[float, str | None]] = []

        async def on_progress(value, total, message):  # type: ignore[no-untyped-def]
            progress.append((value, message))

        result = _data(await session.call_tool("run_task", {
            "task": "Fill in the form.", "url": demo_site.url("register.html"), "max_steps": 3,
        }, progress_callback=on_progress))
        assert result["status"] == "success" and result["answer"] == "done" and result["steps"] == 4
        assert [p[0] for p in progress] == [1, 2, 3, 4]
        assert progress[0][1].startswith("step 1: type(") and progress[2][1].startswith("step 3: click(")
        report = await session.read_resource(result["report"])
        assert "Fill in the form." in report.contents[0].text
        shot = await session.read_resource(f"surfer://runs/{result['run']}/screenshots/step-001.jpg")
        assert shot.contents[0].blob  # the screenshot, base64 over the protocol
        missing = await session.call_tool("task_status", {"task_id": "nope"})
        assert missing.is_error and "no task 'nope'" in missing.content[0].text


async def test_a_long_task_is_started_polled_and_cancelled(demo_site, standin, tmp_path):
    server = standin(FormModel(await measure_centres(demo_site.base_url), "normalized_1000"), delay=0.3)
    async with surfer_mcp(server, tmp_path / "runs") as session:
        started = _data(await session.call_tool("start_task", {
            "task": "Fill in the form.", "url": demo_site.url("register.html"), "max_steps": 200}))
        task_id = started["task_id"]
        assert started["status"] == "running"
        for _ in range(100):
            status = _data(await session.call_tool("task_status", {"task_id": task_id}))
            if status.get("steps", 0) >= 2:
                break
            import asyncio

            await asyncio.sleep(0.2)
        assert status["status"] == "running" and status["steps"] >= 2
        cancelled = _data(await session.call_tool("cancel_task", {"task_id": task_id}))
        assert cancelled["status"] == "interrupted" and cancelled["steps"] >= 2
        assert _data(await session.call_tool("task_status", {"task_id": task_id}))["status"] == "interrupted"


def test_http_off_this_machine_needs_a_token():
    env = {k: v for k, v in os.environ.items() if k != "SURFER_MCP_TOKEN"}
    proc = subprocess.run([sys.executable, "-m", "surfer", "mcp", "--http", "8799", "--host", "0.0.0.0"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2 and "needs --token" in proc.stderr


def test_http_answers_only_a_client_with_the_token(tmp_path):
    import socket
    import time
    import urllib.error
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURFER_")}
    proc = subprocess.Popen([sys.executable, "-m", "surfer", "mcp", "--http", str(port), "--token", "s3cret",
                             "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode()

    def post(token):  # type: ignore[no-untyped-def]
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=body, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    try:
        for _ in range(100):
            try:
                status, _ = post(None)
                break
            except urllib.error.URLError:
                time.sleep(0.2)
        assert status == 401
        assert post("wrong")[0] == 401
        status, text = post("s3cret")
        assert status == 200 and '"serverInfo"' in text and '"surfer"' in text
    finally:
        proc.terminate()
        proc.wait(10)


async def test_a_client_runs_a_qa_suite(demo_site, standin, tmp_path):
    from surfer.apps.demo.qa_oracle import measure_qa_targets, qa_oracle
    from surfer.models.profiles import get_profile

    server = standin(qa_oracle(await measure_qa_targets(demo_site.base_url), get_profile("holotron").frame))
    suite = tmp_path / "checks.yaml"
    suite.write_text(f"name: checks\nbase_url: {demo_site.base_url}\ncases:\n"
                     "  - name: hours\n    url: index.html\n    task: Find the opening hours\n    expect: [{answer: '9:00'}]\n"
                     "  - name: wrong hours\n    url: index.html\n    task: Find the opening hours\n    expect: [{answer: '23:00'}]\n")
    async with surfer_mcp(server, tmp_path / "runs") as session:
        result = _data(await session.call_tool("run_suite", {"path": str(suite)}))
        statuses = {c["name"]: c["status"] for c in result["cases"]}
        assert statuses == {"hours": "passed", "wrong hours": "failed"}, result
        assert os.path.exists(result["junit"]) and "1 passed" in result["summary"]
        bad = await session.call_tool("run_suite", {"path": str(tmp_path / "missing.yaml")})
        assert bad.is_error and "missing.yaml" in bad.content[0].text
