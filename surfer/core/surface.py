"""Who is calling surfer — its command line, or Python code through the SDK — so that a message
that tells the user which setting to change names it the way that caller sets it: `--base-url` for
`surfer run`, `Agent(base_url=...)` for a script. One owner for the words; the messages (a server
down, an API key wanted, a server that stalled) ask `setting(...)` rather than spell a flag.

The CLI marks its commands (`calling_from_cli`, for the length of a command); everything else —
`from surfer import Agent` — is Python, the default.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, Literal

Caller = Literal["cli", "python", "pytest"]

_CALLER: ContextVar[Caller] = ContextVar("surfer_caller", default="python")

# setting -> (its flag, where a command has one; its environment variable, where it has one)
_SETTINGS: dict[str, tuple[str | None, str | None]] = {
    "base_url": ("--base-url", "SURFER_BASE_URL"),
    "api_key": ("--api-key", "SURFER_API_KEY"),
    "model": ("--model", "SURFER_MODEL"),
    "profile": ("--profile", "SURFER_PROFILE"),
    "server_wait": ("--server-wait", None),
    "read_timeout": (None, None),
    "request_timeout": (None, None),
    "allow_file_urls": ("--allow-file-urls (config: [browser] allow_file_urls = true)", None),
}
# a key set elsewhere than as an Agent argument of its name, as Python sets it
_PYTHON_FORMS = {"allow_file_urls": 'Agent(browser={"allow_file_urls": True})'}


def caller() -> Caller:
    return _CALLER.get()


@contextmanager
def calling_from_cli() -> Iterator[None]:
    """The code inside runs a command of the CLI (its messages name flags)."""
    token = _CALLER.set("cli")
    try:
        yield
    finally:
        _CALLER.reset(token)


# the pytest plugin's options (surfer/qa/pytest_plugin.py); the other keys are its --surfer-config file's
_PYTEST_OPTIONS = {"base_url": "--surfer-base-url", "model": "--surfer-model", "profile": "--surfer-profile"}


@contextmanager
def calling_from_pytest() -> Iterator[None]:
    """The code inside runs for the pytest plugin's `surfer` fixture (its messages name its options): a test's
    message said `Agent(base_url=...)`, which a pytest user has no way to set."""
    token = _CALLER.set("pytest")
    try:
        yield
    finally:
        _CALLER.reset(token)


def setting(name: str) -> str:
    """How the caller sets the configuration key `name`: "--base-url or SURFER_BASE_URL" from the CLI,
    "Agent(base_url=...) or SURFER_BASE_URL" from Python; a key without a flag: "read_timeout, a config file key"."""
    if caller() == "pytest":
        variable = _SETTINGS.get(name, (None, None))[1]
        how = _PYTEST_OPTIONS.get(name) or f"{name}, a key of the --surfer-config file"
        return f"{how} or {variable}" if variable else how
    flag, variable = _SETTINGS.get(name, (None, None))
    if caller() == "python":
        how = _PYTHON_FORMS.get(name) or f"Agent({name}=...)"
    else:
        how = flag or f"{name}, a config file key"
    return f"{how} or {variable}" if variable else how
