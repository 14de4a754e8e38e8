"""A run's reward, given when the run ends (before result.json is written):

- **outcome** (the default): 1.0 for success, else 0.0;
- **environment**: an environment with ground truth ended the episode with its reward;
- **function**: a function the user names (`reward = "module:function"` or `"path/to/file.py:function"`),
  called with the `RunResult` and the run directory, sync (in a thread) or async, within `reward_timeout`;
- **expectations**: checks of the final page (a batch task's `expect`, judged by the caller's `judge`).

The validator's verdicts on answers are per-step `signals` in every case. A reward function or a judge
that raises or runs past its time-out gives no reward: `reward` null and `reward_error` saying why —
never an exception out of the run, never a made-up 0."""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import inspect
import math
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable

from surfer.core.errors import ConfigError

from .result import RunResult, Signal

# Runs whose reward would mean nothing: stopped, or never really run (their task runs again).
UNSCORED_ERRORS = frozenset({"config", "unreachable", "browser_crash", "worker_lost"})
Judge = Callable[[RunResult, Any], Awaitable[tuple[float, list[Signal]]]]  # (result, environment) -> reward, signals


@functools.cache  # once per process: a batch's sessions share the function (a failure is not kept)
def load_reward_function(spec: str) -> Callable[..., Any]:
    """The function `spec` names: "package.module:function" or "path/to/file.py:function" (relative to the
    working directory). ConfigError, in one line, for anything that does not resolve to a callable."""
    module_name, sep, name = spec.rpartition(":")
    if not sep or not module_name or not name.isidentifier():
        raise ConfigError(f"reward {spec!r}: name a function as module:function or file.py:function")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name).expanduser()
            if not path.is_file():
                raise ConfigError(f"reward {spec!r}: no file {path}")
            loader = importlib.util.spec_from_file_location(f"surfer_reward_{path.stem}", path)
            assert loader is not None and loader.loader is not None
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.append(str(Path.cwd()))  # a module beside the tasks, as `python -m` would find it
            module = importlib.import_module(module_name)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever importing the user's module raised
        raise ConfigError(f"reward {spec!r}: cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ConfigError(f"reward {spec!r}: {module_name} has no function {name!r}")
    return function


def validator_signals(records: Iterable[Any]) -> list[Signal]:
    """The validator's verdicts, one signal each, from a run's step records."""
    return [
        Signal(step=record.index, source="validator", value=1.0 if verdict.accepted else 0.0, detail=verdict.reasons)
        for record in records for verdict in record.verdicts
    ]


def _in_daemon_thread(function: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
    """`function(*args)` in a thread of its own: one that hangs past its time-out is left behind without
    holding up the process's exit (the default executor's threads are waited for)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if not future.done():  # (given up on at its time-out)
            future.set_exception(error) if error is not None else future.set_result(value)

    def work() -> None:
        try:
            value, error = function(*args), None
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop is gone
            pass

    threading.Thread(target=work, name="surfer-reward", daemon=True).start()
    return future


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"returned {value!r}, not a finite number")
    return float(value)


@dataclass
class Rewarder:
    """How a run is rewarded: `function` (a spec or a callable), else `judge`, else the outcome."""

    function: Callable[..., Any] | None = None
    label: str = ""  # the spec, for messages
    judge: Judge | None = None
    timeout: float = 60.0

    @classmethod
    def of(cls, spec: str | Callable[..., Any] | None, timeout: float = 60.0, judge: Judge | None = None) -> "Rewarder":
        if spec is None or callable(spec):
            label = getattr(spec, "__qualname__", "") if spec is not None else ""
            return cls(spec, label, judge, timeout)
        return cls(load_reward_function(spec), spec, judge, timeout)

    async def score(self, result: RunResult, records: Iterable[Any], run_dir: Path | None, env: Any) -> None:
        """Give `result` its reward, source and signals (in place). Never raises but for cancellation."""
        if result.status == "interrupted" or result.error_kind in UNSCORED_ERRORS:
            return
        result.signals = [*validator_signals(records), *result.signals]
        if self.function is not None:
            await self._guarded(result, "function", f"reward function {self.label}", self._call(result, run_dir))
        elif self.judge is not None:
            await self._guarded(result, "expectations", "checking the expectations", self._judged(result, env))
        elif result.reward is not None:
            result.reward_source = "environment"
        else:
            result.reward, result.reward_source = (1.0 if result.status == "success" else 0.0), "outcome"

    async def _guarded(self, result: RunResult, source: str, what: str, work: Awaitable[float]) -> None:
        result.reward, result.reward_source = None, source  # type: ignore[assignment]
        try:
            result.reward = await asyncio.wait_for(work, self.timeout)
        except TimeoutError:
            result.reward_error = f"{what} took longer than {self.timeout:g} s (reward_timeout)"
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's code: recorded, the run goes on
            result.reward_error = f"{what} failed: {type(exc).__name__}: {exc}"[:2000]

    async def _call(self, result: RunResult, run_dir: Path | None) -> float:
        assert self.function is not None
        if inspect.iscoroutinefunction(self.function):
            value = await self.function(result, run_dir)
        else:  # a blocking function stays off the loop other sessions share
            value = await _in_daemon_thread(self.function, result, run_dir)
            if inspect.isawaitable(value):
                value = await value
        return _number(value)

    async def _judged(self, result: RunResult, env: Any) -> float:
        assert self.judge is not None
        reward, signals = await self.judge(result, env)
        result.signals = [*result.signals, *signals]
        return _number(reward)
