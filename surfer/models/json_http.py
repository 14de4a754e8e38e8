"""JSON over HTTP to an OpenAI-compatible server, without the openai SDK.

Surfer sends plain JSON bodies and reads three fields of the answers, so it
needs no typed SDK on the request path. Importing the SDK costs ~0.4 s of
Python (its typed models), which at start-up sits on the way to the first
request; its HTTP library (httpx2 with openai 3, httpx before) costs ~0.1 s.
The errors here carry what the backend maps to surfer's errors (http.py)."""

from __future__ import annotations

import asyncio
import html
import json
import re
from typing import Any


def http_library() -> Any:
    """The HTTP client library the OpenAI SDK brings (httpx2 in openai 3, httpx before)."""
    try:
        import httpx2 as httpx
    except ImportError:
        import httpx
    return httpx


class HttpStatusError(Exception):
    """The server answered with an error status (`retry_after`: the seconds its Retry-After header asks for)."""

    def __init__(self, status_code: int, message: str, retry_after: float | None = None, *,
                 json_body: bool | None = None) -> None:
        """`json_body`: whether the answer was JSON, as an API's errors are (False: a web page, plain text; None: not known)."""
        super().__init__(f"Error code: {status_code} - {message}")
        self.status_code = status_code
        self.message = message
        self.retry_after = retry_after
        self.json_body = json_body


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """The seconds a Retry-After header asks to wait: a number of seconds, or an HTTP date; None when
    absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value.strip()))
    except ValueError:
        pass
    import time
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class ConnectFailed(Exception):
    """No connection (refused, reset, name not found)."""


class TimedOut(Exception):
    """No answer within the timeout; `stalled`: the seconds the server sent nothing while answering, when
    that (the read timeout) is what ran out rather than the whole call's time."""

    def __init__(self, message: str, stalled: float | None = None) -> None:
        super().__init__(message)
        self.stalled = stalled


def _error_message(response: Any) -> str:
    try:
        payload = response.json()
    except ValueError:
        return one_line(response.text) or response.reason_phrase
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(payload, dict) and isinstance(payload.get("message"), str) and payload["message"]:
        return payload["message"]  # vLLM's older {"object": "error", "message": ..., "code": 400}
    if isinstance(payload, dict) and payload.get("detail"):
        return json.dumps(payload["detail"]) if not isinstance(payload["detail"], str) else payload["detail"]
    return json.dumps(payload)[:500]


def _is_json(response: Any) -> bool:
    try:
        response.json()
    except ValueError:
        return False
    return True


