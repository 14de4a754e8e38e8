"""Playwright's storage state (cookies, and localStorage per origin) as a file:
read and checked (a clear error for a missing or malformed file, a warning for
one others can read), written atomically with mode 0600, and summed up for
`surfer auth check` (which cookies still sign in, read from the file alone).
Blocking: callers on the event loop run these in a thread.

    {"cookies": [{"name": "sid", "value": "...", "domain": "app.example.com", "path": "/",
                  "expires": 1767225600, "httpOnly": true, "secure": true, "sameSite": "Lax"}],
     "origins": [{"origin": "https://app.example.com", "localStorage": [{"name": "k", "value": "v"}]}]}

A state file signs anyone in who holds it: it is never copied into a run
directory, a report, a trace or an export, and its values are scrubbed from a
saved trace (tracing.py)."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

from surfer.core.errors import ConfigError

COOKIE_KEYS = ("name", "value")
SESSION_EXPIRY = -1  # Playwright's `expires` for a cookie that ends with the browser session
# Values at least this long are scrubbed from traces by value too (shorter ones, "1" or "en", would
# replace ordinary text); their headers are removed whatever their length.
SCRUB_MIN_LENGTH = 6


def read_storage_state(path: str | Path) -> dict[str, Any]:
    """The state in `path`, checked: ConfigError (exit 2) naming the file and what is wrong."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"storage state file {path} does not exist (make one with `surfer auth save URL --out {path}` "
                          "or --save-storage-state)") from None
    except IsADirectoryError:
        raise ConfigError(f"storage state file {path} is a directory (a profile directory goes to --user-data-dir)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read storage state file {path}: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"storage state file {path} is not JSON ({exc.msg}, line {exc.lineno})") from None
    problem = state_problem(data)
    if problem:
        raise ConfigError(f"storage state file {path} is not a Playwright storage state: {problem}")
    return data


def state_problem(data: Any) -> str | None:
    """What makes `data` unusable as a storage state, or None."""
    if not isinstance(data, dict):
        return "expected an object with 'cookies' and 'origins'"
    unknown = set(data) - {"cookies", "origins"}
    if "cookies" not in data and "origins" not in data:
        return "it has neither 'cookies' nor 'origins'" + (f" (it has {', '.join(sorted(unknown)[:3])})" if unknown else "")
    cookies, origins = data.get("cookies", []), data.get("origins", [])
    if not isinstance(cookies, list) or not isinstance(origins, list):
        return "'cookies' and 'origins' must be lists"
    for index, cookie in enumerate(cookies):
        if not isinstance(cookie, dict) or not all(isinstance(cookie.get(k), str) for k in COOKIE_KEYS):
            return f"cookies[{index}] needs a string name and value"
        if not (isinstance(cookie.get("domain"), str) or isinstance(cookie.get("url"), str)):
            return f"cookies[{index}] ({cookie['name']}) needs a domain or a url"
        if "expires" in cookie and not isinstance(cookie["expires"], (int, float)):
            return f"cookies[{index}] ({cookie['name']}): expires must be a number (seconds since 1970, -1 for a session cookie)"
    for index, origin in enumerate(origins):
        if not isinstance(origin, dict) or not isinstance(origin.get("origin"), str):
            return f"origins[{index}] needs an 'origin'"
        entries = origin.get("localStorage", [])
        if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("name"), str) for e in entries):
            return f"origins[{index}].localStorage must be a list of {{name, value}}"
    return None


def loose_permissions(path: str | Path) -> str | None:
    """A warning when others than the owner may read or write the file, else None."""
    try:
        mode = stat.S_IMODE(Path(path).expanduser().stat().st_mode)
    except OSError:
        return None
    if mode & 0o077:
        return (f"{path} holds sign-in cookies and is readable by others (mode {mode:04o}); "
                f"`chmod 600 {path}` keeps it yours")
    return None


def write_storage_state(state: Mapping[str, Any], path: str | Path) -> Path:
    """Write `state` to `path` atomically (a reader never sees half a file), mode 0600 from the first byte."""
    path = Path(path).expanduser()
    problem = state_problem(state)
    if problem:
        raise ValueError(f"not a storage state: {problem}")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # mkstemp: mode 0600
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(state, out, indent=2)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def secret_values(state: Mapping[str, Any] | None) -> list[str]:
    """The cookie and localStorage values of a state worth scrubbing by value (long enough to be no ordinary word)."""
    if not state:
        return []
    values = [str(c.get("value", "")) for c in state.get("cookies", [])]
    values += [str(e.get("value", "")) for o in state.get("origins", []) for e in o.get("localStorage", [])]
    return sorted({v for v in values if len(v) >= SCRUB_MIN_LENGTH}, key=len, reverse=True)


# -- what a state still signs in to (`surfer auth check`) ---------------------------------


@dataclass(frozen=True)
class CookieFact:
    name: str
    domain: str
    expires: float  # seconds since 1970; SESSION_EXPIRY for a session cookie

    @property
    def session(self) -> bool:
        return self.expires < 0

    def expired(self, now: float) -> bool:
        return not self.session and self.expires <= now

    def describe(self, now: float) -> str:
        if self.session:
            when = "session cookie (ends with the browser; kept in the file)"
        elif self.expired(now):
            when = f"expired {_span(now - self.expires)} ago"
        else:
            when = f"expires in {_span(self.expires - now)}"
        return f"{self.name} @ {self.domain}: {when}"


@dataclass(frozen=True)
class StateCheck:
    """Which cookies of a state apply to a URL's host, and whether any still holds."""

    cookies: list[CookieFact]  # those sent to the host
    others: int  # cookies for other hosts
    storage_origins: list[str]  # origins with localStorage

    def valid(self, now: float) -> list[CookieFact]:
        return [c for c in self.cookies if not c.expired(now)]

    def earliest_expiry(self, now: float) -> float | None:
        lasting = [c.expires for c in self.valid(now) if not c.session]
        return min(lasting) if lasting else None


def check_state(state: Mapping[str, Any], url: str) -> StateCheck:
    """The cookies of `state` a browser would send to `url` (domain and path match; secure ones to https only)."""
    parts = urlsplit(url)
    host, path = (parts.hostname or "").lower(), parts.path or "/"
    sent, others = [], 0
    for cookie in state.get("cookies", []):
        domain = str(cookie.get("domain") or urlsplit(str(cookie.get("url", ""))).hostname or "").lower()
        if _domain_matches(host, domain) and path.startswith(str(cookie.get("path") or "/")) and (
            parts.scheme == "https" or not cookie.get("secure") or host in ("localhost", "127.0.0.1")
        ):
            sent.append(CookieFact(str(cookie["name"]), domain, float(cookie.get("expires", SESSION_EXPIRY))))
        else:
            others += 1
    origins = [str(o.get("origin")) for o in state.get("origins", []) if o.get("localStorage")]
    return StateCheck(sent, others, origins)


def _domain_matches(host: str, domain: str) -> bool:
    bare = domain.lstrip(".")
    return host == bare or (domain.startswith(".") and host.endswith("." + bare))


def _span(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{int(seconds)} s"
