"""`surfer mcp` as an MCP client meets it: a subprocess over stdio, driven
with the `mcp` client library; the stand-in model server answering as the
demo site's oracle over real HTTP, real Chromium on the demo site."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

from importlib.util import find_spec

import pytest

from inprocess import surfer
from surfer.apps.demo.oracle import DEMO_TASK, EMAIL, NAME, DemoOracle, confirmation_code
from surfer.apps.demo.qa_oracle import SAMPLE_SUITE, measure_qa_targets, qa_oracle
from surfer.models.profiles import get_profile

# The mcp client library is imported where a test uses it (~1 s of CPU): every pytest process collects this file.
pytestmark = pytest.mark.skipif(find_spec("mcp") is None, reason="the mcp extra is not installed")

VIEWPORT = (1100, 700)
ROOT = Path(__file__).resolve().parents[1]


def normalized(point, sent):  # type: ignore[no-untyped-def]
    return round(point.x / VIEWPORT[0] * 1000), round(point.y / VIEWPORT[1] * 1000)


def server_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for key in ("SURFER_BASE_URL", "SURFER_MODEL", "SURFER_API_KEY", "SURFER_PROFILE", "SURFER_MCP_TOKEN"):
        env.pop(key, None)
    return {**env, **extra}


@asynccontextmanager
async def mcp_session(*args: str, env: dict[str, str] | None = None, elicit: Any = None) -> AsyncIterator[ClientSession]:
    """`surfer mcp ARGS` over stdio; `elicit`: the client's elicitation callback (a person asked)."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "surfer", "mcp", *args], env=env or server_env())
    # its log to this process's own stderr, named here: the default (sys.stderr when mcp was first imported) may be
    # an in-process command's captured output if a test that ran one imported mcp first
    async with stdio_client(params, errlog=sys.__stderr__) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=60, elicitation_callback=elicit) as session:
            await session.initialize()
            yield session


def endpoint(server, tmp_path: Path) -> list[str]:  # type: ignore[no-untyped-def]
    return ["--base-url", server.base_url, "--model", server.model, "--profile", "holotron",
            "--viewport", f"{VIEWPORT[0]}x{VIEWPORT[1]}", "--runs-dir", str(tmp_path / "runs"), "--qa-dir", str(tmp_path / "qa")]


