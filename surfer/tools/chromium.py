"""Finding and launching a Chromium for Playwright, closed-network safe."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from surfer.core.errors import ConfigError

SYSTEM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", "/usr/bin/google-chrome-stable")
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")

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


def find_chromium(playwright_default: str | None = None) -> str:
    """The executable to launch: $SURFER_CHROMIUM, a system Chromium, or
    Playwright's own browser when one is installed."""
    override = os.environ.get("SURFER_CHROMIUM")
    if override:
        path = Path(override)
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise ConfigError(f"SURFER_CHROMIUM={override} is not an executable file. {INSTALL_HINT}")
    for candidate in SYSTEM_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    if playwright_default and os.access(playwright_default, os.X_OK):
        return playwright_default
    raise ConfigError(INSTALL_HINT)
