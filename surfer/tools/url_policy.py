"""Which URLs a browser session may open: the one owner of refused URL schemes.

`file:` URLs expose the machine's files, `chrome:` / `devtools:` /
`view-source:` the browser itself, and `javascript:` runs code in the page:
a model must not open them, since whatever it opens is screenshotted, sent to
the model server and written into the run directory. They are refused for
`goto`, for the start URL and for navigations a page starts itself;
`allow_file_urls=True` (`--allow-file-urls`) lets `file:` through for users who
automate local files. The full domain allow-list is a separate layer.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from surfer.core.errors import ActionFailed, ConfigError

FILE_SCHEMES = frozenset({"file", "filesystem"})
BROWSER_SCHEMES = frozenset({"chrome", "chrome-untrusted", "chrome-extension", "devtools", "view-source", "javascript"})
# Chromium's console message when a page tries to open a local file (it blocks those itself).
_LOCAL_RESOURCE = "Not allowed to load local resource:"


def url_scheme(url: str) -> str:
    return urlsplit(url.strip()).scheme.lower()


class UrlPolicy:
    """Refuses local-file and browser-internal URLs, and remembers refusals
    of navigations the page started, to tell the agent after the action."""

    def __init__(self, *, allow_file_urls: bool = False) -> None:
        self.allow_file_urls = allow_file_urls
        self._notices: list[str] = []

    def refusal(self, url: str) -> str | None:
        """Why `url` may not be opened, or None when it may."""
        scheme = url_scheme(url)
        if scheme in BROWSER_SCHEMES:
            return f"{scheme}: URLs are refused (they open the browser's internals or run code)"
        if scheme in FILE_SCHEMES and not self.allow_file_urls:
            return f"{scheme}: URLs are refused (they expose local files); the user can allow them with --allow-file-urls"
        return None

    def check(self, url: str) -> None:
        """Raise ActionFailed (an error the agent sees in its history) for a refused URL."""
        reason = self.refusal(url)
        if reason is not None:
            raise ActionFailed(f"refused to open {url}: {reason}")

    def watch(self, page: Any) -> None:
        """Hook a page: refused navigations it starts (links, scripts, redirects,
        frames) and local files Chromium blocked for it become notices."""
        page.on("framenavigated", lambda frame: self._on_navigated(frame))
        page.on("console", self._on_console)

    def _on_navigated(self, frame: Any) -> None:
        url = frame.url
        reason = self.refusal(url)
        if reason is not None:
            self._notices.append(f"the page navigated to {url}, which was refused and closed: {reason}")

    def _on_console(self, message: Any) -> None:
        text = message.text
        if _LOCAL_RESOURCE in text:
            url = text.split(_LOCAL_RESOURCE, 1)[1].strip()
            self._notices.append(f"the page tried to open {url}; local files are refused")

    def take_notices(self) -> list[str]:
        notices, self._notices = self._notices, []
        return list(dict.fromkeys(notices))

    async def leave_refused(self, page: Any) -> bool:
        """If the page (or one of its frames) shows a refused URL, replace it with
        a blank page before anything is captured. Returns whether it did."""
        if self.refusal(page.url) is not None:
            await page.goto("about:blank")
            return True
        left = False
        for frame in page.frames[1:]:
            if self.refusal(frame.url) is not None:
                await frame.goto("about:blank")
                left = True
        return left


def check_start_url(url: str, allow_file_urls: bool = False) -> None:
    """A start URL is the user's input: a refused one is a usage error (exit 2)."""
    reason = UrlPolicy(allow_file_urls=allow_file_urls).refusal(url)
    if reason is not None:
        raise ConfigError(f"the start URL {url} is refused: {reason}")
