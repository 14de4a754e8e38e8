"""`surfer doctor` against the stand-in model server: a server that applies
JSON schemas passes, one that ignores them (answering 200) is flagged, and a
server that is down is flagged with a fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from surfer.apps.cli import app
from surfer.apps.doctor import PROBE_ANSWER, check_endpoint, probe_verdict
from surfer.models.standin import ChatRequest


def honours_schema(request: ChatRequest) -> dict | str:
    # What a constrained decoder would produce: the only value the schema allows.
    return PROBE_ANSWER if request.schema else "Sure! Here is a JSON object: {}"


def ignores_schema(request: ChatRequest) -> dict:
    return {"reply": "hello", "ok": "yes"}


def by_name(checks: list) -> dict:
    return {c.name: c for c in checks}


async def test_a_server_that_honours_the_schema_passes(standin) -> None:
    server = standin(honours_schema)
    checks = by_name(await check_endpoint(server.base_url, server.model))
    assert [checks[n].status for n in ("endpoint", "model", "structured outputs")] == ["ok", "ok", "ok"]
    assert "response_format" in checks["structured outputs"].detail
    assert server.requests[0].schema is not None  # the probe carried a schema
    # a server that answers with text parts (no traceback), read as a run reads them
    from surfer.models.standin import RawReply

    parts = [{"type": "text", "text": json.dumps(PROBE_ANSWER)}]
    server.respond = lambda r: RawReply({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": parts}}]})
    assert by_name(await check_endpoint(server.base_url, server.model))["structured outputs"].status == "ok"
    # answers as a run reads them, where the openai SDK raised inside doctor (a traceback): a server that
    # answers only in server-sent events passes; a web page, a refused key and a rate limit are named
    streamed = "".join(f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': part}}]})}\n\n"
                       for part in (json.dumps(PROBE_ANSWER)[:9], json.dumps(PROBE_ANSWER)[9:])) + "data: [DONE]\n\n"
    server.respond = lambda r: RawReply(streamed, headers={"Content-Type": "text/event-stream"})
    assert by_name(await check_endpoint(server.base_url, server.model))["structured outputs"].status == "ok"
    for reply, detail, fix in [
        (RawReply("<html><body>Sign in</body></html>", headers={"Content-Type": "text/html"}),
         "POST /chat/completions answered HTTP 200, a text/html answer, not JSON: 'Sign in': not an OpenAI-compatible API",
         "check --base-url"),
        (RawReply({"error": {"message": "Invalid API key"}}, 401), "refused (Error code: 401 - Invalid API key)",
         "give the server's API key with --api-key"),
        (RawReply({"error": {"message": "slow down"}}, 429, {"Retry-After": "1"}), "refused (Error code: 429 - slow down)",
         "the server is rate limiting this key"),
        (RawReply({"error": {"message": "no such model"}}, 404), "refused (Error code: 404 - no such model)", "check --model"),
    ]:
        server.respond = lambda r, reply=reply: reply
        check = by_name(await check_endpoint(server.base_url, server.model))["structured outputs"]
        assert check.failed and detail in check.detail and check.fix.startswith(fix), check


async def test_a_server_that_ignores_the_schema_is_flagged(standin) -> None:
    server = standin(ignores_schema)
    checks = by_name(await check_endpoint(server.base_url, server.model))
    check = checks["structured outputs"]
    assert check.status == "fail" and check.required
    assert "does not apply JSON schemas" in check.detail and "HTTP 200" in check.detail
    assert "structured-outputs-config" in check.fix


async def test_a_server_that_rejects_response_format_passes_through_the_fallback(standin) -> None:
    server = standin(honours_schema, reject_response_format=True)
    check = by_name(await check_endpoint(server.base_url, server.model))["structured outputs"]
    assert check.status == "ok"
    assert "structured_outputs" in check.detail and "falls back" in check.detail


async def test_a_server_that_stalls_is_named_as_stalled_and_waited_for_once(standin) -> None:
    """A server that takes the connection and never answers was "cannot reach ... ()" with "start the server"
    as the fix; one whose chat completions stall was waited for a second time by the token-ids probe."""
    server = standin(honours_schema, hang_after=0)
    server.hang_paths.add("/v1/models")
    [found] = await check_endpoint(server.base_url, server.model, timeout=0.3)
    assert found.failed and "took the connection but did not answer within 0.3 s" in found.detail and "stalled" in found.fix
    server.hang_paths.clear()
    checks = by_name(await check_endpoint(server.base_url, server.model, timeout=0.3))
    assert checks["structured outputs"].failed and "no complete answer within 0.3 s" in checks["structured outputs"].detail
    assert checks["token ids"].status == "skip" and server.hung == 1


async def test_a_model_that_is_not_served_is_flagged(standin) -> None:
    server = standin(honours_schema)
    check = by_name(await check_endpoint(server.base_url, "Hcompany/Holo2-8B"))["model"]
    assert check.status == "fail" and "'Hcompany/Holo2-8B' is not served" in check.detail
    assert server.model in check.fix
    # a base URL without /v1 at a server that routes only under it: the fix is the base URL
    strict = standin(honours_schema, strict_paths=True)
    [found] = await check_endpoint(strict.base_url.removesuffix("/v1"), strict.model)
    assert found.failed and "answered HTTP 404" in found.detail and found.fix.startswith("check --base-url (it usually ends in /v1)")


def test_cli_exit_codes_and_lines(standin) -> None:
    good, bad = standin(honours_schema), standin(ignores_schema)
    # no --base-url: the endpoint, key and model `surfer run` would use, from OPENAI_* / SURFER_* variables, and whence
    env = {"OPENAI_BASE_URL": good.base_url, "OPENAI_API_KEY": "sk-x", "SURFER_MODEL": good.model}
    ok = CliRunner().invoke(app, ["doctor", "--no-browser"], env=env)
    assert ok.exit_code == 0, ok.output
    assert "✓ structured outputs" in ok.stdout and "all required checks passed" in ok.stdout
    assert f"✓ settings             endpoint {good.base_url} from OPENAI_BASE_URL; API key from OPENAI_API_KEY" in ok.stdout
    assert f"✓ endpoint             {good.base_url} answers" in ok.stdout and f"✓ model                {good.model!r} is listed" in ok.stdout
    flagged = CliRunner().invoke(app, ["doctor", "--no-browser", "--base-url", bad.base_url, "--model", bad.model, "--json"])
    assert flagged.exit_code == 1
    report = json.loads(flagged.stdout)
    assert report["ok"] is False
    assert {c["name"]: c["status"] for c in report["checks"]}["structured outputs"] == "fail"


def test_server_down_is_flagged_clearly() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = CliRunner().invoke(app, ["doctor", "--no-browser", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m"])
    assert result.exit_code == 1
    assert "✗ endpoint" in result.stdout and f"cannot reach http://127.0.0.1:{port}/v1/models" in result.stdout
    assert "surfer serve MODEL" in result.stdout


async def test_a_web_page_or_an_untrusted_certificate_is_flagged_not_a_traceback() -> None:
    """An endpoint answering a web page (HTTP 200, HTML) made the openai SDK raise inside doctor (a traceback);
    a self-signed https server said 'start the server'."""
    from surfer.apps.demo.static_site import StaticSite
    from test_http_backend import web_page_server

    server = await web_page_server()
    [found] = await check_endpoint(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", "m")
    server.close()
    assert found.failed and "a text/html answer, not JSON: 'Welcome to my app': not an OpenAI-compatible API" in found.detail
    data = Path(__file__).with_name("data")
    with StaticSite(Path(__file__).with_name("pages"), tls=(data / "self-signed-test-only.crt", data / "self-signed-test-only.key")) as site:
        [found] = await check_endpoint(site.url("v1"), "m")
    assert found.failed and "TLS certificate is not trusted here" in found.detail and "SSL_CERT_FILE" in found.fix
    # JSON of another shape than a model list: one failed check each (the openai SDK's error was a traceback)
    for listing in ([{"id": "m"}], {"object": "list"}, {"data": {"id": "m"}}, {"data": [{"name": "m"}]}, None):
        server = await json_server(listing)
        [found] = await check_endpoint(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", "m")
        server.close()
        assert found.failed and f"answered JSON that is not a model list ({{\"data\": [{{\"id\": ...}}]}}): {json.dumps(listing)!r}" in found.detail
    # a run reads such a listing as no listing, rather than "it serves: None"
    server = await json_server({"data": [{"name": "m"}]})
    from surfer.models.endpoint import Endpoint
    from surfer.models.http import OpenAICompatibleBackend

    backend = OpenAICompatibleBackend(Endpoint(base_url=f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", model="m"))
    try:
        await backend.check()
    finally:
        await backend.aclose()
        server.close()


async def json_server(body: object):  # type: ignore[no-untyped-def]
    """A server that answers every request with `body` as JSON (HTTP 200)."""
    import asyncio

    async def answer(reader, writer) -> None:  # type: ignore[no-untyped-def]
        await reader.readuntil(b"\r\n\r\n")
        data = json.dumps(body).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
        await writer.drain()
        writer.close()

    return await asyncio.start_server(answer, "127.0.0.1", 0)


def test_a_display_no_x_server_answers_is_a_warning(xvfb: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DISPLAY left set after its Xvfb stopped was 'ok'; the desktop run then failed to start."""
    from surfer.apps.doctor import check_display

    unused = next(n for n in range(4000, 4100) if not Path(f"/tmp/.X11-unix/X{n}").exists())
    monkeypatch.setenv("DISPLAY", f":{unused}")
    found = check_display()
    assert found.status == "warn" and f"DISPLAY=:{unused}, but no X server answers there" in found.detail
    monkeypatch.setenv("DISPLAY", f"{xvfb}.0")
    assert check_display().status == "ok"


