"""A real Chromium driven through Playwright's async API, split by job: the
session (session.py: launch, context, tabs, crashes, close), what it sees
(capture.py: screenshot, title, settle) and what it does (actions.py:
actions, dialogs, file choosers, downloads). `BrowserEnvironment` is the one
object whose methods are the actions."""

from surfer.tools.browser.actions import DOWNLOAD_WRAP_UP_S, FILE_CHOOSER_TIMEOUT_MS, WHEEL_NOTCH_PX, normalize_url
from surfer.tools.browser.capture import image_size
from surfer.tools.browser.session import CLOSE_TIMEOUT_S, CRASH_SIGNS, BrowserEnvironment
from surfer.tools.chromium import launch_chromium, start_chromium, use_node_compile_cache

__all__ = [
    "CLOSE_TIMEOUT_S", "CRASH_SIGNS", "DOWNLOAD_WRAP_UP_S", "FILE_CHOOSER_TIMEOUT_MS", "WHEEL_NOTCH_PX", "BrowserEnvironment",
    "image_size", "launch_chromium", "normalize_url", "start_chromium", "use_node_compile_cache",
]
