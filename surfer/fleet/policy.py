"""`surfer.policy`: adapters on the model servers, and the policy a batch's sessions use.

    from surfer import policy

    await policy.load(config, "web-rl-0007", "/ckpt/step-7")    # on every server of `config`, or on none
    switch = policy.PolicySwitch("web-rl-0007@7")
    async for record in surfer.rollouts(config, tasks, policy=switch):
        ...
        await switch.to("web-rl-0008@8")      # sessions started from now on use it; running ones keep theirs
    await switch.drained("web-rl-0007")      # no session uses it any more
    await policy.unload(config, "web-rl-0007")

A policy is `name@version` (surfer/models/adapters.py): the adapter (or model) name every call of
the roles on the shared model goes to, and the version recorded with each call. A session takes the
batch's policy when it starts and keeps it to its end: it never mixes two.

`servers` is a configuration (its `servers`, or its `base_url`), a base URL, an Endpoint, or a list
of those. `surfer batch` is switched from outside through files in its output directory
(`surfer policy switch`, BatchPolicy below)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from surfer.core.errors import ConfigError
from surfer.models.adapters import AdapterError, Outcome, PolicyRef, Served, check_policy, load_adapter, served, unload_adapter
from surfer.models.endpoint import Endpoint

__all__ = ["AdapterError", "BatchPolicy", "PolicyRef", "PolicySwitch", "adapters", "check", "endpoints_of", "load",
           "request_switch", "unload"]

REQUEST_FILE = "policy-request.json"  # `surfer policy switch` writes it; a running batch answers in POLICY_FILE
POLICY_FILE = "policy.jsonl"  # the batch's policy at its start and every switch asked of it, accepted or refused
WATCH_EVERY_S = 0.5


def endpoints_of(servers: Any) -> list[Endpoint]:
    """The endpoints `servers` names (see the module docstring)."""
    if hasattr(servers, "server_specs"):  # an AgentConfig
        return [spec.endpoint for spec in servers.server_specs()]
    if isinstance(servers, (str, Endpoint)):
        servers = [servers]
    found = [s if isinstance(s, Endpoint) else Endpoint(base_url=str(s)) for s in servers]
    if not found:
        raise ConfigError("no model server given: pass --base-url (once per server) or a configuration")
    return found


async def load(servers: Any, name: str, path: str) -> list[Outcome]:
    """Load adapter `name` from `path` (on the servers' machines) on every server, or on none."""
    return await load_adapter(endpoints_of(servers), name, path)


async def unload(servers: Any, name: str) -> list[Outcome]:
    """Unload adapter `name` from every server that has it."""
    return await unload_adapter(endpoints_of(servers), name)


async def adapters(servers: Any) -> list[Served]:
    """Each server's engine, models and adapters (name -> path)."""
    return await served(endpoints_of(servers))


async def check(servers: Any, policy: str | PolicyRef) -> PolicyRef:
    """`policy`, once every server serves its name (AdapterError otherwise)."""
    ref = PolicyRef.parse(policy)
    await check_policy(endpoints_of(servers), ref)
    return ref


class PolicySwitch:
    """The policy new sessions of a batch take (None: the configured model), switched while it runs.
    A batch attaches its servers: `to()` checks every one serves the new name before switching."""

    def __init__(self, policy: str | PolicyRef | None = None) -> None:
        self.current = PolicyRef.parse(policy) if policy is not None else None
        self.endpoints: list[Endpoint] = []
        self.history: list[tuple[float, PolicyRef | None]] = [(time.time(), self.current)]
        self.on_switch: list[Callable[[PolicyRef], None]] = []
        self._running: Counter[str] = Counter()  # sessions running, by policy name
        self._changed: asyncio.Condition | None = None

    async def to(self, policy: str | PolicyRef) -> PolicyRef:
        """Switch: sessions started from now on use `policy`. AdapterError (the switch not made) when a
        server of the batch does not serve its name."""
        ref = PolicyRef.parse(policy)
        if self.endpoints:
            await check_policy(self.endpoints, ref)
        self.current = ref
        self.history.append((time.time(), ref))
        for listener in self.on_switch:
            listener(ref)
        return ref

    # -- the sessions -------------------------------------------------------------------------

    def begin(self, chosen: str | PolicyRef | None = None) -> PolicyRef | None:
        """A session starts: its policy (`chosen`, e.g. where a Ray driver chose it, else the current one)."""
        ref = PolicyRef.parse(chosen) if chosen is not None else self.current
        if ref is not None:
            self._running[ref.name] += 1
        return ref

    async def end(self, ref: PolicyRef | None) -> None:
        if ref is None:
            return
        self._running[ref.name] -= 1
        if self._running[ref.name] <= 0:
            del self._running[ref.name]
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()

    def running(self) -> dict[str, int]:
        """Sessions running now, by the name of their policy."""
        return dict(self._running)

    async def drained(self, name: str) -> None:
        """Return once no running session uses policy `name` (then its adapter can be unloaded)."""
        if self._changed is None:
            self._changed = asyncio.Condition()
        async with self._changed:
            await self._changed.wait_for(lambda: not self._running.get(name))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def request_switch(out_dir: str | Path, policy: str | PolicyRef, wait: float = 30.0) -> str:
    """Ask the batch running in `out_dir` to switch to `policy` (REQUEST_FILE) within `wait` seconds (a
    batch that sees it later, e.g. one started after, ignores it); the request's id, which its answer
    in POLICY_FILE carries."""
    from surfer.fleet.sessions import write_atomic

    ref = PolicyRef.parse(policy)
    out = Path(out_dir)
    if not out.is_dir():
        raise ConfigError(f"{out} is no batch output directory (it does not exist)")
    request = uuid.uuid4().hex[:12]
    write_atomic(out / REQUEST_FILE, json.dumps({"policy": str(ref), "request": request, "at": _now(),
                                                 "expires": time.time() + wait}).encode())
    return request


def read_answer(out_dir: str | Path, request: str) -> dict[str, Any] | None:
    """The batch's answer to switch request `request`, once it is in POLICY_FILE."""
    path = Path(out_dir) / POLICY_FILE
    if not path.exists():
        return None
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if record.get("request") == request:
            return record  # type: ignore[no-any-return]
    return None


class BatchPolicy:
    """A batch's policy: the switch its sessions read, checked on the batch's servers at the start,
    each switch logged in POLICY_FILE, and switch requests from other processes (REQUEST_FILE)
    watched while the batch runs. Each finished task's results line names the policy it used."""

    def __init__(self, policy: str | PolicyRef | PolicySwitch | None, endpoints: Sequence[Endpoint], out_dir: Path,
                 say: Callable[[str], None] | None = None, unnamed: tuple[str, str | None] = ("", None)) -> None:
        """`unnamed`: (the model served, its version) the line names when no policy is (--policy-version alone)."""
        self.switch = policy if isinstance(policy, PolicySwitch) else PolicySwitch(policy)
        self.unnamed = unnamed
        self.switch.endpoints = list(endpoints)  # none: a backend object given, no server to ask
        self.out_dir = out_dir
        self.say = say or (lambda text: None)
        self.used: dict[str, PolicyRef] = {}  # task id -> its session's policy, until its line is written
        self._seen: tuple[float, int] | None = None
        self._log_switches = False

    @property
    def current(self) -> PolicyRef | None:
        return self.switch.current

    async def start(self) -> None:
        """Before the first session: the policy is served everywhere (AdapterError, nothing run); later
        switches are logged."""
        if self.current is not None and self.switch.endpoints:
            await check_policy(self.switch.endpoints, self.current)
        if self.current is not None:
            await asyncio.to_thread(self._log, {"policy": str(self.current), "accepted": True, "reason": "start"})
        if not self._log_switches:
            self._log_switches = True
            self.switch.on_switch.append(lambda ref: self._log({"policy": str(ref), "accepted": True, "reason": "switch"}))

    def begin(self, task_id: str, chosen: str | PolicyRef | None = None) -> PolicyRef | None:
        ref = self.switch.begin(chosen)
        if ref is not None:
            self.used[task_id] = ref
        return ref

    async def end(self, ref: PolicyRef | None) -> None:
        await self.switch.end(ref)

    def line(self, task_id: str) -> dict[str, Any]:
        """The results line's `policy`: the session's, else the model served and its version (nothing without one)."""
        ref = self.used.pop(task_id, None)
        if ref is not None:
            return {"policy": str(ref)}
        model, version = self.unnamed
        return {"policy": f"{model}@{version}"} if model and version else {}

    # -- requests from outside ----------------------------------------------------------------

    def _stamp(self) -> tuple[float, int] | None:
        try:
            stat = (self.out_dir / REQUEST_FILE).stat()
        except OSError:
            return None
        return (stat.st_mtime, stat.st_size)

    def _log(self, record: dict[str, Any]) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with (self.out_dir / POLICY_FILE).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"at": _now(), **record}) + "\n")

    async def watch(self) -> None:
        """Answer switch requests (REQUEST_FILE) until cancelled: each accepted or refused, in POLICY_FILE;
        one whose asker stopped waiting, or answered already (a batch resumed in the same directory), is
        left alone."""
        while True:
            stamp = await asyncio.to_thread(self._stamp)
            if stamp is not None and stamp != self._seen:
                self._seen = stamp
                await self.answer()
            await asyncio.sleep(WATCH_EVERY_S)

    async def answer(self) -> None:
        """Read REQUEST_FILE and switch (or refuse, keeping the policy in force)."""
        try:
            request = json.loads(await asyncio.to_thread((self.out_dir / REQUEST_FILE).read_text, encoding="utf-8"))
            wanted, request_id = request["policy"], request.get("request")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self.say(f"policy switch request unreadable ({exc}); the policy stays {self.current}")
            return
        if time.time() > float(request.get("expires") or 0) or await asyncio.to_thread(read_answer, self.out_dir, request_id):
            return  # stale: its asker was told nothing was switched, or it was answered before
        try:
            ref = PolicyRef.parse(wanted)
            if self.switch.endpoints:
                await check_policy(self.switch.endpoints, ref)
        except ConfigError as exc:
            await asyncio.to_thread(self._log, {"policy": str(wanted), "accepted": False, "error": str(exc),
                                                "request": request_id, "kept": str(self.current) if self.current else None})
            self.say(f"policy switch to {wanted} refused: {exc}")
            return
        self.switch.current = ref
        self.switch.history.append((time.time(), ref))
        await asyncio.to_thread(self._log, {"policy": str(ref), "accepted": True, "reason": "request", "request": request_id})
        self.say(f"policy: sessions started from now on use {ref}")