@pytest.mark.browser
def test_local_checks_find_and_launch_chromium() -> None:
    result = CliRunner().invoke(app, ["doctor", "--json"])
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["chromium"]["status"] == "ok" and "launches headless" in checks["chromium"]["detail"]
    from surfer.tools.chromium import find_headless_shell

    if find_headless_shell():  # scripts/test.sh installs it
        assert checks["headless shell"]["status"] == "ok"
        assert "chromium-headless-shell" in checks["chromium"]["detail"]
    assert {"display", "extra:desktop", "extra:transformers", "extra:vllm", "extra:kernels", "gpu"} <= set(checks)
    assert result.exit_code == 0


@pytest.mark.parametrize("text,finish,verdict", [
    ('{"ok": true, "n": 7, "word": "zebra-41"}', "stop", "honoured"),
    ('{"ok": true \n,"n"\n \n \n \n', "length", "cut"),  # seen on vLLM with random weights: schema applied, tokens spent on whitespace
    ('{"ok": true \n,"n"', "stop", "ignored"),
    ('{"ok"', "length", "ignored"),  # too short to prove anything
    ('{"reply": "hello"}', "length", "ignored"),
])
def test_probe_verdict(text: str, finish: str, verdict: str) -> None:
    assert probe_verdict(text, finish) == verdict


