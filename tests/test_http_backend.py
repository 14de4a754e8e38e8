"""The OpenAI-compatible client over real HTTP to the stand-in server."""

from __future__ import annotations

import json
import socket
import time

import pytest

from surfer.core.errors import ConfigError, ModelNotFound, ModelRequestError, ModelServerUnreachable
from surfer.core.surface import calling_from_cli
from surfer.models.backend import ImagePart, Message, ModelRequest, TextPart
from surfer.models.http import Endpoint, OpenAICompatibleBackend
from surfer.models.standin import RawReply

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def request(schema_name: str = "localizer") -> ModelRequest:
    content = (ImagePart(b"\xff\xd8fakejpeg", "image/jpeg"), TextPart("Target: the button"))
    return ModelRequest(
        messages=(Message.text("system", "sys"), Message("user", content)), schema_name=schema_name, schema=SCHEMA,
        temperature=0.0, max_tokens=16, extra_body={"chat_template_kwargs": {"thinking": False}},
    )


def backend_for(server, **options) -> OpenAICompatibleBackend:  # type: ignore[no-untyped-def]
    return OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model=server.model, **options))


async def test_request_shape_schema_named_after_role_and_usage(standin):
    server = standin(lambda r: {"x": 7})
    backend = backend_for(server)
    completion = await backend.complete(request("localizer"))
    assert completion.text == '{"x": 7}'
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    assert completion.structured == "response_format"
    body = server.requests[0].body
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "localizer"
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert body["chat_template_kwargs"] == {"thinking": False}
    assert body["temperature"] == 0.0 and body["max_tokens"] == 16
    image = body["messages"][1]["content"][0]
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert server.requests[0].images == [b"\xff\xd8fakejpeg"]
    await backend.aclose()


async def test_a_session_named_beyond_ascii_is_named_to_the_server_percent_encoded(standin):
    # a batch task id or a QA case named in any script: HTTP headers carry ASCII only
    from urllib.parse import unquote

    from surfer.models.affinity import model_session

    server = standin(lambda r: {"x": 7})
    backend = backend_for(server)
    with model_session("boutique/検索 café 100%"):
        assert (await backend.complete(request("localizer"))).text == '{"x": 7}'
    assert unquote(server.requests[0].session) == "boutique/検索 café 100%"
    # a header value cannot begin or end with a space: a task id "q1 " (or "  ") was held as an unreachable server
    await backend.aclose()
    backend = backend_for(server, server_wait=0)  # (without the wait that held it: it fails at once)
    for name in ("q1 ", "  ", " a b "):
        with model_session(name):
            assert (await backend.complete(request("localizer"))).text == '{"x": 7}'
        assert unquote(server.requests[-1].session) == name
    await backend.aclose()


async def test_falls_back_when_server_rejects_response_format(standin):
    server = standin(lambda r: {"x": 1}, reject_response_format=True)
    backend = backend_for(server)
    completion = await backend.complete(request())
    assert completion.structured == "structured_outputs"
    assert backend.structured_mode == "structured_outputs"
    assert server.requests[-1].body["structured_outputs"] == {"json": SCHEMA}
    await backend.complete(request())  # remembered: no second rejected attempt
    assert "response_format" not in server.requests[-1].body
    await backend.aclose()


async def test_transient_errors_are_retried_with_backoff(standin, monkeypatch):
    waits: list[int] = []
    monkeypatch.setattr(OpenAICompatibleBackend, "_backoff", staticmethod(lambda attempt, jitter=True: waits.append(attempt) or 0.01))
    server = standin(lambda r: {"x": 2})
    server.fail_next(503, count=2)
    backend = backend_for(server, max_retries=3)
    completion = await backend.complete(request())
    assert completion.text == '{"x": 2}'
    assert [w for w in waits if w] == [1, 2]  # a back-off before each retry
    await backend.aclose()


