"""What the throughput benchmarks sample while sessions run: the messages
sent to Playwright's driver (DriverCalls) and the process tree's CPU and
memory over time (TreeSampler)."""

from __future__ import annotations

import threading
import time
from typing import Any

from surfer.fleet.resources import (
    ROLES,
    load_psutil,
    process_role,
    process_tree,
    process_tree_memory,
    system_memory_used,
)


class DriverCalls:
    """Counts the messages this process sends to Playwright's driver (each a
    round trip through Node.js, and most a DevTools command to Chromium), by
    method, while in use. `__waitInfo__` (fire-and-forget bookkeeping) is
    counted apart."""

    def __init__(self) -> None:
        self.by_method: dict[str, int] = {}
        self._original: Any = None

    @property
    def total(self) -> int:
        return sum(n for m, n in self.by_method.items() if m != "__waitInfo__")

    def __enter__(self) -> "DriverCalls":
        from playwright._impl.connection import Connection

        original = self._original = Connection.send_message_to_server
        counts = self.by_method

        def counted(connection: Any, obj: Any, method: str, params: Any, options: Any) -> Any:
            key = f"{getattr(obj, '_type', '?')}.{method}" if method != "__waitInfo__" else method
            counts[key] = counts.get(key, 0) + 1
            return original(connection, obj, method, params, options)

        Connection.send_message_to_server = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from playwright._impl.connection import Connection

        Connection.send_message_to_server = self._original  # type: ignore[method-assign]


class TreeSampler:
    """Samples the process tree (this process, Chromium, the driver, the
    stand-in) in a thread: CPU seconds over time, peak RSS, peak PSS.

    CPU and RSS are cheap to read and sampled every `interval`; PSS costs
    ~75 ms of CPU per sweep at 32 sessions, so it is read only every
    `pss_every` seconds or when RSS grows 10% past its peak. The sampler's
    own CPU is reported (`own_cpu`) so a reader can see what measuring cost."""

    def __init__(self, interval: float = 0.25, pss_every: float = 3.0) -> None:
        self.interval, self.pss_every = interval, pss_every
        self._cpu_by_pid: dict[int, float] = {}
        self._cpu_base: dict[int, float] = {}
        self._role_by_pid: dict[int, str] = {}
        self.samples: list[tuple[float, float]] = []  # (perf_counter, CPU seconds since start)
        self.role_samples: dict[str, list[tuple[float, float]]] = {role: [] for role in ROLES}
        self.peak = self.peak_pss = 0
        self.system_base = system_memory_used()
        self.system_peak = self.system_base
        self.own_cpu = 0.0
        self._last_pss = float("-inf")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)

    def _sample(self, *, force_pss: bool = False) -> None:
        psutil = load_psutil()
        rss = 0
        for proc in process_tree():
            try:
                with proc.oneshot():
                    times, mem = proc.cpu_times(), proc.memory_info()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            self._cpu_by_pid[proc.pid] = times.user + times.system  # exited processes keep their last value
            if proc.pid not in self._role_by_pid:
                self._role_by_pid[proc.pid] = process_role(proc)
            rss += mem.rss
        now = time.perf_counter()
        self.samples.append((now, sum(self._cpu_by_pid.values()) - sum(self._cpu_base.values())))
        by_role = dict.fromkeys(ROLES, 0.0)
        for pid, cpu in self._cpu_by_pid.items():
            by_role[self._role_by_pid.get(pid, "other")] += cpu - self._cpu_base.get(pid, 0.0)
        for role, cpu in by_role.items():
            self.role_samples[role].append((now, cpu))
        if force_pss or rss > self.peak * 1.1 or now - self._last_pss >= self.pss_every:
            full_rss, pss = process_tree_memory()
            self.peak_pss, self._last_pss = max(self.peak_pss, pss), now
            rss = max(rss, full_rss)
        self.peak = max(self.peak, rss)
        used = system_memory_used()
        if used is not None and self.system_peak is not None:
            self.system_peak = max(self.system_peak, used)

    @property
    def system_growth(self) -> int | None:
        """How much more of the machine's memory was in use at the peak than at the start."""
        return None if self.system_base is None or self.system_peak is None else self.system_peak - self.system_base

    def _run(self) -> None:
        started = time.thread_time()
        while not self._stop.wait(self.interval):
            self._sample()
        self.own_cpu = time.thread_time() - started

    def cpu_between(self, start: float, end: float, role: str | None = None) -> float:
        """CPU seconds the tree (or its processes of one `role`) used between two
        perf_counter times (interpolated)."""
        points = self.samples if role is None else self.role_samples[role]

        def at(t: float) -> float:
            for (t0, c0), (t1, c1) in zip(points, points[1:]):
                if t0 <= t <= t1:
                    return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.0)
            return points[0][1] if t < points[0][0] else points[-1][1]

        return at(end) - at(start) if points else 0.0

    def __enter__(self) -> "TreeSampler":
        self._sample(force_pss=True)
        self._cpu_base = dict(self._cpu_by_pid)
        now = time.perf_counter()
        self.samples = [(now, 0.0)]
        self.role_samples = {role: [(now, 0.0)] for role in ROLES}
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample(force_pss=True)
