"""Finding and launching a Chromium for Playwright, closed-network safe."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from surfer.core.errors import ConfigError

SYSTEM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", "/usr/bin/google-chrome-stable")
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
# The old headless shell (Debian package `chromium-headless-shell`; Playwright's
# default for headless too): the same Blink without the browser UI. Measured
# here: a new context + page costs ~0.1 s of CPU against ~1.1 s with the full
# browser's headless mode, and a screenshot ~35 against ~50 ms — at many
# sessions per machine that is the difference (README, "Running at scale").
HEADLESS_SHELL_CANDIDATES = ("/usr/lib/chromium/chromium-headless-shell", "/usr/bin/chromium-headless-shell")
HEADLESS_SHELL_NAMES = ("chromium-headless-shell", "chrome-headless-shell")

# Without the background-networking flags Chromium keeps trying to reach the
# internet (BENCHMARKS.md).
LAUNCH_ARGS = (
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--no-first-run", "--disable-sync", "--disable-dev-shm-usage", "--disable-quic",
    "--disable-features=Translate,MediaRouter,OptimizationHints",
)

INSTALL_HINT = (
    "No Chromium found. On Debian/Ubuntu: `sudo apt-get install -y chromium`; "
    "or point SURFER_CHROMIUM at a Chromium/Chrome executable."
)


def _first_executable(paths: tuple[str, ...], names: tuple[str, ...]) -> str | None:
    for candidate in paths:
        if os.access(candidate, os.X_OK):
            return candidate
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def find_headless_shell() -> str | None:
    """A Chromium headless shell on this machine, or None."""
    return _first_executable(HEADLESS_SHELL_CANDIDATES, HEADLESS_SHELL_NAMES)


def find_chromium(playwright_default: str | None = None, *, headless: bool = False) -> str:
    """The executable to launch: $SURFER_CHROMIUM; for headless runs a
    Chromium headless shell when one is installed; a system Chromium; or
    Playwright's own browser when one is installed."""
    override = os.environ.get("SURFER_CHROMIUM")
    if override:
        path = Path(override)
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise ConfigError(f"SURFER_CHROMIUM={override} is not an executable file. {INSTALL_HINT}")
    if headless:
        shell = find_headless_shell()
        if shell:
            return shell
    found = _first_executable(SYSTEM_CANDIDATES, NAMES)
    if found:
        return found
    if playwright_default and os.access(playwright_default, os.X_OK):
        return playwright_default
    raise ConfigError(INSTALL_HINT)
