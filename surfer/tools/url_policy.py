"""Which URLs a browser session may open: the one owner of refused URL schemes.

`file:` URLs expose the machine's files, `chrome:` / `devtools:` /
`view-source:` the browser itself, and `javascript:` runs code in the page:
a model must not open them, since whatever it opens is screenshotted, sent to
the model server and written into the run directory. They are refused for
`goto`, for the start URL and for navigations a page starts itself;
`allow_file_urls=True` (`--allow-file-urls`) lets `file:` through for users who
automate local files.

Domain rules (`allowed_domains`, `blocked_domains`) hold on every request the
browser context makes: `BrowserEnvironment` routes the context through a
`GuardProxy` that asks `host_refusal` for each one. A pattern is a host
(`example.com`: that host on any port), a wildcard (`*.example.com`: the
domain and every subdomain), or either with a port (`example.com:8080`: that
port only). A blocked pattern wins over an allowed one; with no allowed
patterns every host not blocked is allowed. `data:` and `blob:` pages carry
no host: they are allowed when the page that opens them is.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import urljoin, urlsplit

from surfer.core.errors import ActionFailed, ConfigError
from surfer.core.surface import setting

FILE_SCHEMES = frozenset({"file", "filesystem"})
BROWSER_SCHEMES = frozenset({"chrome", "chrome-untrusted", "chrome-extension", "devtools", "view-source", "javascript"})
# Chromium's console messages when it blocks a page's own navigation itself.
_LOCAL_RESOURCE = "Not allowed to load local resource:"
_TOP_DATA_URL = "Not allowed to navigate top frame to data URL:"


INLINE_SCHEMES = frozenset({"data", "blob", "about"})
NETWORK_SCHEMES = frozenset({"http", "https", "ws", "wss"})
START_SCHEMES = frozenset({"http", "https", "file", "data", "about"})  # what a start URL may open
DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}
_HOSTNAME = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")
_IPV6 = re.compile(r"^[0-9a-f:.]+$")


def url_scheme(url: str) -> str:
    return urlsplit(url.strip()).scheme.lower()


_LOCAL_PATH = ("/", "./", "../", "~/")
_WEB_URL = re.compile(r"^(https?|wss?|ftp):", re.IGNORECASE)  # the schemes whose URLs read \\ as /
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
_LOOPBACK = re.compile(r"^(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d+)?([/?#]|$)", re.IGNORECASE)


def normalize_url(url: str, current: str = "") -> str:
    """Absolute URL for `url`, as a browser's address bar reads it: relative paths resolve against
    `current` (a web page or a local file); a local path without a page to resolve it against
    (`/tmp/page.html`, `./page.html`, `~/page.html`) is that file's `file:` URL (which the policy
    then refuses unless file URLs are allowed); a bare loopback host (`localhost:8000/x`,
    `127.0.0.1:8000`) gets http://, any other bare host https://. A backslash before the query reads as a
    slash, as browsers read it in web URLs (`https://evil.example\\@shop.example/` opens evil.example, where
    Python's parser sees shop.example)."""
    url = url.strip()
    if not _SCHEME.match(url) and current.startswith(("http://", "https://")):
        url = _web_slashes(url)  # ("/\\evil.example/" opens evil.example)
    if url.startswith(("/", "./", "../", "?", "#")) and current.startswith(("http://", "https://", "file:")):
        return urljoin(current, url)
    if url.startswith(_LOCAL_PATH) and not url.startswith("//"):
        return Path(os.path.abspath(os.path.expanduser(url))).as_uri()
    if "://" not in url and not url.startswith(("about:", "data:", "file:", "chrome:")):
        url = ("http://" if _LOOPBACK.match(url) else "https://") + url
    return _web_slashes(url) if _WEB_URL.match(url) else url


def _web_slashes(url: str) -> str:
    """Backslashes before the query as slashes."""
    end = min([i for i in (url.find("?"), url.find("#")) if i >= 0], default=len(url))
    return url[:end].replace("\\", "/") + url[end:]


def ascii_host(host: str) -> str:
    """An international host name (bücher.de) as browsers send it (xn--bcher-kva.de); any other as it is."""
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host  # (not a name: no pattern matches it)


@dataclass(frozen=True)
class HostPattern:
    host: str
    wildcard: bool = False
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> "HostPattern":
        value = text.strip().lower().rstrip(".")
        wildcard = value.startswith("*.")
        value = value[2:] if wildcard else value
        host, port_text = value, ""
        if value.startswith("["):  # [IPv6] or [IPv6]:port
            host, _, rest = value[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else ("x" if rest else "")
        elif value.count(":") == 1:
            host, port_text = value.split(":")
        ipv6 = ":" in host
        host = host if ipv6 else ascii_host(host)
        valid = bool(_IPV6.match(host)) if ipv6 else bool(_HOSTNAME.match(host))
        if not valid or (port_text and not (port_text.isdigit() and 0 < int(port_text) < 65536)) or (ipv6 and wildcard):
            raise ConfigError(
                f"domain pattern {text!r} is not a host: use example.com, *.example.com or example.com:8080 "
                "(no scheme or path)"
            )
        return cls(host, wildcard, int(port_text) if port_text else None)

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        host = ascii_host(host.lower())  # (a URL's host as written, bücher.de, or as sent, xn--bcher-kva.de)
        host = _ipv4_of(host) or host  # ([::ffff:a9fe:a9fe] reaches 169.254.169.254)
        return host == self.host or (self.wildcard and host.endswith("." + self.host))


def _ipv4_of(host: str) -> str | None:
    """The IPv4 address an IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, `::ffff:a00:1`) reaches, or None."""
    if ":" not in host:
        return None
    try:
        mapped = ipaddress.IPv6Address(host.strip("[]")).ipv4_mapped
    except ValueError:
        return None
    return str(mapped) if mapped is not None else None


def parse_patterns(values: Iterable[str]) -> tuple[HostPattern, ...]:
    return tuple(HostPattern.parse(v) for v in values)


class UrlPolicy:
    """Refuses local-file and browser-internal URLs, and remembers refusals
    of navigations the page started, to tell the agent after the action."""

    def __init__(
        self, *, allow_file_urls: bool = False, allowed_domains: Iterable[str] = (), blocked_domains: Iterable[str] = (),
    ) -> None:
        self.allow_file_urls = allow_file_urls
        self.allowed = parse_patterns(allowed_domains)
        self.blocked = parse_patterns(blocked_domains)
        self._notices: list[str] = []
        # Set where the domain rules are enforced by request routing (a browser surfer did not launch), which no
        # redirect hop passes (nor, in the user's own context, a new tab's first request): a page that got to a
        # refused host that way is left before anything is captured.
        self.routed = False

    @property
    def has_domain_rules(self) -> bool:
        return bool(self.allowed or self.blocked)

    def host_refusal(self, scheme: str, host: str, port: int | None = None) -> str | None:
        """Why a request to `host` may not be made, or None when it may."""
        host = host.lower().strip("[]").rstrip(".")
        port = port or DEFAULT_PORTS.get(scheme, 0)
        named = f"{host} ({_ipv4_of(host)})" if _ipv4_of(host) else host
        if any(p.matches(host, port) for p in self.blocked):
            return f"{named} is a blocked domain"
        if self.allowed and not any(p.matches(host, port) for p in self.allowed):
            return f"{named} is not an allowed domain"
        return None

    def scheme_refusal(self, url: str) -> str | None:
        """Why `url`'s scheme is refused (local files, browser internals), or None."""
        scheme = url_scheme(url)
        if scheme in BROWSER_SCHEMES:
            return f"{scheme}: URLs are refused (they open the browser's internals or run code)"
        if scheme in FILE_SCHEMES and not self.allow_file_urls:
            return (f"{scheme}: URLs are refused (they expose local files); the user can allow them with "
                    f"{setting('allow_file_urls')}")
        return None

    def refusal(self, url: str, opener: str | None = None) -> str | None:
        """Why `url` may not be opened, or None when it may. `opener` is the URL
        of the page that opens it (for data: and blob: pages)."""
        reason = self.scheme_refusal(url)
        if reason is not None or not self.has_domain_rules:
            return reason
        scheme = url_scheme(url)
        if scheme in NETWORK_SCHEMES:
            parts = urlsplit(url.strip())
            return self.host_refusal(scheme, parts.hostname or "", parts.port)
        if scheme == "blob":  # blob:https://host/uuid belongs to its origin
            return self.refusal(url.strip()[5:])
        if scheme == "data" and opener is not None and opener != "about:blank":
            reason = self.refusal(opener)
            return None if reason is None else f"a data: page opened by a refused page ({reason})"
        return None

    def on_refused_request(self, url: str, reason: str) -> None:
        """The proxy refused a request the page made."""
        self._notices.append(f"blocked a request to {url}: {reason}")

    def check(self, url: str, opener: str | None = None) -> None:
        """Raise ActionFailed (an error the agent sees in its history) for a refused URL."""
        reason = self.refusal(url, opener)
        if reason is not None:
            raise ActionFailed(f"refused to open {url}: {reason}")

    def watch(self, page: Any) -> None:
        """Hook a page: refused navigations it starts (links, scripts, redirects,
        frames) and local files Chromium blocked for it become notices."""
        page.on("framenavigated", lambda frame: self._on_navigated(frame))
        page.on("console", self._on_console)

    def _on_navigated(self, frame: Any) -> None:
        url = frame.url
        reason = self.scheme_refusal(url)  # network pages passed the proxy, when there are domain rules
        if reason is not None:
            self._notices.append(f"the page navigated to {url}, which was refused and closed: {reason}")

    def _on_console(self, message: Any) -> None:
        text = message.text
        if _LOCAL_RESOURCE in text:
            url = text.split(_LOCAL_RESOURCE, 1)[1].strip()
            self._notices.append(f"the page tried to open {url}; local files are refused")
        elif _TOP_DATA_URL in text:
            url = text.split(_TOP_DATA_URL, 1)[1].strip()
            self._notices.append(f"the page tried to open a data: URL in the whole tab ({url[:60]}…), which the browser refuses")

    def take_notices(self) -> list[str]:
        notices, self._notices = self._notices, []
        return list(dict.fromkeys(notices))

    async def leave_refused(self, page: Any) -> bool:
        """If the page (or one of its frames) shows a refused URL, replace it with
        a blank page before anything is captured. Returns whether it did."""
        if self._left_host(page.url) or self.scheme_refusal(page.url) is not None:
            await page.goto("about:blank")
            return True
        left = False
        for frame in page.frames[1:]:
            if self._left_host(frame.url) or self.scheme_refusal(frame.url) is not None:
                await frame.goto("about:blank")
                left = True
        return left

    def _left_host(self, url: str) -> bool:
        """Where routing enforces the rules: whether `url` is a page of a refused host (it got there past the
        routes); said in a notice."""
        if not (self.routed and url_scheme(url) in NETWORK_SCHEMES):
            return False
        reason = self.refusal(url)
        if reason is not None:
            self._notices.append(f"the page went to {url} past the domain rules (a redirect, or a new tab of this "
                                 f"browser's own), which is refused and was left: {reason}")
        return reason is not None


def check_start_url(url: str, policy: UrlPolicy) -> None:
    """A start URL is the user's input: a refused one is a usage error (exit 2)."""
    try:
        urlsplit(normalize_url(url))
    except ValueError as exc:  # ('http://[::1' raised a traceback from the checks below)
        raise ConfigError(f"the start URL {url} is not a valid URL: {exc}") from None
    reason = policy.refusal(url) or policy.refusal(normalize_url(url))  # ('/tmp/page.html' opens a file: URL)
    if reason is not None:
        raise ConfigError(f"the start URL {url} is refused: {reason}")
    bare = url.strip()
    if "://" not in bare and ":" not in bare.split("/", 1)[0] and not bare.startswith(_LOCAL_PATH) and os.path.isfile(bare):
        raise ConfigError(f"the start URL {bare} is a file in this folder, but without ./ it reads as the site "
                          f"https://{bare}: give ./{bare} to open the file, or https://{bare} for the site")
    if bare.startswith(_LOCAL_PATH) and not bare.startswith("//"):
        path = os.path.abspath(os.path.expanduser(bare))
        if not os.path.exists(path):
            raise ConfigError(f"the start URL {bare} is a local path, and there is no such file: {path}")
    scheme = url_scheme(normalize_url(url))
    if scheme not in START_SCHEMES:  # (ftp:, ws:, an app's own scheme: the browser opens no page there)
        raise ConfigError(f"the start URL {url} is not a web page: a browser opens http:// and https:// pages "
                          f"(and file: ones with {setting('allow_file_urls')}), not {scheme}:")
