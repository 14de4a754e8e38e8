"""OpenAI-compatible chat completions over HTTP (vLLM, SGLang, any compatible
server). The endpoint (URL, key, model) is configuration, not a class.

Structured outputs: `response_format` of type `json_schema`, named after the
role. A server that rejects that parameter (HTTP 400 naming it) is retried
with vLLM's `structured_outputs` extra body, then with the schema in the
prompt only; the working mode is remembered per backend.

Policy: a backend made with `follows_policy` (the roles on the shared model) sends each call to
the policy of the run's session, when it has one (affinity.py, adapters.py): the request's `model`
is the adapter's name (SGLang: also its `lora_path`, which is what picks the adapter there), and
the completion records the policy's version.

With `record_tokens` on the endpoint, every request asks for its token ids and
logprobs and the completion carries them (`Completion.tokens`, capture.py);
`check_tokens` probes the server for them before a run starts.

A server with several data-parallel ranks is found out when the backend is checked; each session's
requests then carry the rank it keeps there (data_parallel.py), unless the endpoint's `session_rank` is off.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from surfer.core.deadline import pause_deadline, time_left
from surfer.core.errors import ConfigError, ContextTooLong, ModelNotFound, ModelRequestError, ModelServerUnreachable
from surfer.core.surface import setting

from .adapters import PolicyRef, version_of
from .affinity import current_session, session_policy
from .backend import Completion, ImagePart, Message, ModelBackend, ModelRequest, Usage
from .capture import NEEDS, TOKEN_PARAMS, missing_fields, probe_body, read_tokens, sampling_of
from .connections import Connections
from .data_parallel import count_ranks_at
from .endpoint import DEFAULT_REQUEST_TIMEOUT, Endpoint, shown_url
from .image_refs import ImageRefs, image_uuid, is_cache_miss, refs_for
from .json_http import ConnectFailed, HttpStatusError, TimedOut, answers, environment_proxy
from .outage import answered_before, server_watch
from .refusals import (certificate_refused, context_too_long, key_refused, named, no_api_here, not_an_api,
                       rejects_structured_param, server_gone)
from .replies import reply_text, usage_of
from .tokens_in import PROBE_TIMEOUT, RequestPath, choose_path

__all__ = ["DEFAULT_REQUEST_TIMEOUT", "Endpoint", "OpenAICompatibleBackend", "to_openai_messages"]

STRUCTURED_MODES = ("response_format", "structured_outputs", "none")
MIN_REQUEST_TIMEOUT = 0.05
MAX_RETRY_AFTER = 60.0  # a Retry-After longer than this (a spent quota) is not waited for: the call fails, saying it


class ServerGone(ModelServerUnreachable):
    """The connection was refused or reset: the server is not there (as against not answering in time)."""


def to_openai_messages(messages: tuple[Message, ...], refs: ImageRefs | None = None) -> list[dict[str, Any]]:
    """Chat messages as JSON; with `refs` (image_refs.py), each image carries its uuid, and an image
    the server already took is sent as the uuid alone."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.image_count == 0:
            out.append({"role": message.role, "content": "".join(p.text for p in message.content)})  # type: ignore[union-attr]
            continue
        parts: list[dict[str, Any]] = []
        for part in message.content:
            if not isinstance(part, ImagePart):
                parts.append({"type": "text", "text": part.text})
            elif refs is None:
                parts.append({"type": "image_url", "image_url": {"url": part.data_url()}})
            else:
                uuid = image_uuid(part)
                parts.append({"type": "image_url", "image_url": None if refs.held(uuid) else {"url": part.data_url()}, "uuid": uuid})
        out.append({"role": message.role, "content": parts})
    return out


def _image_uuids(request: ModelRequest) -> list[str]:
    return [image_uuid(p) for m in request.messages for p in m.content if isinstance(p, ImagePart)]


def _schema_in_prompt(messages: list[dict[str, Any]], schema: dict[str, Any]) -> list[dict[str, Any]]:
    note = "Reply with one JSON object that follows this JSON schema, and nothing else:\n" + json.dumps(schema)
    return [*messages, {"role": "user", "content": note}]


