"""What an error answer from an OpenAI-compatible server means: the server gone, a request longer
than the model's context, structured outputs refused, an API key wanted or refused. The backend
(http.py) decides what to do about each."""

from __future__ import annotations

from surfer.core.errors import ConfigError
from surfer.core.surface import setting

from .endpoint import Endpoint, shown_url
from .json_http import HttpStatusError

GONE_STATUSES = (502, 503, 504)  # a proxy without its server, a server starting or stopping
NAMED = 10  # model names an error lists (a hosted router lists hundreds)


def named(names: list[object]) -> str:
    """The first NAMED of a server's model names, and how many more there are."""
    shown = ", ".join(map(str, names[:NAMED]))
    return shown + (f" and {len(names) - NAMED} more (GET /models lists them all)" if len(names) > NAMED else "")


def server_gone(exc: HttpStatusError) -> bool:
    """An answer that means the server is gone, not that the request was wrong: 502 / 503 / 504,
    or vLLM's dead engine (HTTP 500 naming EngineDeadError)."""
    return exc.status_code in GONE_STATUSES or (exc.status_code == 500 and "enginedead" in str(exc).lower().replace(" ", ""))


def key_refused(endpoint: Endpoint, exc: HttpStatusError) -> ConfigError:
    """HTTP 401 / 403: the server wants a key that was not given, or refused the one given."""
    where = f"model server at {shown_url(endpoint.base_url)}"
    if endpoint.api_key in ("", "EMPTY"):
        return ConfigError(f"{where} wants an API key (HTTP {exc.status_code}: {exc.message}); "
                           f"give it with {setting('api_key')} (or api_key in a config file)")
    return ConfigError(f"{where} refused the API key given (HTTP {exc.status_code}: {exc.message}); "
                       f"check {setting('api_key')}")


def no_api_here(exc: HttpStatusError) -> bool:
    """An error answer that says no API takes the request at this path: a method the server does not take there
    (405, 501), or a page not found that is no API's error about the request: a web page (a web app's `Cannot POST
    /v1/chat/completions`) or a route FastAPI does not have (`{"detail": "Not Found"}`, as vLLM answers a path
    outside /v1). A model server's 404 naming a model it does not serve says so in JSON."""
    return exc.status_code in (405, 501) or (exc.status_code == 404 and (exc.json_body is False or exc.message == "Not Found"))


def not_an_api(endpoint: Endpoint, path: str, exc: HttpStatusError) -> ConfigError:
    """A success status with an answer that is not JSON (a web page, a login portal), or an error that says no API is
    there (`no_api_here`): the base URL is not an OpenAI-compatible API."""
    return ConfigError(f"{shown_url(endpoint.base_url)} is not an OpenAI-compatible API: {path} answered HTTP {exc.status_code}, "
                       f"{exc.message}; check {setting('base_url')} (a server's API usually ends in /v1)")


def certificate_refused(endpoint: Endpoint, reason: str) -> ConfigError:
    """An https server whose certificate this machine does not trust (self-signed, a private CA)."""
    return ConfigError(f"model server at {shown_url(endpoint.base_url)}: its TLS certificate is not trusted here ({reason}); "
                       "give the certificate of its CA with SSL_CERT_FILE=/path/to/ca.pem")


def context_too_long(exc: HttpStatusError) -> bool:
    """The request is longer than the model's context: vLLM's "exceeds model's maximum context
    length", OpenAI's `context_length_exceeded`, and the like; or it holds more images than the
    server takes (vLLM's "At most 1 image(s) may be provided in one request"): fewer screenshots
    is the remedy for both."""
    text = str(exc).lower()
    return exc.status_code in (400, 413, 422) and any(
        words in text for words in ("maximum context length", "context_length_exceeded", "context length exceeded",
                                    "prompt is too long", "too many input tokens",
                                    "longer than the model's context length",
                                    "may be provided in one request", "too many images")
    )


def rejects_structured_param(exc: HttpStatusError) -> bool:
    text = str(exc).lower()
    return exc.status_code in (400, 422) and any(
        word in text for word in ("response_format", "json_schema", "structured_outputs", "extra_forbidden", "extra inputs")
    )