@pytest.mark.browser
async def test_a_missing_headless_shell_is_a_warning_with_its_fix(monkeypatch):
    from surfer.apps import doctor
    from surfer.tools import chromium

    monkeypatch.setattr(chromium, "find_headless_shell", lambda: None)
    checks = {c.name: c for c in await doctor.check_chromium()}
    assert checks["chromium"].status == "ok"  # the full browser runs headless too
    shell = checks["headless shell"]
    assert shell.status == "warn" and not shell.failed
    assert "apt-get install -y chromium-headless-shell" in shell.fix
    # a SURFER_CHROMIUM that is no browser: the variable is what to fix (it said "no Chromium found")
    monkeypatch.setenv("SURFER_CHROMIUM", "/nonexistent/chromium")
    [found] = await doctor.check_chromium()
    assert found.failed and found.detail == "SURFER_CHROMIUM=/nonexistent/chromium is not an executable file"
    assert "at a Chromium or Chrome executable, or unset it (SURFER_CHROMIUM=/nonexistent/chromium)" in found.fix


SGLANG_AS_SURFER_SERVES = {"enable_cache_report": True, "enable_metrics": True, "mamba_radix_cache_strategy": "no_buffer",
                           "disable_overlap_schedule": True, "mamba_ssm_dtype": "float32", "tokenizer_worker_num": 6,
                           "mamba_full_memory_ratio": 3.0}


