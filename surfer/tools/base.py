"""The environment contract: observe, perform one action, settle, close."""

from __future__ import annotations

import abc
import contextlib
import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from surfer.core.actions import Action, Drag, targets_of
from surfer.core.errors import ActionNotSupported
from surfer.core.observation import Observation


@dataclass
class ActionOutcome:
    """What performing one action did and how long it took."""

    detail: str = ""
    action_seconds: float = 0.0
    settle_seconds: float = 0.0
    settle_reason: str = ""
    downloads: list[dict[str, Any]] = field(default_factory=list)  # files that arrived during the step

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "detail": self.detail, "action_seconds": round(self.action_seconds, 4),
            "settle_seconds": round(self.settle_seconds, 4), "settle_reason": self.settle_reason,
        }
        if self.downloads:
            out["downloads"] = self.downloads
        return out


@dataclass(frozen=True)
class EpisodeEnd:
    """An environment with ground truth (a benchmark page, an RL task) says
    the episode is over: the run ends with this status and reward."""

    status: str  # "success" or "failed"
    reason: str
    reward: float | None = None


class Environment(abc.ABC):
    """Subclasses implement `_act_<type>` for each action type they support,
    plus `start`, `observe`, `settle` and `close`. `perform` checks support and
    points, runs the action, then settles, timing both."""

    kind: str = "environment"
    # Action types it refuses (the policy is not offered them: each would cost the run a step).
    unsupported_actions: frozenset[str] = frozenset()
    # Where the current run's files go (downloads); None when nothing is kept.
    run_dir: Path | None = None
    # Asked (file name, URL) before a download is kept; set by the agent for its confirmation rules.
    confirm_download: Callable[[str, str], Awaitable[bool]] | None = None

    # The run's Playwright trace, once end_run saved one (browser sessions with --trace).
    trace_file: Path | None = None
    # The browser context's storage state at the run's end (cookies, localStorage), when the session was asked to
    # keep it (storage_state / save_storage_state / keep_storage_state): in memory only, never in the run directory.
    kept_state: dict[str, Any] | None = None

    def begin_run(self, run_dir: Path | None) -> None:
        """Called by the agent before each run."""
        self.run_dir = run_dir
        self.trace_file = None
        self.kept_state = None

    async def end_run(self, status: str = "") -> list[dict[str, Any]]:
        """Called by the agent after each run, with its status: the files downloaded during it."""
        return []

    def step_group(self, name: str) -> contextlib.AbstractAsyncContextManager[None]:
        """What the environment does during one step's action, named by it (a trace group in the
        browser; nothing by default)."""
        return contextlib.nullcontext()

    @property
    def alive(self) -> bool:
        """False once the environment died under a run (a crashed browser): a session starts a new one."""
        return True

    async def check_alive(self) -> bool:
        """`alive`, asked of the environment now (a session asks before each next task): a death
        that happened while nobody was using it is seen here, not in the next task's first step."""
        return self.alive

    @property
    def supported_actions(self) -> frozenset[str]:
        return frozenset(name[5:] for name in dir(self) if name.startswith("_act_"))

    @abc.abstractmethod
    async def start(self, url: str | None = None) -> None:
        """Open the environment (and go to `url` when given)."""

    @abc.abstractmethod
    async def observe(self) -> Observation:
        """Capture the screen."""

    @abc.abstractmethod
    async def settle(self, mark: Any) -> str:
        """Wait, bounded, until the effects of the last action are done; say why it stopped."""

    async def episode_end(self) -> EpisodeEnd | None:
        """Checked after every action: None while the episode goes on (the default)."""
        return None

    async def element_at(self, point: Any) -> Any:
        """What the screen says about the element at `point` (CSS px) as `ElementFacts`:
        its role, accessible name and form (the browser reads them from the page);
        None where nothing can tell (the default, the desktop)."""
        return None

    async def focused_element(self) -> Any:
        """As `element_at`, for the element that has the keyboard focus (what Enter or Space acts on);
        None where nothing can tell (the default, the desktop) or only the page has the focus."""
        return None

    def hand_over_refusal(self) -> str | None:
        """Why a person cannot take over this environment now (None: they can; every desktop can)."""
        return None

    def turn(self) -> asyncio.Lock:
        """Held by the run in progress here: one run at a time in an environment (an agent given one
        `environment=` and asked to run two tasks at once runs the second when the first has ended;
        both drove one page before). A lock of the running event loop's."""
        loop = asyncio.get_running_loop()
        held = getattr(self, "_turn", None)
        if held is None or held[0] is not loop:
            held = self._turn = (loop, asyncio.Lock())
        return held[1]

    def watch_person(self) -> Any:
        """What records a person's turn at the controls (`PersonWatch`, tools/person.py): by default
        the screens before and after it; the browser reads the page's events."""
        from surfer.tools.person import PersonWatch

        return PersonWatch(self)

    async def mark(self) -> Any:
        """Snapshot taken before an action, handed to `settle` (e.g. request counters)."""
        return None

    @abc.abstractmethod
    async def close(self) -> None:
        """Release everything."""

    async def perform(self, action: Action) -> ActionOutcome:
        handler = getattr(self, f"_act_{action.type}", None)
        if handler is None:
            raise ActionNotSupported(
                f"the {self.kind} environment cannot perform '{action.type}'; "
                f"it supports: {', '.join(sorted(self.supported_actions))}"
            )
        missing = [t for t, p in zip(targets_of(action), _points(action)) if p is None]
        if missing:
            raise ValueError(f"action {action.type} needs a localized point for target {missing[0]!r}")
        mark = await self.mark()
        started = time.perf_counter()
        detail = await self._run_action(handler, action) or ""
        acted = time.perf_counter()
        reason = await self.settle(mark)
        return ActionOutcome(detail, acted - started, time.perf_counter() - acted, reason)

    async def _run_action(self, handler: Any, action: Action) -> str:
        """Run one `_act_<type>` handler (environments wrap it, e.g. to stop at a dialog)."""
        return await handler(action)

    async def _act_wait(self, action: Any) -> str:
        await asyncio.sleep(action.seconds)
        return f"waited {action.seconds:g} s"

    async def __aenter__(self) -> "Environment":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _points(action: Action) -> list[Any]:
    if isinstance(action, Drag):
        return [action.point, action.to_point]
    return [getattr(action, "point", None)]