class OpenAICompatibleBackend(ModelBackend):
    def __init__(self, endpoint: Endpoint, *, follows_policy: bool = False,
                 on_generate: Callable[[ModelRequest, dict[str, Any]], None] | None = None) -> None:
        self.endpoint = endpoint
        self.follows_policy = follows_policy  # calls go to the session's policy (an adapter), where it has one
        # called with each answered tokens-in request and the /generate body it went as (the GPU bench's replay)
        self.on_generate = on_generate
        self.engine: str | None = None  # what the server's /models says it is (`owned_by`: vllm, sglang), once checked
        self.structured_mode = STRUCTURED_MODES[0]
        self.connections = Connections(endpoint)  # per event loop that calls (connections.py)
        self._checked = False
        self._tokens_checked = False
        self._answered = False  # this backend has had an answer (outage.py learnt of it)
        self.image_refs: ImageRefs | None = refs_for(endpoint.base_url) if endpoint.image_refs else None
        # Requests go out as plain JSON (json_http.py): no openai SDK to import (~0.4 s at start-up) and
        # no typed params to walk (`chat.completions.create` checks every message part, ~1-2 ms of CPU per
        # request). True restores the SDK's `create` (the path before issue 14, `surfer bench throughput
        # --compare-legacy`).
        self.typed_requests = False
        # Tokens in (tokens_in.py, sglang_generate.py): chosen on the first check or call, once per backend.
        self.path: RequestPath | None = None
        self._generate_took_images = False  # a /generate request with images was answered: its form is taken
        self.generate: Any = None  # the GenerateTransport where the path is tokens in

    @property
    def label(self) -> str:
        return f"{self.endpoint.model} @ {shown_url(self.endpoint.base_url)}"

    async def aclose(self) -> None:
        """Close this event loop's connections; a later call opens new ones (`run_sync` closes its
        agent's backends after each run, and the agent may run again: connections.py)."""
        await self.connections.aclose()

    async def _call(self, method: str, path: str, timeout: float, body: dict[str, Any] | None = None) -> Any:
        """The server's JSON answer to `method path`; HttpStatusError, ConnectFailed or TimedOut."""
        if self.typed_requests:
            return await self.connections.sdk_call(path, timeout, body)
        http = self.connections.http
        if http is None:
            http = self.connections.http = self.connections.json_client()
        if body is not None:
            body = dict(body)
            body.update(body.pop("extra_body", {}))
        session = current_session()  # the run's session, named to the server (affinity.py), with its rank there
        headers = session.headers_at(self.endpoint.base_url, self.endpoint.session_rank) if session else None
        return await http.request(method, path, timeout, body, headers)

    async def check(self) -> None:
        """Preflight: reachable, and the model is listed (when /models exists)."""
        if self._checked:
            return
        if self.connections.http is None and not self.typed_requests:  # its HTTP library imports off the loop, which starts the browser
            self.connections.http = await asyncio.to_thread(self.connections.json_client)
        try:
            page = await self._with_connect_retries(lambda timeout: self._call("GET", "models", timeout))
        except ServerGone:
            # down at the start: say so at once; gone after it answered in this process: an outage to wait out
            if not self._outage():
                raise
            await self._hold()
            return await self.check()
        except HttpStatusError as exc:
            if exc.status_code == 404:
                await self._check_root()
                self._checked = True  # server without /models: nothing to check against
                return
            if exc.status_code in (401, 403):
                raise key_refused(self.endpoint, exc) from None
            if server_gone(exc):  # a server still loading its model (503), or a proxy without its server
                if self._outage():
                    await self._hold()
                    return await self.check()
                raise ServerGone(f"model server at {shown_url(self.endpoint.base_url)} is not ready: /models answered HTTP "
                                 f"{exc.status_code} ({exc.message}); run again once it answers") from None
            if exc.status_code < 400 or no_api_here(exc):  # a success with no JSON, or no GET here: a web page, not an API
                raise not_an_api(self.endpoint, "GET /models", exc) from None
            raise ModelRequestError(f"model server at {shown_url(self.endpoint.base_url)} answered /models with HTTP {exc.status_code}") from None
        self._mark_answered()
        cards = [m for m in page.get("data") or [] if isinstance(m, dict)] if isinstance(page, dict) else []
        served = [m["id"] for m in cards if isinstance(m.get("id"), str)]
        self.engine = next((str(m["owned_by"]) for m in cards if m.get("owned_by")), None)
        policy = self.policy()
        if served and policy is not None and policy.name not in served:
            raise ModelNotFound(
                f"model server at {shown_url(self.endpoint.base_url)} does not serve policy {policy.name!r} (load the adapter "
                f"first: `surfer policy load`); it serves: {named(served)}"
            )
        if served and self.endpoint.model not in served:
            raise ModelNotFound(
                f"model server at {shown_url(self.endpoint.base_url)} does not serve model {self.endpoint.model!r}; "
                f"it serves: {named(served)} (choose one with {setting('model')})"
            )
        await self.choose_path()
        http = self.connections.http
        if self.endpoint.session_rank and http is not None:  # its data-parallel ranks, asked once (never fails)
            await count_ranks_at(self.endpoint.base_url, self.engine, http)
        self._checked = True

    async def _check_root(self) -> None:
        """No /models here, but under /v1 (a base URL http://host:8000 for http://host:8000/v1): ConfigError saying
        so, rather than every chat call failing with a 404 that reads as a missing model."""
        base = self.endpoint.base_url.rstrip("/")
        if base.endswith("/v1") or self.typed_requests:
            return
        try:
            await self._call("GET", "v1/models", PROBE_TIMEOUT)
        except Exception:  # noqa: BLE001 - no better guess: the check goes on as it would
            return
        raise ConfigError(f"model server at {base} has no /models, but {base}/v1/models answers: did you mean the base URL {base}/v1?")

    async def check_tokens(self) -> None:
        """Preflight of record_tokens: a one-token request must come back with its token ids and
        logprobs; ConfigError naming what is missing otherwise. A server error (5xx) proves nothing:
        the first call's answer is checked the same way."""
        if self._tokens_checked:
            return
        if not self.endpoint.record_tokens:  # (a backend made by the caller: capture from now on)
            self.endpoint = self.endpoint.model_copy(update={"record_tokens": True})
        await self.check()
        if self.generate is not None:  # tokens in: /generate answers with the prompt's ids and the sampled logprobs
            self.generate.record = True
            self._tokens_checked = True
            return
        policy = self.policy()  # the probe asks what the run's calls will ask: its session's adapter, where it has one
        model = policy.name if policy is not None else self.endpoint.model
        try:
            answer = await self._with_connect_retries(
                lambda timeout: self._call("POST", "chat/completions", timeout, {"extra_body": probe_body(model)}))
        except HttpStatusError as exc:
            if exc.status_code >= 500:
                return
            raise ConfigError(
                f"model server at {shown_url(self.endpoint.base_url)} refused a request for token ids and logprobs "
                f"(HTTP {exc.status_code}: {exc.message}); {NEEDS}") from None
        missing = missing_fields(answer)
        if missing:
            raise ConfigError(f"model server at {shown_url(self.endpoint.base_url)} does not return {', '.join(missing)}; {NEEDS}")
        self._tokens_checked = True

    async def choose_path(self) -> RequestPath:
        """Tokens in or chat completions for this endpoint (tokens_in.py), decided once."""
        if self.path is None and self.typed_requests:
            return RequestPath(False, "chat completions (the openai SDK's typed requests)")
        if self.path is None:
            async with self.connections.choosing:
                if self.path is None:
                    path = await choose_path(self.endpoint, lambda url: self._call("GET", url, min(PROBE_TIMEOUT, self.request_timeout())))
                    if path.tokens_in and path.tokenizer is not None:
                        from .sglang_generate import GenerateTransport
                        from .token_chain import TokenChain

                        self.generate = GenerateTransport(
                            TokenChain(path.tokenizer), path.root, record=getattr(self.endpoint, "record_tokens", False),
                            policy_version=getattr(self.endpoint, "policy_version", None))
                    if not path.decided:
                        return path  # asked again on the next call
                    self.path = path
        return self.path

    def request_timeout(self) -> float:
        """The timeout for the next request: the endpoint's, when set; else the
        default, shortened to the time left in the run."""
        if self.endpoint.timeout is not None:
            return self.endpoint.timeout
        left = time_left()
        return DEFAULT_REQUEST_TIMEOUT if left is None else max(MIN_REQUEST_TIMEOUT, min(DEFAULT_REQUEST_TIMEOUT, left))

    async def _with_connect_retries(self, call):  # type: ignore[no-untyped-def]
        for attempt in range(self.endpoint.connect_retries + 1):
            timeout = self.request_timeout()
            try:
                return await call(timeout)
            except TimedOut as exc:
                if exc.stalled is not None:
                    raise ModelServerUnreachable(
                        f"model server at {shown_url(self.endpoint.base_url)} stalled: it sent nothing for {exc.stalled:.3g} s "
                        f"while answering ({setting('read_timeout')})"
                    ) from None
                raise ModelServerUnreachable(
                    f"model server at {shown_url(self.endpoint.base_url)} did not answer within {timeout:.3g} s ({setting('request_timeout')})"
                ) from None
            except ConnectFailed as exc:
                if "certificate verify failed" in str(exc).lower():  # no retry or outage makes it trusted
                    raise certificate_refused(self.endpoint, str(exc)) from None
                if attempt == self.endpoint.connect_retries:
                    proxy = environment_proxy(self.endpoint.base_url)
                    if proxy is not None:  # the proxy is what could not be reached, or what did not reach the server
                        name, value = proxy
                        raise ServerGone(
                            f"cannot reach the model server at {self.endpoint.base_url} through the proxy {value} "
                            f"({name}; {exc}). Is the proxy running? Or connect directly: no_proxy={urlsplit(self.endpoint.base_url).hostname}"
                        ) from None
                    raise ServerGone(
                        f"cannot reach the model server at {shown_url(self.endpoint.base_url)} ({exc}). "
                        f"Is it running? Start one with `vllm serve` or set {setting('base_url')}."
                    ) from None
                await asyncio.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")

    def policy(self) -> PolicyRef | None:
        """The policy this backend's calls go to now: the run's session's, where it follows one."""
        return session_policy() if self.follows_policy else None

    def _body(self, request: ModelRequest, mode: str, *, full_images: bool = False) -> dict[str, Any]:
        """The JSON body; `full_images`: every image with its bytes, whatever `image_refs` says."""
        messages = to_openai_messages(request.messages, None if full_images else self.image_refs)
        policy = self.policy()
        body: dict[str, Any] = {"model": policy.name if policy is not None else self.endpoint.model}
        extra = dict(request.extra_body)
        if policy is not None and self.engine == "sglang" and policy.name != self.endpoint.model:
            extra["lora_path"] = policy.name  # SGLang picks the adapter by this field, not by `model`
        if request.schema is not None:
            if mode == "response_format":
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": request.schema_name, "schema": request.schema, "strict": True},
                }
            elif mode == "structured_outputs":
                extra["structured_outputs"] = {"json": request.schema}
            else:
                messages = _schema_in_prompt(messages, request.schema)
        body["messages"] = messages
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if self.endpoint.record_tokens:
            extra.update(TOKEN_PARAMS)
        if extra:
            body["extra_body"] = extra
        return body

    async def complete(self, request: ModelRequest) -> Completion:
        started = time.perf_counter()
        transient = 0
        held = 0.0  # seconds this call has waited for the server: all its outages together stay within server_wait
        resent = False  # the images were sent again in full after the server said it no longer held one
        # tokens in: this call's transport (kept whatever later calls learn, _tokens_in_refused) and its request
        generate, sent = await self._tokens_in_call(request)
        while True:
            mode = self.structured_mode
            try:
                body = self._body(request, mode)
                response = await self._with_connect_retries(
                    lambda timeout: self._call("POST", "chat/completions", timeout, body)
                    if sent is None else self._call("POST", generate.url, timeout, sent.body)
                )
            except ModelServerUnreachable as exc:
                if isinstance(exc, ServerGone) and self._outage():
                    held += await self._hold(held)
                    continue
                if not self._may_retry(transient):
                    raise
                transient += 1
                await asyncio.sleep(self._backoff(transient))
                continue
            except HttpStatusError as exc:
                if server_gone(exc) and self._outage():
                    # a server that answers /models but keeps failing chat calls this way is held for at most
                    # server_wait in all, never sent the call again forever
                    held += await self._hold(held)
                    continue
                if sent is not None and self._tokens_in_refused(exc, sent):
                    sent = None  # this request, and the endpoint's next ones, go by chat
                    continue
                if exc.status_code < 400 or no_api_here(exc):
                    raise not_an_api(self.endpoint, "POST /chat/completions", exc) from None
                if exc.status_code == 404:
                    policy = self.policy()
                    what = f"policy {policy.name!r} (its adapter unloaded?)" if policy else f"model {self.endpoint.model!r}"
                    raise ModelNotFound(f"model server at {shown_url(self.endpoint.base_url)} does not serve {what}: {exc.message}") from None
                if exc.status_code in (401, 403):
                    raise key_refused(self.endpoint, exc) from None
                if self.image_refs is not None and exc.status_code == 400 and is_cache_miss(str(exc)) and not resent:
                    self.image_refs.missed(_image_uuids(request))  # evicted, or a restarted server: send them again
                    resent = True
                    continue
                if request.schema is not None and rejects_structured_param(exc) and mode != "none":
                    next_mode = STRUCTURED_MODES[STRUCTURED_MODES.index(mode) + 1]
                    if self.structured_mode == mode:
                        self.structured_mode = next_mode
                    continue
                # (501: the server does not implement the request at all, which no wait changes)
                wait = self._retry_wait(transient + 1, exc.retry_after)
                if (exc.status_code == 429 or exc.status_code >= 500 and exc.status_code != 501) and self._may_retry(transient, wait):
                    transient += 1
                    await asyncio.sleep(wait)
                    continue
                failure = ContextTooLong if context_too_long(exc) else ModelRequestError
                raise failure(
                    f"model server at {shown_url(self.endpoint.base_url)} answered HTTP {exc.status_code}: {exc.message}"
                ) from None
            self._mark_answered()
            if sent is not None:
                self._generate_took_images = self._generate_took_images or bool(sent.prompt.images)
                if self.on_generate is not None:
                    self.on_generate(request, sent.body)
                return generate.completion(response, sent, started, self.endpoint.model, self.policy())
            if self.image_refs is not None:
                self.image_refs.took(_image_uuids(request))
            return self._completion(response, mode, started, body)

    def _tokens_in_refused(self, exc: HttpStatusError, sent: Any) -> bool:
        """Whether /generate refused the form of a request (not its length): SGLang's processor for some
        models refuses token ids with images. The endpoint then keeps the chat path, and says so once."""
        images = bool(sent.prompt.images)
        if exc.status_code not in ((400, 422, 500) if images else (400, 422)) or context_too_long(exc) or server_gone(exc):
            return False
        if images and self._generate_took_images and self.generate is not None:
            # the form was taken before: this request's ids were refused (e.g. SGLang's processor counting
            # more image tokens than images); it alone goes by chat
            self.generate.chain.refused(sent.session, sent.prompt, exc.message)
            return True
        from .tokens_in import refused_path

        self.path = refused_path(self.endpoint, exc.message, images)
        self.generate = None
        return True

    async def _tokens_in_call(self, request: ModelRequest) -> tuple[Any, Any]:
        """(transport, prepared /generate call) of `request` where this endpoint takes tokens in, else (None, None)."""
        if self.path is None:
            await self.choose_path()
        generate = self.generate
        if generate is None:
            return None, None
        from .sglang_generate import unsupported_options

        if unsupported_options(request):
            return None, None  # an option only the chat request carries: this request goes by chat
        session = current_session()
        rank = session.rank_at(self.endpoint.base_url) if session is not None and self.endpoint.session_rank else None
        return generate, await generate.prepare(session.id if session else "", request, self.policy(), self.endpoint.model, rank)

    def _mark_answered(self) -> None:
        """Once per backend (not per call): the server answered, so losing it later is an outage;
        this backend, alive now, becomes the one that probes."""
        if not self._answered:
            self._answered = True
            server_watch(self.endpoint.base_url, self._answers).answered = True

    def _outage(self) -> bool:
        """A server that answered earlier in this process and is gone now is an outage to wait out
        (within `server_wait`); one that never answered is a mistake to report at once."""
        return bool(self.endpoint.server_wait) and answered_before(self.endpoint.base_url)

    async def _hold(self, held: float = 0.0) -> float:
        """Wait with the other sessions of this process until the server answers again
        (outage.py); the seconds waited. ModelServerUnreachable past `server_wait` (less `held`,
        what this call already waited)."""
        limit = self.endpoint.server_wait
        if held >= limit:
            raise ModelServerUnreachable(
                f"the model server at {shown_url(self.endpoint.base_url)} kept failing this call for {limit:g} s ({setting('server_wait')})"
            )
        # the run's limits move past the longest possible wait first (a limit must not fire while held),
        # then back by what was not used: held time is not the task's
        pause_deadline(limit)
        started = time.perf_counter()
        try:
            await server_watch(self.endpoint.base_url, self._answers).hold(limit - held)
        finally:
            waited = time.perf_counter() - started
            pause_deadline(waited - limit)
        return waited

    async def _answers(self, timeout: float) -> bool:
        """Whether the server is back: /models answers (json_http.answers)."""
        return await answers(lambda: self._call("GET", "models", timeout))

    def _may_retry(self, done: int, wait: float | None = None) -> bool:
        """Another try of a transient failure: within max_retries, and only when the run has time left
        for the wait (the back-off, or what the server's Retry-After asked) and a request after it."""
        left = time_left()
        wait = self._backoff(done + 1, jitter=False) if wait is None else wait
        return done < self.endpoint.max_retries and wait <= MAX_RETRY_AFTER and (left is None or left > 2 * wait)

    def _retry_wait(self, attempt: int, asked: float | None) -> float:
        """Seconds before retry `attempt`: the back-off, or longer where the server's Retry-After asks."""
        backoff = self._backoff(attempt)
        return backoff if asked is None else max(backoff, asked)

    @staticmethod
    def _backoff(attempt: int, jitter: bool = True) -> float:
        return min(8.0, 0.5 * 2 ** attempt) * ((0.5 + random.random()) if jitter else 1.0)

    def _completion(self, response: Any, mode: str, started: float, body: dict[str, Any]) -> Completion:
        choices = response.get("choices") if isinstance(response, dict) else None
        if not choices:  # (a proxy may answer HTTP 200 with an error object instead)
            error = response.get("error") if isinstance(response, dict) else None
            said = f": {error.get('message') or error}" if isinstance(error, dict) else ""
            raise ModelRequestError(f"model server at {shown_url(self.endpoint.base_url)} answered without choices{said}")
        text = reply_text(choices[0].get("message"))
        usage = Usage(*usage_of(response.get("usage")))
        policy = self.policy()
        version = version_of(policy, self.endpoint.policy_version)
        tokens = None
        if self.endpoint.record_tokens:
            tokens = read_tokens(response, self.endpoint.base_url, sampling_of(body), version)
        return Completion(
            text=text, usage=usage, seconds=time.perf_counter() - started,
            model=response.get("model") or (policy.name if policy else self.endpoint.model),
            structured=mode if mode != "none" else "prompt", policy_version=version,
            tokens=tokens, finish_reason=choices[0].get("finish_reason"),
        )