async def test_persistent_server_errors_end_with_a_clear_error(standin, monkeypatch):
    monkeypatch.setattr(OpenAICompatibleBackend, "_backoff", staticmethod(lambda attempt, jitter=True: 0.01))
    server = standin(lambda r: {"x": 2})
    server.fail_next(500, count=10)
    backend = backend_for(server, max_retries=1)
    with pytest.raises(ModelRequestError, match="HTTP 500"):
        await backend.complete(request())
    await backend.aclose()


async def test_a_501_is_not_retried(standin):
    # a server that does not implement the request (a plain web server at the base URL) answers the same every time
    server = standin(lambda r: {"x": 2})
    server.fail_next(501, count=10)
    backend = backend_for(server, max_retries=4)
    with pytest.raises(ConfigError, match="is not an OpenAI-compatible API: POST /chat/completions answered HTTP 501"):
        await backend.complete(request())
    assert server._next_failure() == 501 and len(server._failures) == 8  # one request sent, not five
    await backend.aclose()


def test_an_error_page_reads_as_one_line():
    from surfer.models.json_http import one_line

    page = ("<!DOCTYPE HTML>\n<html><head><title>Error response</title><style>p {}</style></head>\n<body>\n"
            "  <h1>Error response</h1>\n  <p>Message: Unsupported method (&#x27;POST&#x27;).</p>\n</body></html>\n")
    assert one_line(page) == "Error response Message: Unsupported method ('POST')."
    assert one_line("x" * 500).endswith("…") and len(one_line("x" * 500)) == 200


async def test_a_base_url_without_v1_is_named_by_preflight(standin):
    server = standin(lambda r: {"x": 2}, strict_paths=True)
    root = server.base_url.removesuffix("/v1")
    backend = OpenAICompatibleBackend(Endpoint(base_url=root, model=server.model))
    with pytest.raises(ConfigError, match=f"did you mean the base URL {root}/v1"):
        await backend.check()
    await backend.aclose()
    # a base URL with a path the server has no routes under (no /models there either, so no check fails): its
    # FastAPI 404 is no route, not "does not serve model"
    backend = OpenAICompatibleBackend(Endpoint(base_url=root + "/api", model=server.model))
    await backend.check()
    with pytest.raises(ConfigError, match=r"/api is not an OpenAI-compatible API: POST /chat/completions answered HTTP 404, "
                                          r"Not Found; check Agent\(base_url=\.\.\.\)"):
        await backend.complete(request())
    await backend.aclose()