async def test_doctor_says_which_engine_serves_and_the_serving_flags_a_profile_lacks(standin) -> None:
    """An SGLang server (its /metrics names, its /server_info) started as `surfer serve` starts it passes; one
    started bare is warned about, flag by flag; a vLLM server with prefix caching off too; a server without
    /metrics cannot be told apart, and says so."""
    from surfer.apps.doctor import check_serving

    served = standin(honours_schema, engine="sglang", kv_capacity=10**6, max_model_len=65536,
                     settings=SGLANG_AS_SURFER_SERVES)
    checks = by_name(await check_serving(served.base_url, served.model, "holotron"))
    assert checks["engine"].detail.startswith("SGLang") and checks["serving flags"].status == "ok"
    bare = standin(honours_schema, engine="sglang", kv_capacity=10**6, max_model_len=8192,
                   settings={"mamba_radix_cache_strategy": "auto", "mamba_ssm_dtype": "bfloat16",
                             "mamba_full_memory_ratio": 0.9})
    check = by_name(await check_serving(bare.base_url, bare.model, "holotron"))["serving flags"]
    assert check.status == "warn" and "--engine sglang" in check.fix
    for said in ("--enable-cache-report", "--mamba-radix-cache-strategy no_buffer", "bfloat16",
                 "--tokenizer-worker-num", "the context is 8192 tokens", "--mamba-full-memory-ratio 3"):
        assert said in check.detail, said
    assert by_name(await check_serving(bare.base_url, bare.model, "holo2"))["serving flags"].detail.count(";") == 2
    vllm = standin(honours_schema, kv_capacity=10**6, max_model_len=65536,
                   settings={"enable_prefix_caching": "False", "mamba_ssm_cache_dtype": "float16"})
    check = by_name(await check_serving(vllm.base_url, vllm.model, "holotron"))["serving flags"]
    assert check.status == "warn" and "--enable-prefix-caching" in check.detail and "float16" in check.detail
    plain = standin(honours_schema)  # no /metrics: another server, a hosted API
    assert by_name(await check_serving(plain.base_url, plain.model, None))["engine"].status == "skip"


def test_doctor_cli_checks_the_serving_flags_of_the_profile_named(standin, tmp_path) -> None:
    server = standin(honours_schema, engine="sglang", kv_capacity=10**6, max_model_len=65536, settings={})
    result = CliRunner().invoke(app, ["doctor", "--no-browser", "--base-url", server.base_url, "--model", server.model,
                                      "--profile", "holotron", "--json"])
    assert result.exit_code == 0, result.output  # a warning, not a failure: the server works
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["engine"]["detail"] == "SGLang (its /metrics)" and checks["serving flags"]["status"] == "warn"
    wrong = CliRunner().invoke(app, ["doctor", "--no-browser", "--base-url", server.base_url, "--profile", "nope"])
    assert wrong.exit_code == 2 and "nope" in wrong.output
    # `auto` (as `surfer run` takes it) is the suggestion from the model's name: it was "unknown profile 'auto'", exit 2
    auto = CliRunner().invoke(app, ["doctor", "--no-browser", "--base-url", server.base_url, "--model", server.model,
                                    "--profile", "auto", "--json"])
    assert auto.exit_code == 0, auto.output
    assert {c["name"]: c for c in json.loads(auto.stdout)["checks"]}["serving flags"]["detail"].startswith("for openai: ")
    # a misspelt profile in a configuration file (or a server's) passed every check; a run then refused it
    for text, where in [('profile = "holo-2"', "profile"), ('[[servers]]\nbase_url = "http://h:1/v1"\nprofile = "holo-2"', "servers.0.profile")]:
        (tmp_path / "surfer.toml").write_text(f'base_url = "{server.base_url}"\n{text}\n')
        bad = CliRunner().invoke(app, ["doctor", "--no-browser", "--config", str(tmp_path / "surfer.toml")])
        assert bad.exit_code == 2 and f"surfer.toml): {where}: unknown profile 'holo-2'; choose one of: holo1.5," in bad.output


