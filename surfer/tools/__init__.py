"""Environments the agent acts in. Each is one object whose methods are the
actions: `BrowserEnvironment` (Playwright) and, as an extra, the desktop.

The names are imported on first use, so a light module of this package
(chromium.py, early_browser.py: what `surfer run` starts at process start)
loads none of the others."""

from surfer.core.lazy import lazy_exports

__all__ = ["ActionOutcome", "BrowserEnvironment", "DesktopEnvironment", "Environment"]

# Lazy too so `import surfer` never touches the desktop extra (pyautogui, mss).
__getattr__ = lazy_exports(globals(), {
    "ActionOutcome": "surfer.tools.base", "Environment": "surfer.tools.base",
    "BrowserEnvironment": "surfer.tools.browser", "DesktopEnvironment": "surfer.tools.desktop",
})