async def test_unknown_model_is_reported_by_preflight_and_by_requests(standin):
    server = standin(lambda r: {"x": 2})
    backend = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model="no-such-model"))
    with pytest.raises(ModelNotFound, match="does not serve model 'no-such-model'.*standin-model"):
        await backend.check()
    with pytest.raises(ModelNotFound):
        await backend.complete(request())
    await backend.aclose()
    from surfer.models.refusals import named  # a hosted router lists hundreds: the first ten, and how many more

    assert named([f"m{i}" for i in range(12)]) == ", ".join(f"m{i}" for i in range(10)) + " and 2 more (GET /models lists them all)"
    assert named(["a", "b"]) == "a, b"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_server_down_is_an_immediate_clear_error():
    backend = OpenAICompatibleBackend(Endpoint(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", max_retries=0))
    started = time.monotonic()
    with pytest.raises(ModelServerUnreachable, match=r"cannot reach the model server.* set Agent\(base_url=\.\.\.\) or SURFER_BASE_URL\.$"):
        await backend.check()
    with pytest.raises(ModelServerUnreachable):
        await backend.complete(request())
    assert time.monotonic() - started < 10  # immediate: no long retry loop for a refused connection
    await backend.aclose()


async def test_a_proxy_in_the_environment_is_named_and_one_the_library_cannot_use_spares_the_urls_it_skips(standin, monkeypatch):
    """ALL_PROXY as desktop settings write it (socks://, which the HTTP library cannot read) failed making
    any client, a local server excluded by no_proxy included: a traceback. A proxy that does not answer
    was reported as the model server not running."""
    server = standin(lambda r: {"x": 1})
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALL_PROXY", "socks://127.0.0.1:9/")
    monkeypatch.setenv("no_proxy", "localhost,127.0.0.1")
    backend = backend_for(server)
    await backend.check()  # no_proxy covers the server: a direct connection
    assert json.loads((await backend.complete(request())).text) == {"x": 1}
    await backend.aclose()
    monkeypatch.delenv("no_proxy")
    with pytest.raises(ConfigError, match=r"^ALL_PROXY=socks://127.0.0.1:9/ is the proxy for .*cannot use it .*: fix ALL_PROXY, "
                                          r"or connect directly: no_proxy=127.0.0.1$"):
        await backend_for(server).check()
    monkeypatch.setenv("ALL_PROXY", f"http://127.0.0.1:{free_port()}")
    backend = OpenAICompatibleBackend(Endpoint(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", max_retries=0))
    with pytest.raises(ModelServerUnreachable, match=r"at http://127.0.0.1:\d+/v1 through the proxy http://127.0.0.1:\d+ \(ALL_PROXY; .*"
                                                     r"Is the proxy running\? Or connect directly: no_proxy=127.0.0.1$"):
        await backend.check()
    await backend.aclose()


async def test_timeouts_are_reported_as_unreachable(standin):
    server = standin(lambda r: {"x": 2}, delay=2.0)
    backend = backend_for(server, timeout=0.3, max_retries=0)
    with pytest.raises(ModelServerUnreachable, match="did not answer within"):
        await backend.complete(request())
    await backend.aclose()


async def test_a_server_that_stalls_or_trickles_mid_answer_is_cut_off_and_named():
    """A server that starts its answer and then stalls is named after `read_timeout`, not the whole
    call's timeout; one that trickles a byte at a time cannot outlast the call's timeout."""
    import asyncio

    async def answer(reader, writer, trickle: bool) -> None:  # type: ignore[no-untyped-def]
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"POST"):  # the probes of the request path: nothing here
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return writer.close()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 999\r\n\r\n{")
        try:
            while trickle:
                writer.write(b" ")
                await writer.drain()
                await asyncio.sleep(0.05)
            await reader.read()  # stalled: until the client hangs up
        except (ConnectionError, asyncio.CancelledError):
            pass
        writer.close()

    for trickle, options, said in ((False, {"timeout": 30, "read_timeout": 0.2}, "stalled: it sent nothing for 0.2 s"),
                                   (True, {"timeout": 0.3}, "did not answer within 0.3 s")):
        server = await asyncio.start_server(lambda r, w, t=trickle: answer(r, w, t), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        backend = OpenAICompatibleBackend(Endpoint(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=0, **options))
        started = time.monotonic()
        with pytest.raises(ModelServerUnreachable, match=f"127.0.0.1:{port}/v1 {said}" if not trickle else said):
            await asyncio.wait_for(backend.complete(request()), 5)
        assert time.monotonic() - started < 2
        await backend.aclose()
        server.close()


async def web_page_server(status: int = 200):  # type: ignore[no-untyped-def]
    """A server that answers every request with an app's web page (HTTP 200, HTML): a base URL that is no API. With
    another `status`, every request gets it with a page saying so, as a web app's router does (Express: HTTP 404,
    `Cannot POST /v1/chat/completions`)."""
    import asyncio

    async def page(reader, writer) -> None:  # type: ignore[no-untyped-def]
        head = await reader.readuntil(b"\r\n\r\n")
        body = b"<html><head><title>App</title></head><body><h1>Welcome to my app</h1></body></html>"
        if status != 200:
            body = b"<html><body><pre>Cannot %s</pre></body></html>" % b" ".join(head.split(b" ")[:2])
        writer.write(b"HTTP/1.1 %d Web\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\nConnection: close"
                     b"\r\n\r\n%s" % (status, len(body), body))
        await writer.drain()
        writer.close()

    return await asyncio.start_server(page, "127.0.0.1", 0)


async def test_a_web_page_or_an_untrusted_certificate_is_named_not_retried_as_a_server_down():
    """A base URL that answers web pages (HTTP 200, HTML) is not an API; an https server whose certificate is not
    trusted needs its CA: both are configuration (exit 2), each with what to do, not 'Is it running?'."""
    from pathlib import Path

    from surfer.apps.demo.static_site import StaticSite

    server = await web_page_server()
    backend = backend_for(type("S", (), {"base_url": f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", "model": "m"}))
    with pytest.raises(ConfigError, match=r"/v1 is not an OpenAI-compatible API: GET /models answered HTTP 200, a text/html "
                                          r"answer, not JSON: 'Welcome to my app'; check Agent\(base_url=\.\.\.\)"):
        await backend.check()
    await backend.aclose()
    server.close()
    # a web app's own 404 page for every path (no /models, so no check fails), or 405: not an API either, rather
    # than "does not serve model 'm'" (exit 2 for a model the server lacks, but the wrong advice) or a run's error
    for status in (404, 405):
        server = await web_page_server(status)
        backend = backend_for(type("S", (), {"base_url": f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", "model": "m"}))
        with pytest.raises(ConfigError, match=rf"/v1 is not an OpenAI-compatible API: (GET /models|POST /chat/completions) "
                                              rf"answered HTTP {status}, Cannot (GET|POST) /v1/(models|chat/completions); "
                                              r"check Agent\(base_url=\.\.\.\)"):
            await backend.check()
            await backend.complete(request())
        await backend.aclose()
        server.close()
    data = Path(__file__).with_name("data")
    with StaticSite(Path(__file__).with_name("pages"), tls=(data / "self-signed-test-only.crt", data / "self-signed-test-only.key")) as site:
        backend = OpenAICompatibleBackend(Endpoint(base_url=site.url("v1"), model="m"))
        with pytest.raises(ConfigError, match=r"its TLS certificate is not trusted here \(.*certificate verify failed.*SSL_CERT_FILE="):
            await backend.check()
        await backend.aclose()


@pytest.mark.parametrize("typed", [False, True], ids=["plain-json", "openai-sdk"])
async def test_plain_json_and_the_sdk_path_agree(standin, typed):
    """Requests go out as plain JSON without the openai SDK (json_http.py); the SDK's typed
    `create` stays as the benchmarks' previous path: same body on the wire, same answers, same errors."""
    server = standin(lambda r: {"x": 5}, reject_response_format=True)
    backend = backend_for(server)
    backend.typed_requests = typed
    await backend.check()
    completion = await backend.complete(request("policy"))
    assert completion.text == '{"x": 5}' and completion.structured == "structured_outputs"
    assert completion.usage.prompt_tokens > 0 and completion.model == server.model
    body = server.requests[-1].body
    assert body["chat_template_kwargs"] == {"thinking": False} and "extra_body" not in body
    assert server.requests[-1].images == [b"\xff\xd8fakejpeg"]
    server.fail_next(401)  # no key given: the message says how to give one, in the caller's words (Python here)
    with pytest.raises(ConfigError, match=r"wants an API key \(HTTP 401: .*injected failure 401\); give it with Agent\(api_key=\.\.\.\) or SURFER_API_KEY"):
        await backend.complete(request())
    server.fail_next(401)
    with calling_from_cli(), pytest.raises(ConfigError, match=r"give it with --api-key or SURFER_API_KEY"):
        await backend.complete(request())
    await backend.aclose()
    keyed = backend_for(server, api_key="sk-wrong")
    keyed.typed_requests = typed
    server.fail_next(403)
    with pytest.raises(ConfigError, match=r"refused the API key given \(HTTP 403: .*injected failure 403\); check Agent\(api_key=\.\.\.\)"):
        await keyed.complete(request())
    await keyed.aclose()
    wrong = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model="no-such-model"))
    wrong.typed_requests = typed
    with pytest.raises(ModelNotFound):
        await wrong.complete(request())
    await wrong.aclose()


async def test_a_backend_serves_every_event_loop_that_calls_it_and_closes_only_its_own(standin):
    """An agent outlives event loops: `run_sync` closes its backends after each run and may run again,
    a script calls `asyncio.run(agent.run(...))` twice, threads each run_sync on one agent. The second run
    met a closed client ('Cannot send a request, as the client has been closed') or the first loop's
    ('Event loop is closed'); a thread's close closed the others' connections."""
    import asyncio
    import threading

    server = standin(lambda r: {"x": 7})
    backend = backend_for(server)
    await backend.complete(request())

    def in_another_loop(close: bool) -> str:
        async def one() -> str:
            text = (await backend.complete(request())).text
            if close:
                await backend.aclose()
            return text

        return asyncio.run(one())

    for close in (True, True, False, False):  # closed after each run (run_sync), then left open to a loop now gone
        assert await asyncio.to_thread(in_another_loop, close) == '{"x": 7}'
    assert (await backend.complete(request())).text == '{"x": 7}'  # this loop's connections, open all along
    texts: list[str] = []
    threads = [threading.Thread(target=lambda: texts.append(in_another_loop(True))) for _ in range(3)]
    for thread in threads:
        thread.start()
    await asyncio.to_thread(lambda: [thread.join() for thread in threads])
    assert texts == ['{"x": 7}'] * 3
    await backend.aclose()
    assert (await backend.complete(request())).text == '{"x": 7}'  # closed: a later call opens new connections
    await backend.aclose()


async def test_the_clients_of_a_process_read_the_certificates_once(standin, monkeypatch):
    """Each backend has a connection pool of its own (a batch: one per role of every session); the TLS
    context each would build from the certificate store is built once in a process and shared."""
    import os
    import ssl

    from surfer.models import json_http

    made: list[str] = []
    build = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: made.append(k.get("cafile")) or build(*a, **k))
    monkeypatch.setenv("SSL_CERT_FILE", os.environ.get("SSL_CERT_FILE") or ssl.get_default_verify_paths().openssl_cafile)
    monkeypatch.setattr(json_http, "_tls", None, raising=False)  # (as in a new process)
    server = standin(lambda r: {"x": 5})
    backends = [backend_for(server) for _ in range(3)]
    for backend in backends:
        await backend.check()
        await backend.aclose()
    assert made == [os.environ["SSL_CERT_FILE"]]  # the library's own default, from the store the environment names


def images_request(*images: bytes) -> ModelRequest:
    content = (*(ImagePart(data, "image/jpeg") for data in images), TextPart("What next?"))
    return ModelRequest(messages=(Message.text("system", "sys"), Message("user", content)), schema_name="policy", schema=SCHEMA)


def image_parts_of(body: dict) -> list[dict]:  # type: ignore[type-arg]
    return [p for m in body["messages"] if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image_url"]


async def test_image_refs_send_each_screenshot_once_then_name_it(standin):
    """vLLM's uuid protocol: data and uuid the first time, the uuid alone after a request that succeeded."""
    import hashlib

    server = standin(lambda r: {"x": 1})
    backend = backend_for(server, image_refs=True)
    first, second, third = b"\xff\xd8one", b"\xff\xd8two", b"\xff\xd8three"
    await backend.complete(images_request(first, second))
    parts = image_parts_of(server.requests[0].body)
    assert [p["uuid"] for p in parts] == [hashlib.sha256(d).hexdigest() for d in (first, second)]
    assert all(p["image_url"]["url"].startswith("data:image/jpeg;base64,") for p in parts)
    await backend.complete(images_request(first, second, third))
    parts = image_parts_of(server.requests[1].body)
    assert [p["image_url"] for p in parts[:2]] == [None, None] and parts[2]["image_url"]["url"].startswith("data:")
    assert server.requests[1].images == [first, second, third]  # the server read the named ones from its cache
    assert (server.mm_queries, server.mm_hits) == (5, 2)
    plain = backend_for(server)  # off by default: no uuid, every image in full
    await plain.complete(images_request(first))
    assert "uuid" not in image_parts_of(server.requests[2].body)[0]
    await backend.aclose()
    await plain.aclose()


async def test_a_server_that_no_longer_holds_an_image_gets_it_again(standin):
    """Evicted (a cache of one image here) or restarted: vLLM answers 400 "Cache miss ...", and the call
    sends that request's images again in full, once, and goes on."""
    server = standin(lambda r: {"x": 2}, image_cache=1)
    backend = backend_for(server, image_refs=True)
    first, second = b"\xff\xd8one", b"\xff\xd8two"
    await backend.complete(images_request(first, second))  # the server keeps only the second
    completion = await backend.complete(images_request(first, second))
    assert completion.text == '{"x": 2}'
    assert len(server.requests) == 2  # the refused attempt is not answered
    assert all(p["image_url"] is not None for p in image_parts_of(server.requests[1].body))
    assert server.requests[1].images == [first, second]
    await backend.aclose()


def test_a_miss_halves_the_images_trusted_to_the_server_and_successes_grow_them_back() -> None:
    from surfer.models.image_refs import LEAST_TRUSTED, ImageRefs

    refs = ImageRefs(limit=1000)
    refs.took([f"u{k}" for k in range(300)])  # limit 1001, all 300 held
    assert refs.held("u0") and refs.held("u299")
    refs.missed(["u299"])  # 299 left: trust half of them, the most recent
    assert refs.limit == 149 and refs.held("u298") and not refs.held("u0") and not refs.held("u299")
    refs.took(["new"])
    assert refs.limit == 150 and refs.held("new")
    for _ in range(10):
        refs.missed([])
    assert refs.limit == LEAST_TRUSTED


def _message_reply(message: dict, **fields) -> RawReply:  # type: ignore[type-arg]
    return RawReply({"id": "c", "object": "chat.completion", "model": "standin-model",
                     "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}], **fields})


def _streamed(*deltas: dict, usage: dict | None = None) -> RawReply:  # type: ignore[type-arg]
    chunks = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks[-1]["choices"][0]["finish_reason"] = "length"
    if usage:
        chunks.append({"choices": [], "usage": usage})
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return RawReply(body, headers={"Content-Type": "text/event-stream"})


async def test_a_reply_is_read_wherever_the_server_put_its_text(standin):
    """Servers put the answer's text in other places than a string `content`, and count usage
    in part: each reply here is understood, its tokens counted from what the server gave."""
    replies = [
        _message_reply({"content": [{"type": "text", "text": '{"x": '}, {"type": "text", "text": "1}"}]},
                       usage={"prompt_tokens": 90, "total_tokens": 100}),   # a list of parts; completion = total - prompt
        _message_reply({"content": None, "tool_calls": [{"id": "t", "type": "function",
                        "function": {"name": "localizer", "arguments": '{"x": 2}'}}]}),   # a tool call
        _message_reply({"content": "", "reasoning_content": '{"x": 3}'}),   # a reasoning parser that kept it all
        _message_reply({"content": '{"x": 4}', "reasoning_content": "not {this}"}, usage={"prompt_tokens": None}),
        _streamed({"role": "assistant", "content": '{"x"'}, {"content": ": 5}"}, usage={"prompt_tokens": 7, "completion_tokens": 3}),
    ]
    server = standin(lambda r: replies[len(server.requests) - 1])
    backend = backend_for(server)
    got = [await backend.complete(request()) for _ in replies]
    assert [c.text for c in got] == ['{"x": 1}', '{"x": 2}', '{"x": 3}', '{"x": 4}', '{"x": 5}']
    assert [(c.usage.prompt_tokens, c.usage.completion_tokens) for c in got] == [(90, 10), (0, 0), (0, 0), (0, 0), (7, 3)]
    assert [c.finish_reason for c in got] == ["stop", "stop", "stop", "stop", "length"]
    await backend.aclose()


async def test_a_reply_cut_at_the_token_limit_says_so(standin):
    """finish_reason "length": the feedback and the step's reason say the reply was cut off at
    max_tokens (not that it "is not JSON", which sends a user looking at the model)."""
    from surfer.agent.roles import RoleClient, StepFailed
    from surfer.models.profiles import get_profile
    from surfer.models.schema import parse_json_object

    server = standin(lambda r: RawReply({"choices": [{"index": 0, "finish_reason": "length",
                                                      "message": {"role": "assistant", "content": '{"x": 1'}}]}))
    client = RoleClient("localizer", backend_for(server), get_profile("openai"), max_tokens=16, output_retries=1)
    calls: list = []  # type: ignore[type-arg]

    async def sink(call) -> None:  # type: ignore[no-untyped-def]
        calls.append(call)

    with pytest.raises(StepFailed, match=r"cut off at the token limit \(max_tokens 16\)"):
        await client.ask([Message.text("user", "where?")], SCHEMA, parse_json_object, sink)
    assert len(calls) == 2 and "cut off at the token limit" in calls[0].error
    assert "cut off at the token limit (max_tokens 16)" in server.requests[1].last_text  # the feedback the model got
    await client.backend.aclose()


def test_retry_after_reads_seconds_and_http_dates():
    from email.utils import formatdate

    from surfer.models.json_http import retry_after

    assert retry_after("7") == 7.0 and retry_after(" 0.5 ") == 0.5 and retry_after(None) is None
    assert retry_after(formatdate(1_000_030, usegmt=True), now=1_000_000) == 30.0
    assert retry_after(formatdate(1_000_000, usegmt=True), now=1_000_030) == 0.0 and retry_after("soon") is None


async def test_a_429_waits_as_long_as_retry_after_asks(standin, monkeypatch):
    """Retried after the server's Retry-After (not the shorter back-off); one longer than a minute
    (a spent quota) is not waited for."""
    monkeypatch.setattr(OpenAICompatibleBackend, "_backoff", staticmethod(lambda attempt, jitter=True: 0.01))
    seen: list[float] = []

    def answer(r):  # type: ignore[no-untyped-def]
        seen.append(time.monotonic())
        if len(seen) == 1:
            return RawReply({"error": {"message": "rate limited"}}, 429, {"Retry-After": "0.3"})
        if len(seen) == 2:
            return {"x": 1}
        return RawReply({"error": {"message": "quota spent"}}, 429, {"Retry-After": "3600"})

    server = standin(answer)
    backend = backend_for(server)
    assert (await backend.complete(request())).text == '{"x": 1}'
    assert seen[1] - seen[0] >= 0.3
    with pytest.raises(ModelRequestError, match="HTTP 429: quota spent"):
        await backend.complete(request())
    assert len(seen) == 3  # not retried
    await backend.aclose()


async def test_a_server_still_loading_at_the_start_is_unreachable_with_its_message(standin):
    # 503 at /models (a server loading its model, a proxy without its server): exit 3, as a server not there
    server = standin(lambda r: {"x": 1})
    server.models_status = 503
    backend = backend_for(server)
    with pytest.raises(ModelServerUnreachable, match=r"is not ready: /models answered HTTP 503 \(HTTP 503 from the stand-in\)"):
        await backend.check()
    await backend.aclose()


async def test_error_bodies_of_other_servers_say_their_message(standin):
    replies = [RawReply({"object": "error", "message": "image too large", "type": "BadRequestError", "code": 400}, 400),
               RawReply({"error": {"message": "upstream overloaded", "code": 502}})]   # a proxy's HTTP 200 with an error
    server = standin(lambda r: replies[len(server.requests) - 1])
    backend = backend_for(server, max_retries=0)
    with pytest.raises(ModelRequestError, match=r"answered HTTP 400: image too large$"):
        await backend.complete(request())
    with pytest.raises(ModelRequestError, match=r"answered without choices: upstream overloaded$"):
        await backend.complete(request())
    await backend.aclose()
