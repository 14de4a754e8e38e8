"""An OpenAI-compatible backend's connections to its server (models/http.py), one set per event
loop that calls it: an agent outlives event loops (`run_sync` runs each task in one of its own and
closes the backends after it; a script calls `asyncio.run(agent.run(...))` twice; threads each
`run_sync` on one agent), and a connection, like every asyncio object, belongs to the loop that made
it. A loop's connections are closed by `aclose` in that loop, and dropped with the loop once it is
gone. Requests go out as plain JSON (json_http.py), or through the openai SDK's typed `create`
(`typed_requests`, the benchmarks' earlier path)."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from .endpoint import DEFAULT_REQUEST_TIMEOUT, Endpoint
from .json_http import ConnectFailed, HttpStatusError, JsonClient, TimedOut, retry_after


class _LoopClients:
    """One event loop's connections, and the lock of the backend's request path's choice."""

    def __init__(self) -> None:
        self.http: JsonClient | None = None
        self.sdk: Any = None  # the openai SDK's client (typed requests)
        self.choosing = asyncio.Lock()

    async def aclose(self) -> None:
        if self.http is not None:
            await self.http.aclose()
        if self.sdk is not None:
            await self.sdk.close()


class Connections:
    """The connections of a backend to `endpoint`, per event loop (see the module's docstring)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClients] = weakref.WeakKeyDictionary()

    @property
    def _here(self) -> _LoopClients:
        loop = asyncio.get_running_loop()
        clients = self._loops.get(loop)
        if clients is None:
            clients = self._loops[loop] = _LoopClients()
        return clients

    @property
    def http(self) -> JsonClient | None:
        """The running loop's plain-JSON client, None until one is made."""
        return self._here.http

    @http.setter
    def http(self, client: JsonClient) -> None:
        self._here.http = client

    @property
    def choosing(self) -> asyncio.Lock:
        """Held while the backend chooses its request path (tokens_in.py)."""
        return self._here.choosing

    def json_client(self) -> JsonClient:
        """A new plain-JSON client (its HTTP library's first import is slow: callers may make it in a thread)."""
        return JsonClient(self.endpoint.base_url, self.endpoint.api_key, self.endpoint.timeout or DEFAULT_REQUEST_TIMEOUT,
                          self.endpoint.read_timeout)

    async def sdk_call(self, path: str, timeout: float, body: dict[str, Any] | None) -> Any:
        """`GET models` or `POST chat/completions` through the openai SDK, its errors as json_http's."""
        import openai

        clients = self._here
        if clients.sdk is None:
            clients.sdk = openai.AsyncOpenAI(
                base_url=self.endpoint.base_url, api_key=self.endpoint.api_key or "EMPTY",
                timeout=self.endpoint.timeout or DEFAULT_REQUEST_TIMEOUT, max_retries=0,
            )
        try:
            if path == "models":
                return (await clients.sdk.models.list(timeout=timeout)).model_dump()
            return (await clients.sdk.chat.completions.create(**(body or {}), timeout=timeout)).model_dump()
        except openai.APITimeoutError as exc:
            raise TimedOut(str(exc)) from None
        except openai.APIConnectionError as exc:
            raise ConnectFailed(str(exc.__cause__ or exc)) from None
        except openai.APIStatusError as exc:
            raise HttpStatusError(exc.status_code, exc.message, retry_after(exc.response.headers.get("retry-after"))) from None

    async def aclose(self) -> None:
        """Close the running loop's connections (a later call makes new ones)."""
        clients = self._loops.pop(asyncio.get_running_loop(), None)
        if clients is not None:
            await clients.aclose()