def test_doctor_checks_every_extra_that_pyproject_declares() -> None:
    import tomllib
    from pathlib import Path

    declared = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    result = CliRunner().invoke(app, ["doctor", "--json", "--no-browser"])
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert {f"extra:{name}" for name in declared} <= set(checks), sorted(checks)
    for extra in ("view", "mcp", "export", "video", "ray", "hub", "miniwob", "bench", "docs"):  # (the test extra installs them)
        assert checks[f"extra:{extra}"]["status"] == "ok", checks[f"extra:{extra}"]
    assert "starlette" in checks["extra:view"]["detail"] and "uvicorn" in checks["extra:view"]["detail"]


def test_an_extra_is_unmet_when_a_requirement_is_missing_or_too_old() -> None:
    from importlib.metadata import version

    from surfer.apps.extras import parse

    assert parse("pytest>=8").unmet() is None
    assert parse("pytest>=999").unmet() == f"pytest>=999 needed, {version('pytest')} installed"
    assert parse("no-such-package-here>=1; extra == 'x'").unmet() == "no-such-package-here missing"
    assert parse("python-xlib>=0.33; (sys_platform == 'linux') and extra == 'desktop'").applies("desktop") is (
        __import__("sys").platform == "linux")
    assert not parse("pyarrow>=14; extra == 'export'").applies("") and parse("rich>=13").applies("")
    # without `packaging` (not one of surfer's requirements), surfer's own markers read the same
    from surfer.apps.extras import _applies_without_packaging, extras, requirements

    for requirement in (r for r in requirements() if r.marker):
        for extra in ("", *extras()):
            assert _applies_without_packaging(requirement.marker, extra) == requirement.applies(extra), (requirement, extra)


async def test_a_password_in_the_base_url_is_never_shown(standin) -> None:
    """http://user:pw@host/v1 (sent as basic auth) was printed and recorded whole: doctor's lines, a run's header and
    run.json (the backend's label), its errors and a batch's results."""
    from surfer.core.errors import ModelNotFound
    from surfer.models.endpoint import Endpoint
    from surfer.models.http import OpenAICompatibleBackend

    server = standin(honours_schema)
    url = server.base_url.replace("http://", "http://alice:s3cret@")
    checks = by_name(await check_endpoint(url, server.model))
    assert checks["structured outputs"].status == "ok" and "alice:***@127.0.0.1" in checks["endpoint"].detail
    assert not any("s3cret" in c.detail + c.fix for c in checks.values())
    backend = OpenAICompatibleBackend(Endpoint(base_url=url, model="nope"))
    try:
        with pytest.raises(ModelNotFound, match=r"model server at http://alice:\*\*\*@127\.0\.0\.1:\d+/v1 does not serve") as caught:
            await backend.check()
    finally:
        await backend.aclose()
    assert "s3cret" not in str(caught.value) + backend.label
    token = server.base_url.replace("http://", "http://sk-s3cret@")  # a token as the user name, no password
    assert "s3cret" not in by_name(await check_endpoint(token, server.model))["endpoint"].detail


def test_doctor_config_checks_a_roles_own_endpoint(standin, tmp_path) -> None:
    """A [localizer] on a server of its own went unchecked: all passed, and every run's localizer then failed."""
    import socket

    server = standin(honours_schema)
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / "surfer.toml").write_text(f'base_url = "{server.base_url}"\nmodel = "{server.model}"\nprofile = "holo2"\n'
                                          f'[localizer]\nbase_url = "http://127.0.0.1:{port}/v1"\n')
    result = CliRunner().invoke(app, ["doctor", "--no-browser", "--config", str(tmp_path / "surfer.toml"), "--json"])
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert result.exit_code == 1 and checks["server 1: structured outputs"]["status"] == "ok"
    assert checks["localizer: endpoint"]["status"] == "fail" and f"127.0.0.1:{port}/v1/models" in checks["localizer: endpoint"]["detail"]