def payload(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return result.structured_content if "status" in (result.structured_content or {}) else json.loads(result.content[0].text)


def final_screen(result: Any) -> tuple[int, int]:
    """The size of the image of the final screen beside a tool result's text (a JPEG, at most 1280 px a side)."""
    import base64
    import io

    from PIL import Image

    images = [part for part in result.content if part.type == "image"]
    assert len(images) == 1 and images[0].mime_type == "image/jpeg", result.content
    data = base64.b64decode(images[0].data)
    assert len(data) < 200_000
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "JPEG"
        return image.size


def error_text(result: Any) -> str:
    assert result.is_error, result
    return " ".join(getattr(part, "text", "") for part in result.content)


@pytest.fixture(scope="module")
async def centres(demo_site, measure):
    return await measure(demo_site.base_url, VIEWPORT)


async def test_run_task_answers_the_demo_task_with_progress_and_a_report(standin, demo_site, centres, tmp_path):
    server = standin(DemoOracle(centres, normalized))
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with mcp_session(*endpoint(server, tmp_path), "--video", "on") as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert {"run_task", "start_task", "task_status", "cancel_task", "run_suite"} <= set(tools)
        assert "task" in tools["run_task"].input_schema["properties"]
        undescribed = [f"{tool.name}.{name}" for tool in tools.values()
                       for name, field in tool.input_schema["properties"].items() if not field.get("description")]
        assert not undescribed, undescribed  # what a client's model reads of each argument

        called = await session.call_tool(
            "run_task", {"task": DEMO_TASK, "url": demo_site.url("index.html"), "max_steps": 12},
            progress_callback=on_progress)
        result = payload(called)
        assert result["status"] == "success" and result["answer"] == confirmation_code(NAME, EMAIL)
        # the screen it ended on, as an image a client shows: a small JPEG of the welcome page
        assert final_screen(called) == VIEWPORT
        assert result["steps"] == 5
        run_dir = Path(result["run_dir"])
        assert run_dir.parent == tmp_path / "runs" and (run_dir / "result.json").exists()

        # one notification per step, in order, saying what the step did
        assert [p[0] for p in progress] == [1, 2, 3, 4, 5], progress
        assert progress[0][1] == 12 and "click" in (progress[0][2] or "") and "answer accepted" in (progress[-1][2] or "")

        report_uri = result["resources"]["report"]
        assert report_uri == f"surfer://runs/{run_dir.name}/report.html"
        read = await session.read_resource(report_uri)
        html = read.contents[0].text
        assert "Create account" in html and confirmation_code(NAME, EMAIL) in html
        assert read.contents[0].mime_type == "text/html"
        shots = result["resources"]["screenshots"]
        assert len(shots) == 5
        image = (await session.read_resource(shots[0])).contents[0]
        assert image.mime_type in ("image/jpeg", "image/png") and len(image.blob) > 1000
        listed = {r.uri: r for r in (await session.list_resources()).resources}  # past runs, for a client to show
        assert listed[report_uri].title.endswith("— success") and listed[report_uri].mime_type == "text/html"
        assert result["resources"]["result"] in listed
        templates = {t.uri_template for t in (await session.list_resource_templates()).resource_templates}
        assert "surfer://runs/{run_id}/report.html" in templates
        video_uri = result["resources"]["video"]  # --video on: the run's video is a resource too
        video = (await session.read_resource(video_uri)).contents[0]
        assert video_uri.rsplit(".", 1)[1] in ("mp4", "webp") and video.mime_type.endswith(video_uri.rsplit(".", 1)[1])
        assert len(video.blob) > 1000

    # a later server on the same --runs-dir (the client app restarted it) still answers task_status for the task
    from surfer.agent.config import AgentConfig
    from surfer.apps.mcp_server.runs import ServerSettings
    from surfer.apps.mcp_server.server import build_server

    later, _ = build_server(ServerSettings(AgentConfig(), None, {}, None, tmp_path / "runs", tmp_path / "qa"))
    past = (await later.call_tool("task_status", {"task_id": result["task_id"]})).structured_content
    assert (past["status"], past["answer"], past["steps"], past["resources"]) == ("success", result["answer"], 5, result["resources"])
    assert past["session"].startswith("closed: it was a session of an earlier")


async def test_runs_on_several_model_servers_then_a_long_task_cancelled_and_bad_input_a_tool_error(standin, demo_site, centres, tmp_path):
    """One `surfer mcp` over two model servers: its runs are placed on both (each run all its calls at one);
    then a long task is cancelled, bad input is a tool error and SIGTERM ends the server."""
    oracle = DemoOracle(centres, normalized)
    servers = a, b = standin(oracle), standin(oracle)
    args = ["--base-url", a.base_url, "--base-url", b.base_url, *endpoint(a, tmp_path)[2:]]
    async with mcp_session(*args) as session:
        runs = await asyncio.gather(*(session.call_tool(
            "run_task", {"task": DEMO_TASK, "url": demo_site.url("index.html"), "max_steps": 12}) for _ in range(2)))
        assert [payload(run)["status"] for run in runs] == ["success", "success"]
        sessions = [{r.session for r in server.requests} for server in servers]
        assert all(len(s) == 1 for s in sessions) and sessions[0].isdisjoint(sessions[1])  # one run each, all its calls

        for server in servers:
            server.delay = 0.3  # a slow model: the run lasts
        started = payload(await session.call_tool("start_task", {"task": DEMO_TASK, "url": demo_site.url("index.html")}))
        task_id = started["task_id"]
        assert started["status"] == "running"
        deadline = time.monotonic() + 20
        status = started
        while status["steps"] < 1 and time.monotonic() < deadline:  # at least one step done: a real browser run
            status = payload(await session.call_tool("task_status", {"task_id": task_id}))
        assert status["status"] == "running" and status["steps"] >= 1, status
        assert status["last_step"].startswith("step 1: click")

        cancelled = payload(await session.call_tool("cancel_task", {"task_id": task_id}))
        assert cancelled["status"] == "interrupted" and cancelled["cancelled"] is True, cancelled
        assert cancelled["steps"] < 5 and "cancel_task" in cancelled["reason"]
        saved = json.loads((Path(cancelled["run_dir"]) / "result.json").read_text())
        assert saved["status"] == "interrupted" and "cancel_task" in saved["reason"]
        calls = sum(len(server.requests) for server in servers)
        await asyncio.sleep(0.6)  # the run really stopped: no more model requests
        assert sum(len(server.requests) for server in servers) == calls
        assert payload(await session.call_tool("task_status", {"task_id": task_id}))["status"] == "interrupted"

        unknown = await session.call_tool("task_status", {"task_id": "no-such-task"})
        assert "unknown task id 'no-such-task'" in error_text(unknown)
        assert "unknown task id" in error_text(await session.call_tool("cancel_task", {"task_id": "nope"}))
        bad_schema = await session.call_tool("run_task", {"task": "t", "url": demo_site.url("index.html"),
                                                          "answer_schema": {"type": "no-such-type"}})
        assert "not a valid JSON Schema" in error_text(bad_schema)
        mistyped = error_text(await session.call_tool("run_task", {"task": "t", "max_steps": "many"}))
        assert mistyped == "run_task: bad arguments: max_steps: Input should be a valid integer, unable to parse string as an integer"
        refused = await session.call_tool("start_task", {"task": "t", "url": "file:///etc/passwd"})
        assert "file" in error_text(refused)
        broken = error_text(await session.call_tool("start_task", {"task": "t", "url": "http://[::1"}))
        assert broken.endswith("the start URL http://[::1 is not a valid URL: Invalid IPv6 URL"), broken  # not a crash
        # a start URL that does not open (nothing listens there) is a tool error too, not a result saying error
        down = f"http://127.0.0.1:{free_port()}/"
        unopened = await session.call_tool("run_task", {"task": "t", "url": down, "session_id": started["session_id"]})
        assert error_text(unopened).startswith(f"the task ended in error: could not open {down}"), error_text(unopened)
        assert unopened.structured_content["status"] == "error" and unopened.structured_content["run_dir"] in error_text(unopened)
        assert len((await session.list_tools()).tools) >= 5  # the server is still there

        # SIGTERM while the client keeps stdin open and a task runs: the run is recorded and the server exits
        for server in servers:  # (at whichever the session is placed)
            server.hang_after = len(server.requests)  # its first model call never answered: the task runs until stopped
        again = payload(await session.call_tool("start_task", {"task": DEMO_TASK, "session_id": started["session_id"]}))
        queued = payload(await session.call_tool("start_task", {"task": DEMO_TASK, "session_id": started["session_id"]}))
        assert queued["waiting_for_task"] == again["task_id"] and "waiting_for_task" not in again, queued  # one at a time
        while not any(server.hung for server in servers):
            assert time.monotonic() < deadline + 20
            await asyncio.sleep(0.02)
        pid = server_pid(tmp_path)
        os.kill(pid, signal.SIGTERM)
        while Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline + 40, "SIGTERM left the stdio server running"
            await asyncio.sleep(0.05)
    saved = json.loads((Path(again["run_dir"]) / "result.json").read_text())
    assert saved["status"] == "interrupted" and saved["reason"].startswith("cancelled: the MCP server closed"), saved


BUY = {"thought": "buy it", "notes": "", "action": {"type": "click", "target": "the Buy now button"}}
AT_BUY = {"x": 156, "y": 162}  # the button's centre, 0..1000 of 1280x800
DONE = {"thought": "done", "notes": "", "action": {"type": "answer", "text": "done"}}


def shop(request):  # type: ignore[no-untyped-def]
    if request.role == "localizer":
        return AT_BUY
    return DONE if "bought=1" in request.text else BUY


async def test_a_sensitive_action_and_the_agents_question_are_asked_through_elicitation(standin, pages, tmp_path):
    """One `surfer mcp` for both ways a person is asked through elicitation (the model answers each task's own way)."""
    from mcp_types import ElicitResult

    server = standin(lambda request: colour(request) if "pick a colour" in request.text else shop(request))
    asked: list[str] = []
    approve = [True]
    colours: list[str] = []

    async def person(context, params):  # type: ignore[no-untyped-def]
        if "Which colour?" in params.message:
            colours.append(params.message)
            return ElicitResult(action="accept", content={"answer": "teal"})
        asked.append(params.message)
        return ElicitResult(action="accept", content={"approve": approve[0]})

    args = ["--base-url", server.base_url, "--model", server.model, "--profile", "holotron", "--no-validator",
            "--runs-dir", str(tmp_path / "runs")]
    async with mcp_session(*args, elicit=person) as session:
        approved = payload(await session.call_tool("run_task", {"task": "buy the lamp (achète la lampe, ランプ)",
                                                                "url": pages.url("shop.html")}))
        assert approved["status"] == "success" and len(asked) == 1
        # a run named in any script is a resource like any other
        assert Path(approved["run_dir"]).name.endswith("-buy-the-lamp-achète-la-lampe-ランプ")
        assert "lamp" in (await session.read_resource(approved["resources"]["report"])).contents[0].text
        assert "Buy now" in asked[0] and "Allow it?" in asked[0]
        first = json.loads((Path(approved["run_dir"]) / "trajectory.jsonl").read_text().splitlines()[0])
        assert first["confirmation"]["approved"] is True and first["confirmation"]["by"] == "confirm"

        approve[0] = False
        refused = payload(await session.call_tool("run_task", {"task": "buy the lamp", "url": pages.url("shop.html")}))
        assert len(asked) >= 2 and refused["status"] == "needs_approval", refused
        first = json.loads((Path(refused["run_dir"]) / "trajectory.jsonl").read_text().splitlines()[0])
        assert first["confirmation"]["approved"] is False

        # a background run has nobody to ask: the configured default (deny) decides, and the client is not asked
        approve[0], before = True, len(asked)
        run = payload(await session.call_tool("start_task", {"task": "buy the lamp", "url": pages.url("shop.html")}))
        deadline = time.monotonic() + 30
        while run["status"] == "running" and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            run = payload(await session.call_tool("task_status", {"task_id": run["task_id"]}))
        assert run["status"] == "needs_approval" and len(asked) == before, run
        first = json.loads((Path(run["run_dir"]) / "trajectory.jsonl").read_text().splitlines()[0])
        assert first["confirmation"]["approved"] is False and first["confirmation"]["by"] != "confirm"

        # the agent's own question (ask_user) through elicitation too: its reply goes on in the run
        result = payload(await session.call_tool("run_task", {"task": "pick a colour", "url": pages.url("actions.html")}))
    assert (result["status"], result["answer"]) == ("success", "teal") and colours == ["surfer's agent asks: Which colour?"]
    first = json.loads((Path(result["run_dir"]) / "trajectory.jsonl").read_text().splitlines()[0])
    assert first["outcome"] == {"question": "Which colour?", "reply": "teal", "by": "elicitation"}


def colour(request: Any) -> dict[str, Any]:
    replied = re.search(r"The user replied to 'Which colour\?': (\w+)", request.text)
    action = {"type": "answer", "text": replied.group(1)} if replied else {"type": "ask_user", "question": "Which colour?"}
    return {"thought": "", "notes": "", "action": action}


def server_pid(tmp_path: Path) -> int:
    """The `surfer mcp` process this test started (a child of this process) with its runs under tmp_path."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"mcp" in cmdline and str(tmp_path).encode() in b" ".join(cmdline):
            return int(stat.parent.name)
    raise AssertionError("no surfer mcp process found")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_run_suite_returns_each_case_and_the_reports(standin, demo_site, shared_browser, tmp_path):
    centres = await measure_qa_targets(demo_site.base_url, browser=shared_browser)
    server = standin(qa_oracle(centres, get_profile("holotron").frame))
    args = ["--base-url", server.base_url, "--model", server.model, "--profile", "holotron", "--qa-dir", str(tmp_path / "qa")]
    async with mcp_session(*args, env=server_env(LIBRARY_PASSWORD="Tr0ub4dor-qa-7f3e9")) as session:
        summary = payload(await session.call_tool("run_suite", {
            "suite": str(SAMPLE_SUITE), "grep": "opening hours", "no_cache": True,
            "variables": {"demo_url": demo_site.base_url}}))
        assert summary["ok"] is True and summary["passed"] == 1 and summary["failed"] == 0
        assert [c["case"] for c in summary["cases"]] == ["opening hours"] and summary["cases"][0]["status"] == "passed"
        assert Path(summary["junit"]).exists() and Path(summary["html"]).exists()
        assert Path(summary["cases"][0]["report"]).exists()

        # the client cancels a run_suite call mid-case: the run stops, its reports say so (none were written)
        server.hang_after = len(server.requests)  # its next model call is never answered: the case runs until stopped
        call = asyncio.ensure_future(session.call_tool("run_suite", {
            "suite": str(SAMPLE_SUITE), "grep": "opening hours", "no_cache": True, "variables": {"demo_url": demo_site.base_url}}))
        deadline = time.monotonic() + 60
        while not server.hung:
            assert time.monotonic() < deadline and not call.done(), call
            await asyncio.sleep(0.02)
        call.cancel()
        stopped_dir = next(d for d in (tmp_path / "qa").iterdir() if str(d) != summary["out_dir"])
        while not (stopped_dir / "index.html").exists():
            assert time.monotonic() < deadline, "a cancelled run_suite wrote no reports"
            await asyncio.sleep(0.05)
        junit = (stopped_dir / "junit.xml").read_text()
        assert "interrupted: the MCP client cancelled run_suite" in (stopped_dir / "index.html").read_text() and "opening hours" in junit
        server.hang_after = None

        missing = await session.call_tool("run_suite", {"suite": str(tmp_path / "none.yaml")})
        assert "does not exist" in error_text(missing)
        # a folder: it said "does not exist" of a folder that does
        assert f"{tmp_path} is a directory: give a suite file" in error_text(await session.call_tool("run_suite", {"suite": str(tmp_path)}))
        down = f"http://127.0.0.1:{free_port()}/"  # the app under test is not up: said once, no case started
        (tmp_path / "down.yaml").write_text(f"name: s\nbase_url: {down}\ncases:\n  - name: c\n    task: t\n")
        stopped = error_text(await session.call_tool("run_suite", {"suite": str(tmp_path / "down.yaml"), "grep": "^C$"}))
        assert f"the app under test cannot be reached at {down}: nothing listens" in stopped and "no case ran" in stopped
        assert "no regular expression" in error_text(await session.call_tool("run_suite", {"suite": str(tmp_path / "down.yaml"), "grep": "("}))


async def test_http_needs_a_token_off_loopback_and_a_model_server_down_is_a_tool_error(demo_site, tmp_path):
    port = free_port()
    refused = await asyncio.to_thread(  # (a usage error: in this process, tests/inprocess.py)
        surfer, "mcp", "--http", str(port), "--host", "0.0.0.0", env={"SURFER_MCP_TOKEN": None})
    assert refused.returncode == 2 and "without a bearer token" in refused.stderr, refused.stderr
    assert refused.stdout == ""
    (tmp_path / "a-file").write_text("")  # a --runs-dir that cannot be made: refused at the start, not at every run
    unwritable = await asyncio.to_thread(surfer, "mcp", "--runs-dir", str(tmp_path / "a-file" / "runs"), "--base-url",
                                         "http://127.0.0.1:9/v1", "--model", "m", "--profile", "holotron")
    assert unwritable.returncode == 2 and "a-file is not a directory; give --runs-dir" in unwritable.stderr, unwritable.stderr

    down = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    # on IPv6's loopback where the machine has it: the URL it prints was http://::1:PORT/mcp, which no client opens
    host = "::1" if ipv6_loopback() else "127.0.0.1"
    proc = subprocess.Popen([sys.executable, "-m", "surfer", "mcp", "--http", str(port), "--host", host, "--runs-dir",
                             str(tmp_path), "--base-url", down, "--model", "m", "--profile", "holotron"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=server_env(SURFER_MCP_TOKEN="s3cret-token"))
    url = f"http://{'[::1]' if host == '::1' else host}:{port}/mcp"
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode()

        def post(token: str | None) -> int:
            headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
            if token:
                headers["authorization"] = f"Bearer {token}"
            try:
                with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=10) as response:
                    return response.status
            except urllib.error.HTTPError as exc:
                return exc.code

        deadline = time.monotonic() + 30
        while True:
            try:
                status = await asyncio.to_thread(post, None)
                break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                await asyncio.sleep(0.2)
        assert status == 401
        assert await asyncio.to_thread(post, "wrong-token") == 401

        # a real client with the token: the model server is down, which is a tool error, and the server goes on
        import httpx2
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared.exceptions import MCPError

        async with httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token"}, timeout=60) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=60) as session:
                    await session.initialize()
                    result = await session.call_tool("run_task", {"task": "t", "url": demo_site.url("index.html")})
                    text = error_text(result)
                    assert "model server unreachable" in text and down.removesuffix("/v1") in text, text
                    assert {t.name for t in (await session.list_tools()).tools} >= {"run_task", "cancel_task"}
                    with pytest.raises(MCPError, match="^no run 'nope' under .* \\(never run there, or deleted\\)$"):
                        await session.read_resource("surfer://runs/nope/report.html")
    finally:
        proc.terminate()
        proc.wait(10)
    stderr = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr  # SIGTERM: a quiet exit
    assert f"surfer mcp: {url} · bearer token required" in stderr, stderr


def ipv6_loopback() -> bool:
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET6) as sock:
        sock.bind(("::1", 0))
        return True
    return False


async def test_a_session_id_continues_in_the_same_browser_until_the_session_idles_out(standin, acme_site, acme_centres, tmp_path):
    from login_site import ORDER, PASSWORD, TASK, AcmeOracle

    follow_up = "Which name does the account page greet?"

    class FollowingUp(AcmeOracle):
        def policy(self, request: Any) -> dict[str, Any]:
            if follow_up in request.text and "Current page: Account" in request.text:
                return {"thought": "", "notes": "", "action": {"type": "answer", "text": "Alice"}}
            return super().policy(request)

    server = standin(FollowingUp(acme_centres, normalized))
    logins = acme_site.logins
    args = [*endpoint(server, tmp_path), "--secret", "PASSWORD=ACME_PW", "--no-validator", "--session-idle", "1"]
    async with mcp_session(*args, env=server_env(ACME_PW=PASSWORD)) as session:
        first = payload(await session.call_tool("run_task", {"task": TASK, "url": acme_site.url("/account")}))
        assert (first["status"], first["answer"]) == ("success", ORDER) and first["session_id"]
        second = payload(await session.call_tool("run_task", {"task": follow_up, "session_id": first["session_id"]}))
        assert (second["status"], second["answer"], second["session_id"]) == ("success", "Alice", first["session_id"])
        assert acme_site.logins == logins + 1  # the follow-up started signed in, where the first task ended
        assert Path(second["run_dir"]).parent == tmp_path / "runs"
        deadline = time.monotonic() + 60
        while (state := payload(await session.call_tool("task_status", {"task_id": second["task_id"]}))["session"]) == "open":
            assert time.monotonic() < deadline, "the idle session was never closed"
            await asyncio.sleep(0.2)
        assert state == "closed: it was closed after 1 s without a task"
        (summary,) = (tmp_path / "runs").glob("*-session/session.json")  # beside the tasks, not in the working directory
        assert [t["task"] for t in json.loads(summary.read_text())["tasks"]] == [TASK, follow_up]
        gone = error_text(await session.call_tool("run_task", {"task": follow_up, "session_id": first["session_id"]}))
        assert "was closed after 1 s without a task" in gone and "leave out session_id" in gone
        unknown = error_text(await session.call_tool("end_session", {"session_id": "nope"}))
        assert "unknown session id 'nope'" in unknown


async def test_a_question_waits_in_task_status_until_answer_task_replies(standin, acme_site, acme_centres, tmp_path):
    from login_site import ORDER, PASSWORD, PASSWORD_FIELD, TASK, USER, USERNAME_FIELD, AcmeOracle

    class Asking(AcmeOracle):  # asks the user for the password instead of knowing a secret
        def policy(self, request: Any) -> dict[str, Any]:
            history = request.text.split("History:", 1)[-1].rsplit("Current page:", 1)[0]
            if "favourite colour" in request.text:
                return {"thought": "", "notes": "", "action": {"type": "ask_user", "question": "Which colour?"}}
            if "Current page: Sign in" in request.text and f"text={USER!r}" in history:
                action = ({"type": "ask_user", "question": "What is your password?", "secret": True}
                          if "the user replied" not in history else
                          {"type": "type", "text": "{{REPLY_1}}", "target": PASSWORD_FIELD, "submit": True})
                return {"thought": "", "notes": "", "action": action}
            return super().policy(request)

    server = standin(Asking(acme_centres, normalized))
    async with mcp_session(*endpoint(server, tmp_path), "--no-validator") as session:
        started = payload(await session.call_tool("start_task", {"task": TASK, "url": acme_site.url("/account")}))
        deadline = time.monotonic() + 60
        while not (status := payload(await session.call_tool("task_status", {"task_id": started["task_id"]}))).get("question"):
            assert status["status"] == "running" and time.monotonic() < deadline, status
            await asyncio.sleep(0.2)
        assert status["question"] == "What is your password?" and status["waiting_for_answer"] is True
        payload(await session.call_tool("answer_task", {"task_id": started["task_id"], "answer": PASSWORD, "secret": True}))
        while (status := payload(await session.call_tool("task_status", {"task_id": started["task_id"]})))["status"] == "running":
            assert time.monotonic() < deadline, status
            await asyncio.sleep(0.2)
        assert (status["status"], status["answer"]) == ("success", ORDER)
        late = error_text(await session.call_tool("answer_task", {"task_id": started["task_id"], "answer": "x"}))
        assert "is not waiting for an answer" in late
        # run_task's client has no task id to answer with until it returns: a question ends it at once
        asked = payload(await session.call_tool("run_task", {"task": "my favourite colour", "session_id": status["session_id"]}))
        assert (asked["status"], asked["question"], asked["steps"]) == ("needs_input", "Which colour?", 1), asked
        waiting = payload(await session.call_tool("start_task", {"task": "my favourite colour", "session_id": asked["session_id"]}))
        payload(await session.call_tool("end_session", {"session_id": asked["session_id"]}))  # its running task is cancelled
        ended = payload(await session.call_tool("task_status", {"task_id": waiting["task_id"]}))
        assert "by the MCP client (end_session)" in ended["reason"] and ended["session"].startswith("closed: it was ended"), ended
    run_dir = Path(status["run_dir"])
    assert not [p for p in run_dir.rglob("*") if p.is_file() and PASSWORD.encode() in p.read_bytes()]


def test_the_final_screen_of_a_large_viewport_is_scaled_to_a_small_jpeg(tmp_path):
    import io

    from PIL import Image

    from surfer.apps.mcp_server.screens import MAX_BYTES, MAX_SIDE, _bounded

    shots = tmp_path / "screenshots"
    shots.mkdir()
    Image.new("RGB", (2560, 1600), "white").save(shots / "step-001.png", compress_level=1)  # a HiDPI screen, as a PNG
    scaled = _bounded(None, tmp_path) or b""
    with Image.open(io.BytesIO(scaled)) as image:
        assert image.format == "JPEG" and image.size == (MAX_SIDE, MAX_SIDE * 1600 // 2560) and len(scaled) < MAX_BYTES
    assert _bounded(None, tmp_path / "none") is None  # no screen ever shown: no image


def test_an_outage_tells_the_mcp_client_to_call_again_not_to_run_a_command():
    from surfer.apps.mcp_server.runs import for_client
    from surfer.models.outage import AGAIN

    for again in (AGAIN, AGAIN.replace("it is back", "one is back")):  # one server, several
        reason = for_client(f"the model server at http://h/v1 has not answered for 2 s (--server-wait); nothing was recorded: {again}")
        assert "surfer run" not in reason and "--out" not in reason and reason.endswith(
            "call run_task or start_task again once it is back (a new task, into a new run directory)"), reason
    assert for_client(None) is None and for_client("stuck on the page") == "stuck on the page"


BLOCKED_WRITER = """
import os, sys, threading
from surfer.apps.mcp_server import stdout_relay
stdout_relay.DRAIN_S = 0.1
relay = stdout_relay.StdoutRelay.start()
wire = os.fdopen(os.dup(1), "wb", buffering=0)  # the SDK's: a duplicate of fd 1, written in a worker thread
writer = threading.Thread(target=lambda: [wire.write(b"x" * 8192) for _ in range(64)])  # more than the pipes hold
writer.start()
relay.end()  # the server closes (a signal, or the client closed stdin)
writer.join()
relay.restore()
"""


def test_a_client_that_stops_reading_does_not_keep_the_server_open():
    """A client that stops reading the server's stdout (its pipe full) and never closes it: once the server closes,
    the SDK's write ends (it blocked for ever in a worker thread, holding the server open after SIGTERM, its
    sessions' browsers with it); what the client had room for came through as written."""
    proc = subprocess.Popen([sys.executable, "-c", BLOCKED_WRITER], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=server_env())
    try:
        proc.wait(30)  # (a hang guard) nobody reads its stdout meanwhile
    except subprocess.TimeoutExpired:
        pytest.fail("a write the client does not read held the closing server open")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    came, said = proc.communicate()
    assert proc.returncode == 0 and "stopped reading its stdout" in said.decode(), said
    assert len(came) >= 40_000 and set(came) == {ord("x")}

    # a client that reads: what the server wrote last reaches it, though the server exits at once (it was lost)
    last_words = subprocess.run([sys.executable, "-c", "import os\nfrom surfer.apps.mcp_server import stdout_relay\n"
                                 "relay = stdout_relay.StdoutRelay.start()\nos.write(1, b'y' * 300_000)\n"
                                 "relay.end()\nrelay.restore()\n"], capture_output=True, env=server_env())
    assert last_words.returncode == 0 and last_words.stdout == b"y" * 300_000, (len(last_words.stdout), last_words.stderr)


async def test_a_progress_notification_the_client_does_not_take_does_not_hold_the_run(monkeypatch):
    """A step's progress notification that cannot be sent (a client that stopped reading) is given up on; the run
    goes on, and the other listeners hear every step (it had waited for ever on its first step)."""
    from surfer.agent.events import StepRecord
    from surfer.apps.mcp_server import runs

    monkeypatch.setattr(runs, "LISTENER_WAIT_S", 0.05, raising=False)
    heard: list[int] = []

    async def never_sent(record: StepRecord) -> None:
        await asyncio.Event().wait()

    async def sent(record: StepRecord) -> None:
        heard.append(record.index)

    run = runs.TaskRun("r", "t", None, Path("r"), 5, handle=None, driver=None, listeners=[never_sent, sent])  # type: ignore[arg-type]
    manager = runs.RunManager(None)  # type: ignore[arg-type]
    for index in (1, 2):
        await asyncio.wait_for(manager._step_finished(run, StepRecord(index)), 10)  # (a hang guard)
    assert heard == [1, 2] and run.listeners == [sent] and run.steps == 2 and run.last_step == "step 2: no action"


async def test_a_task_the_server_cannot_start_is_refused_with_the_reason(tmp_path):
    """--runs-dir / --qa-dir replaced by a file (or made read-only) after the server started, a blank url: the task or
    suite is refused saying why (the client got a bare 'Error executing tool run_task' / 'run_suite')."""
    from surfer.agent.config import AgentConfig
    from surfer.apps.mcp_server.runs import RunManager, RunRefused, ServerSettings
    from surfer.apps.mcp_server.suites import SuiteRefused, run_suite_file

    (tmp_path / "runs").write_text("")
    (tmp_path / "qa").write_text("")
    flags = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "profile": "holotron"}
    settings = ServerSettings(AgentConfig(**flags), None, flags, None, tmp_path / "runs", tmp_path / "qa")
    runs = RunManager(settings)
    with pytest.raises(RunRefused, match=f"cannot be made: {tmp_path / 'runs'} is a file, not a directory"):
        runs.start("t", "http://127.0.0.1:9/")
    (tmp_path / "runs").unlink()
    with pytest.raises(RunRefused, match="the url is blank"):  # (a bare tool crash that left a session busy for ever)
        runs.start("t", "  ")
    assert not runs.runs and not runs.sessions
    # a client starting tasks in a loop opened a browser for each: past --max-sessions a new session is refused
    capped = RunManager(ServerSettings(AgentConfig(**flags), None, flags, None, tmp_path / "runs", tmp_path / "qa",
                                       max_sessions=1))
    capped.sessions["s1"] = object()  # type: ignore[assignment]  (an open session: its browser is not needed here)
    with pytest.raises(RunRefused, match=r"1 sessions are open, each with its browser \(--max-sessions 1\): pass one's "
                                         r"session_id .* end one with end_session.*\(s1\)"):
        capped.start("t", "http://127.0.0.1:9/")
    assert not capped.runs and list(capped.sessions) == ["s1"]
    (tmp_path / "suite.yaml").write_text("name: s\nbase_url: http://127.0.0.1:9/\ncases:\n  - name: c\n    task: t\n")
    with pytest.raises(SuiteRefused, match=f"QA output directory .* cannot be made: {tmp_path / 'qa'} is a file"):
        await run_suite_file(settings, tmp_path / "suite.yaml", tags=[], grep=None, variables={}, concurrency=None,
                             no_cache=True)
