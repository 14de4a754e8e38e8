"""`surfer doctor`'s checks of this machine: Chromium found and launchable, a display for desktop use, the
optional extras, a GPU; and `Check`, the line each check gives."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "fail", "warn", "skip"]


@dataclass
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""
    required: bool = False

    @property
    def failed(self) -> bool:
        return self.required and self.status == "fail"


async def check_chromium() -> list[Check]:
    from surfer.core.errors import SurferError
    from surfer.tools.chromium import find_chromium, find_headless_shell

    try:
        from playwright.async_api import async_playwright
    except ImportError:
        return [Check("chromium", "fail", "playwright is not importable", "pip install surfer-agent", True)]
    chosen = os.environ.get("SURFER_CHROMIUM")  # the user's own choice is what to fix when it fails
    repoint = f"point SURFER_CHROMIUM at a Chromium or Chrome executable, or unset it (SURFER_CHROMIUM={chosen})"
    try:
        path = find_chromium(headless=True)
    except SurferError as exc:
        return [Check("chromium", "fail", f"SURFER_CHROMIUM={chosen} is not an executable file", repoint, True) if chosen
                else Check("chromium", "fail", "no Chromium found", str(exc), True)]
    from surfer.tools.browser import launch_chromium

    try:
        async with async_playwright() as playwright:
            browser = await launch_chromium(playwright)
            version = browser.version
            await browser.close()
    except SurferError as exc:
        return [Check("chromium", "fail", str(exc), repoint if chosen else
                      "install the Debian package `chromium`, or set SURFER_CHROMIUM", True)]
    checks = [Check("chromium", "ok", f"{path} launches headless (Chromium {version})", required=True)]
    if find_headless_shell():
        checks.append(Check("headless shell", "ok", "headless runs use the Chromium headless shell (cheap sessions)"))
    else:
        checks.append(Check(
            "headless shell", "warn", "no Chromium headless shell: each session costs ~10x more CPU to open",
            "sudo apt-get install -y chromium-headless-shell",
        ))
    return checks


def x_server_answers(display: str) -> bool:
    """Whether an X server accepts connections at `display` (':99', ':99.0', 'host:10'): its socket, nothing sent."""
    import re
    import socket

    found = re.fullmatch(r"(?:unix)?(?P<host>[^:]*):(?P<number>\d+)(?:\.\d+)?", display.strip())
    if found is None:
        return False
    number, host = int(found["number"]), found["host"]
    try:
        if host and host != "unix":
            socket.create_connection((host, 6000 + number), timeout=1).close()
            return True
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(1)
            path = f"/tmp/.X11-unix/X{number}"
            sock.connect(path if os.path.exists(path) else "\0" + path)  # (else Linux's abstract socket)
        return True
    except OSError:
        return False


def check_display() -> Check:
    x11 = os.environ.get("DISPLAY")
    if x11 and sys.platform.startswith("linux") and not x_server_answers(x11):
        return Check("display", "warn", f"DISPLAY={x11}, but no X server answers there: desktop use and --headful "
                     "need one (headless browsing works)", f"start one (`Xvfb {x11} -screen 0 1280x800x24 &`), run under "
                     "`xvfb-run -a`, or set DISPLAY to a running one")
    display = x11 or os.environ.get("WAYLAND_DISPLAY")
    if display:
        return Check("display", "ok", f"display {display} (desktop use and --headful)")
    return Check("display", "warn", "no DISPLAY: desktop use and --headful need one (headless browsing works)",
                 "run under `xvfb-run -a`, or set DISPLAY")


def check_extras() -> list[Check]:
    """One line per optional extra that surfer-agent's installed metadata declares (surfer/apps/extras.py)."""
    from importlib.metadata import PackageNotFoundError, version

    from surfer.apps import extras

    try:
        declared = extras.extras()
    except PackageNotFoundError:
        return [Check("extras", "warn", f"{extras.DIST} is not installed as a package here (run from a source tree?), so its extras are unknown",
                      "pip install -e . (or the wheel)")]
    checks = []
    for extra, needs in declared.items():
        if not needs:
            continue  # nothing to install on this platform
        lacking = extras.unmet(extra)
        if lacking:
            checks.append(Check(f"extra:{extra}", "skip", f"not installed ({', '.join(lacking)})",
                                f"pip install 'surfer-agent[{extra}]' if you need it"))
        else:
            shown = [f"{r.name} {version(r.name)}" for r in needs[:4]] + ([f"{len(needs) - 4} more"] if len(needs) > 4 else [])
            checks.append(Check(f"extra:{extra}", "ok", f"installed ({', '.join(shown)})"))
    return checks


def check_gpu() -> Check:
    from surfer.apps.serve import gpu_problem

    problem = gpu_problem()
    if problem is None:
        return Check("gpu", "ok", "an NVIDIA GPU is visible (needed only to serve models locally)")
    return Check("gpu", "skip", problem + " (needed only to serve models locally)", "serve the model elsewhere and use --base-url")
