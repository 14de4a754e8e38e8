"""What `surfer bench soak` does to a batch while it runs: a stand-in model
that fails some calls (HTTP 500, malformed replies, calls that never get an
answer), and the probes that read what the batch's process tree holds
(memory, descriptors, Chromium processes) and kill its Chromium."""

from __future__ import annotations

import random
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from surfer.bench.responder import StepResponder
from surfer.fleet.resources import load_psutil, process_role

_STEP = re.compile(r"^Step (\d+):", re.M)  # the policy prompt's history lines
HANG_SECONDS = 900.0  # a hung call is answered only long after any task's limit


@dataclass(frozen=True)
class FaultRates:
    """Shares of model calls that fail, each drawn independently per call."""

    http_500: float = 0.01
    malformed: float = 0.01
    hung: float = 0.005

    def check(self) -> None:
        from surfer.core.errors import ConfigError

        for name, rate in vars(self).items():
            if not 0 <= rate < 1:
                raise ConfigError(f"soak fault rate {name} must be in [0, 1), got {rate:g}")


class FaultyResponder(StepResponder):
    """The throughput benchmarks' stand-in model (fill the form, click the
    heading, answer at the step limit) with faults drawn from `rates` by a
    seeded generator: an exception (the stand-in answers HTTP 500), text that
    is not the JSON asked for, or a call held without an answer. Counts what
    it injected in `injected`, and appends each to the file `log` when given
    (the stand-in's process, which a restart replaces, cannot keep them)."""

    def __init__(self, centres: Any, frame: str, rates: FaultRates, seed: int, log: str | None = None) -> None:
        super().__init__(centres, frame)
        self.rates = rates
        self.log = log
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.injected = {"http_500": 0, "malformed": 0, "hung": 0}

    def _draw(self) -> str | None:
        with self._lock:
            roll = self._random.random()
            for fault in ("http_500", "malformed", "hung"):
                share = getattr(self.rates, fault)
                if roll < share:
                    self.injected[fault] += 1
                    if self.log:
                        with open(self.log, "a", encoding="utf-8") as f:
                            f.write(fault + "\n")
                    return fault
                roll -= share
        return None

    def __call__(self, request: Any) -> dict[str, Any] | str:
        fault = self._draw()
        if fault == "http_500":
            raise RuntimeError("injected failure")
        if fault == "hung":
            time.sleep(HANG_SECONDS)
        if fault == "malformed":
            return "I will now click the {button"
        if request.role == "policy" and "limit has been reached" not in request.text:
            # each session's own next action, from the steps its request lists (not a count shared by all)
            steps = [int(n) for n in _STEP.findall(request.text)]
            return {"thought": "Keep working.", "notes": "", "action": self.action(max(steps, default=0))}
        return super().__call__(request)


@dataclass
class TreeUsage:
    """What a batch's process tree holds at one moment."""

    finished: int  # tasks recorded when read
    pss_mib: float  # surfer + Playwright's driver + Chromium, proportional set size
    surfer_pss_mib: float
    chromium_pss_mib: float
    fds: int  # open descriptors, whole tree
    surfer_fds: int
    chromium_processes: int

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 1) if isinstance(v, float) else v for k, v in vars(self).items()}


def tree_usage(pid: int, finished: int) -> TreeUsage | None:
    """PSS, descriptors and Chromium processes of `pid` and its descendants
    (None when `pid` is gone)."""
    psutil = load_psutil()
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return None
    pss = {"surfer": 0, "driver": 0, "chromium": 0, "other": 0}
    fds = surfer_fds = chromium = 0
    for proc in procs:
        try:
            role = "surfer" if proc.pid == pid else process_role(proc)
            info = proc.memory_full_info()
            count = proc.num_fds()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        pss[role] += getattr(info, "pss", info.rss)
        fds += count
        if role == "surfer":
            surfer_fds = count
        elif role == "chromium":
            chromium += 1
    mib = 2**20
    return TreeUsage(
        finished=finished,
        pss_mib=(pss["surfer"] + pss["driver"] + pss["chromium"]) / mib,
        surfer_pss_mib=pss["surfer"] / mib,
        chromium_pss_mib=pss["chromium"] / mib,
        fds=fds,
        surfer_fds=surfer_fds,
        chromium_processes=chromium,
    )


def kill_browser(pid: int) -> int | None:
    """SIGKILL the Chromium browser process under `pid` (the one whose parent
    is not itself Chromium), as the out-of-memory killer would; its pid."""
    psutil = load_psutil()
    try:
        procs = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return None
    for proc in procs:
        try:
            if process_role(proc) == "chromium" and process_role(proc.parent()) != "chromium":
                proc.kill()
                return proc.pid
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None
