"""A local OpenAI-compatible stand-in server for tests and benchmarks: the
real HTTP path runs end to end, with answers decided by Python callables.

    def answer(request: ChatRequest) -> dict | str:
        if request.role == "localizer":
            return {"x": 500, "y": 500}
        ...
    with StandInServer(answer) as server:
        Agent(base_url=server.base_url, model=server.model, ...)

It serves `GET /v1/models` and `POST /v1/chat/completions`, can fail the
next N requests with a status code, delay answers, hang (accept requests and
never answer them, like a wedged server), or reject `response_format` the way
servers without structured outputs do.

With `max_model_len=N` it answers a longer prompt (256 tokens an image, 4
characters a token) with vLLM's HTTP 400. With `kv_capacity=N` it also behaves like a server with a KV cache of N
tokens and reports it at `GET /metrics` in vLLM's names: a request holds its
prompt tokens while it is answered; one that does not fit waits, and when it
gets in it is counted as preempted and takes twice `delay` (the recompute of
a thrashing cache), so too many sessions lower the answers per second. It
then also keeps a prefix cache the way vLLM does (chained hashes of whole
blocks: 64 characters of text, or one image), without eviction, and counts
prompt, generated and prefix-cache tokens in vLLM's counter names (and empties
that cache at `POST /reset_prefix_cache`, as vLLM does in its dev mode).
A responder may return a `RawReply` (a body, status and headers sent as they are: another server's
shape of answer, a Retry-After); `models_status` makes `GET /v1/models` answer that status (a server
still loading). `strict_paths=True` routes the OpenAI paths only under /v1, as vLLM does (a client missing /v1 gets a 404).
`model_dir=DIR` (a model's tokenizer) adds SGLang's `/generate`, ids in (standin_generate.py).
`engine="sglang"` plays SGLang instead: its /metrics names, `POST /flush_cache`
and `GET /server_info` (surfer/models/standin_pages.py); `settings` is the
engine's own account of how it was started (SGLang's server arguments, vLLM's
cache configuration labels). `lora="on"`: runtime LoRA adapters like vLLM's (standin_adapters.py).
A request for `return_token_ids` / `logprobs` gets vLLM's token fields from `tokenizer` (default: a
`StandInTokenizer` of `template`; standin_tokens.py); `token_fields=False` (SGLang's default): without them.
`data_parallel=N` plays an engine with N data-parallel ranks behind this one URL: vLLM's /metrics
with a series per engine, SGLang's /server_info with `dp_size` (standin_pages.py); each request
records the rank it asked for (`ChatRequest.rank`; /generate bodies keep `routed_dp_rank`). GET paths in
`hang_paths` are accepted and never answered, like a wedged server's.
`prefix_capacity=N` bounds that cache to N tokens, least recently used blocks
evicted first, and `token_seconds` makes each prompt token the cache did not
hold cost that long on one shared "GPU" (prefills take turns): with more
sessions than the cache keeps, every request recomputes its history and the
answers per second fall, as on a real server in the long-history regime.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union

from surfer.models.prefix_cache import PrefixCache
from surfer.models.standin_adapters import StandInAdapters
from surfer.models.standin_generate import GenerateRoutes
from surfer.models.standin_pages import ENGINES, metrics_page, server_info
from surfer.models.standin_request import ChatRequest, ImageNotHeld, parse_chat_request  # noqa: F401  (also imported from here)
from surfer.models.standin_tokenizer import ChatTokenizer, StandInTokenizer
from surfer.models.standin_tokens import chat_completion



@dataclass
class RawReply:
    """An answer sent as it is: `body` (a dict as JSON, a str as text), `status` and `headers`
    (a Retry-After; `Content-Type: text/event-stream` for a streamed answer)."""

    body: Union[str, dict[str, Any]]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


Answer = Union[str, dict[str, Any], RawReply]


class QuietServer(ThreadingHTTPServer):
    """A threading HTTP server that says nothing when a client goes away mid-reply (a killed
    browser, a stopped batch): that is the client's business, not a server error. Stopped
    (shutdown()), it is gone within `poll_seconds`."""

    daemon_threads = True
    poll_seconds = 0.05  # how soon serve_forever sees a shutdown(): stop() waits up to this (the default: 0.5 s)

    def serve_forever(self, poll_interval: float | None = None) -> None:
        super().serve_forever(self.poll_seconds if poll_interval is None else poll_interval)

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Server(QuietServer):
    request_queue_size = 1024  # hundreds of sessions connect at once; the default backlog of 5 resets them

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.connections: set[Any] = set()
        self._connections_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Reset the open (keep-alive) connections, as a server process that exits does."""
        import socket

        with self._connections_lock:
            live, self.connections = list(self.connections), set()
        for sock in live:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class StandInServer:
    def __init__(
        self,
        respond: Callable[[ChatRequest], Answer],
        *,
        model: str = "standin-model",
        host: str = "127.0.0.1",
        port: int = 0,
        delay: float = 0.0,
        reject_response_format: bool = False,
        hang_after: int | None = None,
        kv_capacity: int | None = None,
        image_cache: int | None = 4096,
        prefix_capacity: int | None = None,
        token_seconds: float = 0.0,
        max_model_len: int | None = None,
        engine: str = "vllm",
        settings: dict[str, Any] | None = None,
        lora: str = "off",
        token_fields: bool | None = None,
        tokenizer: ChatTokenizer | None = None,
        template: str = "chatml",
        model_dir: str | None = None,
        strict_paths: bool = False,
        data_parallel: int = 1,
    ) -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        self.engine = engine  # whose /metrics names, cache-reset route and settings page it shows
        self.settings = settings  # the engine's own account of its settings (standin_pages)
        self.respond = respond
        self.token_fields = engine == "vllm" if token_fields is None else token_fields  # (SGLang's chat path: none)
        self.tokenizer: ChatTokenizer = tokenizer or StandInTokenizer(template)
        self.max_model_len = max_model_len  # longer prompts get vLLM's HTTP 400
        self.model = model
        self.models_status: int | None = None  # GET /v1/models answers this status (e.g. 503 while loading)
        self.data_parallel = data_parallel  # ranks behind this URL (their series, dp_size)
        self.hang_paths: set[str] = set()  # GET paths never answered
        self.strict_paths = strict_paths  # only /v1/models and /v1/chat/completions, as vLLM routes them (404 elsewhere)
        self.adapters = StandInAdapters(lora, engine, model)  # runtime LoRA adapters (`lora`: off, on, not-enabled)
        self.delay = delay
        self.reject_response_format = reject_response_format
        self.requests: list[ChatRequest] = []
        self._failures: list[int] = []
        # Chat requests answered before the server hangs (None: never hangs).
        self.hang_after = hang_after
        self.hung = 0
        self.kv_capacity = kv_capacity
        self.kv_used = self.running = self.waiting = self.preemptions = 0
        self.prompt_tokens = self.generation_tokens = self.cache_queries = self.cache_hits = 0
        self.prefix_cache = PrefixCache(prefix_capacity)
        self.token_seconds = token_seconds
        self._gpu = threading.Lock()  # prefills take turns: `token_seconds` per computed token
        # vLLM's multimodal processor cache, as far as a client sees it: images by uuid (the most recent
        # `image_cache`; None: no uuids taken, like a server that is not vLLM), and its /metrics counters
        self.image_cache = image_cache
        self.held_images: OrderedDict[str, str] = OrderedDict()
        self.mm_queries = self.mm_hits = 0
        self._kv = threading.Condition()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.generate = None if model_dir is None else GenerateRoutes(self, model_dir, parse_chat_request)
        self._httpd = _Server((host, port), self._handler())
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def fail_next(self, status: int, count: int = 1) -> None:
        """Answer the next `count` chat requests with HTTP `status`."""
        with self._lock:
            self._failures.extend([status] * count)

    def _should_hang(self) -> bool:
        with self._lock:
            if self.hang_after is None or len(self.requests) < self.hang_after:
                return False
            self.hung += 1
            return True

    def _parse(self, body: dict[str, Any]) -> ChatRequest:
        """parse_chat_request against the images this server holds (an LRU of `image_cache` uuids)."""
        if self.image_cache is None:
            return parse_chat_request(body)
        with self._lock:
            request = parse_chat_request(body, self.held_images)
            self.mm_queries += len(request.image_uuids)
            self.mm_hits += sum(was_held for _, was_held in request.image_uuids)
            for uuid, _ in request.image_uuids:
                self.held_images.move_to_end(uuid)
            while len(self.held_images) > self.image_cache:
                self.held_images.popitem(last=False)
            return request

    def start(self) -> "StandInServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="standin", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases hung requests
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.drop_connections()  # gone for every client, not only new ones

    def __enter__(self) -> "StandInServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _admit(self, tokens: int) -> float:
        """Hold `tokens` of the KV cache (waiting while they do not fit); the extra seconds owed."""
        if self.kv_capacity is None:
            return 0.0
        with self._kv:
            waited = False
            self.waiting += 1
            while self.running and self.kv_used + tokens > self.kv_capacity and not self._stopping.is_set():
                waited = True
                self._kv.wait(0.5)
            self.waiting -= 1
            self.running += 1
            self.kv_used += tokens
            self.preemptions += waited
        return self.delay if waited else 0.0

    def _release(self, tokens: int) -> None:
        if self.kv_capacity is None:
            return
        with self._kv:
            self.running -= 1
            self.kv_used -= tokens
            self._kv.notify_all()

    def metrics_text(self) -> str:
        with self._kv:
            counts = {"kv_usage": min(1.0, self.kv_used / self.kv_capacity) if self.kv_capacity else 0.0,
                      "running": self.running, "waiting": self.waiting, "preemptions": self.preemptions,
                      "prompt": self.prompt_tokens, "cached": self.cache_hits, "generated": self.generation_tokens,
                      "cache_queries": self.cache_queries, "mm_queries": self.mm_queries, "mm_hits": self.mm_hits}
        return metrics_page(self.engine, self.model, counts, self.settings, self.data_parallel)

    def _count_prompt(self, body: dict[str, Any], prompt_tokens: int) -> int:
        """Prefix-cache accounting of one request (only with a KV capacity); the prompt tokens to compute."""
        if self.kv_capacity is None:
            return prompt_tokens
        with self._kv:
            hits = min(self.prefix_cache.take(body), prompt_tokens)
            self.prompt_tokens += prompt_tokens
            self.cache_queries += prompt_tokens
            self.cache_hits += hits
        return prompt_tokens - hits

    def _prefill(self, computed: int) -> None:
        if self.token_seconds and computed:
            with self._gpu:
                time.sleep(self.token_seconds * computed)

    def _next_failure(self) -> int | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None

    def completion_body(self, request: ChatRequest, content: str, prompt_tokens: int, cached: int, model: str = "") -> dict[str, Any]:
        """The chat completion's JSON (`model`: the name that served it), with vLLM's token fields where the
        request asks for them (standin_tokens.py)."""
        return chat_completion(request.body, request.image_urls, content, f"chatcmpl-{len(self.requests)}", model or self.model,
                               prompt_tokens, cached if self.kv_capacity is not None else None,
                               self.tokenizer if self.token_fields else None)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: with Nagle's algorithm the
            # body waits for the client's delayed ACK (40 ms per answer).
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, payload: dict[str, Any] | str, kind: str = "", headers: dict[str, str] | None = None) -> None:
                """JSON; a str as is (`kind`: its content type; plain text by default, as vLLM answers a load)."""
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", kind or ("text/plain; charset=utf-8" if isinstance(payload, str) else "application/json"))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _unrouted(self) -> bool:
                """With strict_paths, an OpenAI route outside /v1 gets FastAPI's 404, as from vLLM."""
                path = self.path.split("?")[0].rstrip("/")
                if server.strict_paths and path.endswith(("/models", "/chat/completions")) and not path.startswith("/v1/"):
                    self._send(404, {"detail": "Not Found"})
                    return True
                return False

            def do_GET(self) -> None:  # noqa: N802
                if self._unrouted():
                    return
                if self.path.rstrip("/") in server.hang_paths:
                    server._stopping.wait()  # accepted, never answered
                    return
                if self.path.rstrip("/") == "/metrics" and (server.kv_capacity is not None or server.data_parallel > 1):
                    self._send(200, server.metrics_text(), "text/plain; version=0.0.4")
                elif self.path.rstrip("/").endswith("/models") and server.models_status is not None:
                    self._send(server.models_status, {"error": {"message": f"HTTP {server.models_status} from the stand-in"}})
                elif self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [
                        {"id": server.model, "object": "model", "owned_by": server.engine, "max_model_len": server.max_model_len},
                        *server.adapters.cards()]})
                elif self.path.rstrip("/") == "/get_model_info" and server.generate is not None:
                    self._send(200, server.generate.model_info())
                elif self.path.rstrip("/") == "/server_info" and server.engine == "sglang":
                    self._send(200, server_info(server.model, server.settings, server.max_model_len, server.data_parallel), "application/json")
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self._unrouted():
                    return
                resets = ("/flush_cache",) if server.engine == "sglang" else ("/reset_prefix_cache", "/reset_mm_cache")
                if self.path.split("?")[0].rstrip("/") in resets and server.kv_capacity is not None:
                    with server._kv:  # vLLM's dev-mode endpoints, SGLang's flush: the next run starts from an empty cache
                        server.prefix_cache.clear()
                    with server._lock:
                        server.held_images.clear()
                    self._send(200, {})
                    return
                verb = server.adapters.route(self.path)
                if verb is not None:
                    return self._send(*server.adapters.handle(verb, body))
                if self.path.rstrip("/") == "/generate" and server.generate is not None:
                    return self._send(*server.generate.answer(body, self.headers.get("X-Surfer-Session"),
                                                              self.headers.get("X-Data-Parallel-Rank")))
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                served, refused = server.adapters.served_model(body)  # the base model, or a loaded adapter
                if refused is not None:
                    return self._send(*refused)
                if server.reject_response_format and "response_format" in body:
                    self._send(400, {"error": {"message": "response_format is not supported by this server"}})
                    return
                failure = server._next_failure()
                if failure is not None:
                    self._send(failure, {"error": {"message": f"injected failure {failure}"}})
                    return
                if server._should_hang():
                    server._stopping.wait()  # accepted, never answered
                    return
                try:
                    request = server._parse(body)
                except ImageNotHeld as exc:
                    self._send(400, {"error": {"message": str(exc), "type": "BadRequestError"}})
                    return
                request.session = self.headers.get("X-Surfer-Session")
                request.rank = self.headers.get("X-Data-Parallel-Rank")
                with server._lock:
                    server.requests.append(request)
                prompt_tokens = len(request.text) // 4 + 256 * len(request.image_urls)
                if server.max_model_len is not None and prompt_tokens > server.max_model_len:
                    self._send(400, {"error": {"type": "BadRequestError", "message": (
                        f"Input length ({prompt_tokens}) exceeds model's maximum context length ({server.max_model_len}).")}})
                    return
                computed = server._count_prompt(body, prompt_tokens)
                extra = server._admit(prompt_tokens)
                try:
                    server._prefill(computed)
                    if server.delay or extra:
                        time.sleep(server.delay + extra)
                    answer = server.respond(request)
                except Exception as exc:  # noqa: BLE001 - a broken responder is a 500, like a broken server
                    self._send(500, {"error": {"message": f"responder failed: {exc!r}"}})
                    return
                finally:
                    server._release(prompt_tokens)
                if isinstance(answer, RawReply):
                    headers = {k: v for k, v in answer.headers.items() if k.lower() != "content-type"}
                    kind = next((v for k, v in answer.headers.items() if k.lower() == "content-type"), "")
                    return self._send(answer.status, answer.body, kind, headers)
                content = answer if isinstance(answer, str) else json.dumps(answer)
                if server.kv_capacity is not None:
                    with server._kv:
                        server.generation_tokens += max(1, len(content) // 4)
                self._send(200, server.completion_body(request, content, prompt_tokens, prompt_tokens - computed, served))

        return Handler


def _serve_in_child(
    factory: Callable[..., Callable[[ChatRequest], Answer]], args: tuple[Any, ...], options: dict[str, Any], ready: Any, stop: Any,
) -> None:
    with StandInServer(factory(*args), **options) as server:
        ready.send((server.base_url, server.model))
        stop.wait()


class StandInProcess:
    """A `StandInServer` in a child process, so that answering does not compete
    with the harness for the GIL (benchmarks). The responder is built there by
    `factory(*args)`: both must be picklable (a module-level class or function).
    `options` are StandInServer's keyword arguments (`delay=0.3`, ...).

        with StandInProcess(MyResponder, centres) as server:
            Agent(base_url=server.base_url, model=server.model)
    """

    def __init__(
        self, factory: Callable[..., Callable[[ChatRequest], Answer]], *args: Any,
        options: dict[str, Any] | None = None, start_timeout: float = 60,
    ) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self._ready, child = ctx.Pipe()
        self._stop = ctx.Event()
        self._process = ctx.Process(
            target=_serve_in_child, args=(factory, args, dict(options or {}), child, self._stop), daemon=True,
        )
        self.start_timeout = start_timeout
        self.base_url = self.model = ""

    def __enter__(self) -> "StandInProcess":
        self._process.start()
        if not self._ready.poll(self.start_timeout):
            self._process.kill()
            raise RuntimeError("the stand-in server process did not start")
        self.base_url, self.model = self._ready.recv()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()
