"""The HTTP transport's bearer token: every request must carry
`Authorization: Bearer TOKEN`, else 401. Required when the server is bound
off the loopback interface (`surfer mcp --http PORT --host 0.0.0.0 --token ...`)."""

from __future__ import annotations

import hmac
from typing import Any, Awaitable, Callable

LOOPBACK = ("127.0.0.1", "localhost", "::1")

Asgi = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def needs_token(host: str) -> bool:
    return host not in LOOPBACK


class BearerToken:
    """ASGI middleware: HTTP requests without the token get 401 (compared in constant time)."""

    def __init__(self, app: Asgi, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = b'{"error": "unauthorized: send Authorization: Bearer <token> (surfer mcp --token)"}'
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="surfer"'),
                    (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
