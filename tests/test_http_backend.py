"""The OpenAI-compatible client over real HTTP to the stand-in server."""

from __future__ import annotations

import socket
import time

import pytest

from surfer.core.errors import ConfigError, ModelNotFound, ModelRequestError, ModelServerUnreachable
from surfer.models.backend import ImagePart, Message, ModelRequest, TextPart
from surfer.models.http import Endpoint, OpenAICompatibleBackend

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


async def test_transient_errors_are_retried_with_backoff(standin):
    server = standin(lambda r: {"x": 2})
    server.fail_next(503, count=2)
    backend = backend_for(server, max_retries=3)
    completion = await backend.complete(request())
    assert completion.text == '{"x": 2}'
    await backend.aclose()


async def test_persistent_server_errors_end_with_a_clear_error(standin):
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
    with pytest.raises(ModelRequestError, match="HTTP 501"):
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


async def test_unknown_model_is_reported_by_preflight_and_by_requests(standin):
    server = standin(lambda r: {"x": 2})
    backend = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model="no-such-model"))
    with pytest.raises(ModelNotFound, match="does not serve model 'no-such-model'.*standin-model"):
        await backend.check()
    with pytest.raises(ModelNotFound):
        await backend.complete(request())
    await backend.aclose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_server_down_is_an_immediate_clear_error():
    backend = OpenAICompatibleBackend(Endpoint(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", max_retries=0))
    started = time.monotonic()
    with pytest.raises(ModelServerUnreachable, match="cannot reach the model server"):
        await backend.check()
    with pytest.raises(ModelServerUnreachable):
        await backend.complete(request())
    assert time.monotonic() - started < 10  # immediate: no long retry loop for a refused connection
    await backend.aclose()


async def test_timeouts_are_reported_as_unreachable(standin):
    server = standin(lambda r: {"x": 2}, delay=2.0)
    backend = backend_for(server, timeout=0.3, max_retries=0)
    with pytest.raises(ModelServerUnreachable, match="did not answer within"):
        await backend.complete(request())
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
    server.fail_next(401)
    with pytest.raises(ConfigError, match="refused the API key"):
        await backend.complete(request())
    await backend.aclose()
    wrong = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model="no-such-model"))
    wrong.typed_requests = typed
    with pytest.raises(ModelNotFound):
        await wrong.complete(request())
    await wrong.aclose()


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