def one_line(text: str, limit: int = 200) -> str:
    """An error page (HTML from a proxy or a server that is not a model server) as one line of its text."""
    if "<" in text and ">" in text:
        text = re.sub(r"(?is)<(script|style|head)\b.*?</\1>", " ", text)
        text = re.sub(r"(?s)<[^>]*>", " ", text)
        text = html.unescape(text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_tls: Any = None  # the process's TLS context, made on first use


def shared_tls_context(httpx: Any) -> Any:
    """One TLS context for every client of the process, made as the library makes its default one (its
    certificate store, SSL_CERT_FILE / SSL_CERT_DIR). Each client would otherwise read the certificates
    again (~10-20 ms of CPU), and a batch makes one per role of every session."""
    global _tls
    if _tls is None:
        _tls = httpx.create_ssl_context()
    return _tls


def openai_client(**options: Any) -> Any:
    """An `openai.AsyncOpenAI(**options)` on the process's TLS context (shared_tls_context): each client made
    its own, reading the certificate store again (~0.1 s of CPU per `surfer doctor` check or `--profile auto`)."""
    import openai

    verify = shared_tls_context(http_library()) if hasattr(http_library(), "create_ssl_context") else True
    http_client = proxied_client(openai.DefaultAsyncHttpxClient, str(options.get("base_url") or ""), verify=verify)
    return openai.AsyncOpenAI(**options, http_client=http_client)


def environment_proxy(url: str) -> tuple[str, str] | None:
    """(variable, proxy) of the proxy the environment gives for requests to `url` (`http_proxy`,
    `HTTPS_PROXY`, `all_proxy` ..., `no_proxy` honoured), read as the HTTP library reads them
    (urllib's getproxies); None for a direct connection."""
    import os
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    if not parts.hostname or urllib.request.proxy_bypass_environment(parts.netloc.rsplit("@", 1)[-1], proxies):
        return None
    for scheme in (parts.scheme, "all"):
        if proxies.get(scheme):
            names = [f"{scheme}_proxy", f"{scheme.upper()}_PROXY"]
            return next((n for n in names if os.environ.get(n) == proxies[scheme]), names[0]), proxies[scheme]
    return None


def proxied_client(factory: Any, url: str, **options: Any) -> Any:
    """`factory(**options)`, an HTTP client for requests to `url`. The library makes a transport for every
    proxy the environment sets when a client is made, whatever URL it is for: a SOCKS one
    (`ALL_PROXY=socks5://...`) without the socksio package, or one it cannot read (`socks://`, as desktop
    settings write it), fails there. A client for a URL the proxy does not apply to (`no_proxy`) is then
    made without the environment's proxies; one it applies to is a ConfigError naming the variable."""
    import urllib.request
    from urllib.parse import urlsplit

    from surfer.core.errors import ConfigError

    try:
        return factory(**options)
    except (ImportError, ValueError) as exc:
        if not any(v for k, v in urllib.request.getproxies_environment().items() if k != "no"):
            raise  # (not the environment's proxies)
        proxy = environment_proxy(url) if url else None
        if proxy is None:
            return factory(**options, trust_env=False)
        name, value = proxy
        why = ("a SOCKS proxy needs the socksio package: pip install socksio" if isinstance(exc, ImportError)
               else one_line(str(exc)))
        raise ConfigError(
            f"{name}={value} is the proxy for {url}, and the HTTP library cannot use it ({why}): fix {name}, "
            f"or connect directly: no_proxy={urlsplit(url).hostname}"
        ) from None


class JsonClient:
    """One connection pool to `base_url` (e.g. http://host:8000/v1). A request's `timeout` bounds the
    whole call (a server that trickles its answer byte by byte included); `read_timeout`, the silence
    allowed between two reads of the answer (None: the call's timeout)."""

    def __init__(self, base_url: str, api_key: str | None, timeout: float, read_timeout: float | None = None) -> None:
        self.read_timeout = read_timeout
        httpx = self._httpx = http_library()
        self._client = proxied_client(
            httpx.AsyncClient, base_url, base_url=base_url.rstrip("/") + "/", timeout=timeout,
            headers={"Authorization": f"Bearer {api_key or 'EMPTY'}", "Accept": "application/json"},
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100),
            verify=shared_tls_context(httpx) if hasattr(httpx, "create_ssl_context") else True,
        )

    async def request(self, method: str, path: str, timeout: float, body: dict[str, Any] | None = None,
                      headers: dict[str, str] | None = None) -> Any:
        """The decoded JSON answer; HttpStatusError, ConnectFailed or TimedOut."""
        response = await self._send(method, path, timeout, body, headers)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return _streamed(response)  # a server that answers only in server-sent events
        try:
            return response.json()
        except ValueError:
            kind = response.headers.get("content-type", "").split(";")[0].strip() or "no content type"
            raise HttpStatusError(response.status_code, f"a {kind} answer, not JSON: {one_line(response.text, 120)!r}") from None

    async def text(self, path: str, timeout: float) -> str:
        """The text of a page (a /metrics page); HttpStatusError, ConnectFailed or TimedOut."""
        return str((await self._send("GET", path, timeout)).text)

    async def _send(self, method: str, path: str, timeout: float, body: dict[str, Any] | None = None,
                    headers: dict[str, str] | None = None) -> Any:
        httpx = self._httpx
        read = timeout if self.read_timeout is None else min(timeout, self.read_timeout)
        try:
            async with asyncio.timeout(timeout):  # httpx's timeouts are per read: a trickle would outlast them
                response = await self._client.request(method, path.lstrip("/"), json=body, headers=headers,
                                                      timeout=httpx.Timeout(timeout, read=read))
        except TimeoutError:
            raise TimedOut(f"no complete answer within {timeout:g} s") from None
        except httpx.ReadTimeout as exc:
            raise TimedOut(str(exc) or type(exc).__name__, stalled=read if read < timeout else None) from None
        except httpx.TimeoutException as exc:
            raise TimedOut(str(exc) or type(exc).__name__) from None
        except httpx.TransportError as exc:
            raise ConnectFailed(str(exc) or type(exc).__name__) from None
        if response.status_code >= 400:
            raise HttpStatusError(response.status_code, _error_message(response), retry_after(response.headers.get("retry-after")),
                                  json_body=_is_json(response))
        return response

    async def aclose(self) -> None:
        await self._client.aclose()


def _streamed(response: Any) -> Any:
    """A streamed chat completion as the one it streams (replies.py); an error it streamed as HttpStatusError."""
    from .replies import from_stream

    try:
        answer = from_stream(response.text)
    except ValueError:
        raise HttpStatusError(response.status_code, f"answer is not JSON: {response.text[:200]!r}") from None
    error = answer.get("error")
    if isinstance(error, dict) and not any(c["message"]["content"] or c["message"].get("tool_calls") for c in answer["choices"]):
        code = error.get("code")
        raise HttpStatusError(code if isinstance(code, int) and code >= 400 else 500, str(error.get("message") or error))
    return answer


async def answers(request: Any) -> bool:
    """Whether a server is there: `request()` (a GET of its /models) answered with any status but
    5xx (a server without /models, or one that wants a key, is there)."""
    try:
        await request()
    except HttpStatusError as exc:
        return exc.status_code < 500
    except (ConnectFailed, TimedOut):
        return False
    return True
