"""`SurferEnv`: the Gymnasium `Env` over `AsyncSurferEnv`, for trainers that own the loop.

Gymnasium's API is synchronous and surfer is async: every `SurferEnv` of a process
runs on one event loop in a background thread, and the environments of that loop
share one Chromium (each episode its own browser context), as a batch's sessions do.
The browser starts with the first environment and closes with the last.

    env = SurferEnv(config, task="Find the price of ...", url="https://shop.example")
    obs, info = env.reset(options={"task": ..., "url": ...})
    obs, reward, terminated, truncated, info = env.step(policy_text)

Spaces: the observation is a `Dict` of `screenshot` (uint8, height x width x 3: the
viewport times the device scale factor), `url` and `task` (`Text`); the action space
is `Text` (the policy's completion; a dict is taken too). Registered as
`gymnasium.make("surfer/Browser-v0", config=..., task=..., url=...)`."""

from __future__ import annotations

import asyncio
import functools
import threading
from typing import Any

try:
    import gymnasium as gym
    from gymnasium import spaces
except ImportError as exc:  # pragma: no cover - the message names the extra
    raise ImportError("surfer.env.SurferEnv needs Gymnasium: pip install 'surfer-agent[gym]'") from exc

from surfer.agent.config import AgentConfig

from .episode import TEXT_LIMIT, AsyncSurferEnv, EpisodeOver

ACTION_LIMIT = 16384
_TABLES = ("_char_set", "_char_list", "_char_index", "_char_str")


@functools.cache
def charset() -> str:
    """Every printable character of Unicode's planes 0-3 (scripts, symbols, emoji, CJK extensions), a newline
    and a tab: what a URL, a task or a policy's answer may hold."""
    return "".join(chr(c) for c in range(0x20, 0x40000) if not 0xD800 <= c < 0xE000 and chr(c).isprintable()) + "\n\t"


class UnicodeText(spaces.Text):  # type: ignore[misc]
    """Gymnasium's `Text` over `charset()`, whose tables (tens of MB: a set, a list and an index of its
    characters) are built once per process and shared by every instance and copy — an environment's three
    spaces, a vector's batched copies — where each `Text` would build its own."""

    _shared: dict[str, Any] = {}

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None) -> None:
        if not UnicodeText._shared:
            super().__init__(max_length, min_length=min_length, charset=charset(), seed=seed)
            UnicodeText._shared.update((name, getattr(self, name)) for name in _TABLES)
            return
        super().__init__(max_length, min_length=min_length, charset="\n", seed=seed)  # (its own checks; tables below)
        self.__dict__.update(UnicodeText._shared)

    def __repr__(self) -> str:  # (Text's lists every character: 140,000 of them)
        return f"UnicodeText({self.min_length}, {self.max_length}, charset=printable characters of Unicode planes 0-3)"

    def __deepcopy__(self, memo: dict[int, Any]) -> "UnicodeText":
        import copy

        clone = object.__new__(type(self))
        memo[id(self)] = clone
        for name, value in self.__dict__.items():
            setattr(clone, name, value if name in _TABLES else copy.deepcopy(value, memo))
        return clone


class BrowserLoop:
    """The background event loop of a process's `SurferEnv`s and their shared Chromium."""

    _lock = threading.Lock()
    _current: "BrowserLoop | None" = None

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="surfer-env-loop", daemon=True)
        self.thread.start()
        self.browsers: dict[tuple[Any, ...], Any] = {}  # one SharedBrowser per kind of browser settings
        self.users = 0

    @classmethod
    def acquire(cls) -> "BrowserLoop":
        with cls._lock:
            if cls._current is None:
                cls._current = cls()
            cls._current.users += 1
            return cls._current

    def release(self) -> None:
        with BrowserLoop._lock:
            self.users -= 1
            if self.users > 0:
                return
            BrowserLoop._current = None
        self.run(self._close_browsers())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()  # (else a ResourceWarning: an unclosed event loop, at exit)

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def browser(self, config: AgentConfig) -> Any:
        """The started SharedBrowser these settings share (launched on first use)."""
        from surfer.fleet.browser_pool import SharedBrowser

        b = config.browser
        guarded = config.has_domain_rules
        key = (b.headless, b.cdp_url, b.browser_ws, guarded)
        if key not in self.browsers:
            shared = SharedBrowser(headless=b.headless, cdp_url=b.cdp_url, browser_ws=b.browser_ws, guarded=guarded)
            await shared.start()
            self.browsers[key] = shared
        return self.browsers[key]

    async def _close_browsers(self) -> None:
        for shared in self.browsers.values():
            await shared.close()
        self.browsers.clear()


class SurferEnv(gym.Env):  # type: ignore[misc]
    """See the module docstring. Arguments as for `AsyncSurferEnv`; `render_mode="rgb_array"` makes
    `render()` return the last screenshot."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self, config: AgentConfig | None = None, *, task: str = "", url: str | None = None, backend: Any = None,
        backends: dict[str, Any] | None = None, profile: str | None = None, render_mode: str | None = None,
        environment: Any = None,
    ) -> None:
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        self._loop = BrowserLoop.acquire()
        self._closed = False
        try:
            self._env = self._loop.run(self._make(config, task, url, backend, backends, profile, environment))
        except BaseException:
            self._loop.release()
            self._closed = True
            raise
        height, width, _ = self._env.screen_shape
        self.observation_space = spaces.Dict({
            "screenshot": spaces.Box(0, 255, (height, width, 3), dtype="uint8"),
            "url": UnicodeText(TEXT_LIMIT),
            "task": UnicodeText(TEXT_LIMIT),
        })
        self.action_space = UnicodeText(ACTION_LIMIT)
        self._screen: Any = None

    async def _make(self, config: AgentConfig | None, task: str, url: str | None, backend: Any,
                    backends: dict[str, Any] | None, profile: str | None, environment: Any) -> AsyncSurferEnv:
        env = AsyncSurferEnv(config, backend=backend, backends=backends, profile=profile, task=task, url=url,
                             environment=environment)
        if environment is not None:  # (no browser: e.g. the desktop)
            await env.measure()
        else:
            env.browser = await self._loop.browser(env.config)
        return env

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """A new episode; `options` may name its `task` and `url` (else the last ones, or the constructor's)."""
        super().reset(seed=seed)
        self._check_open()
        options = options or {}
        unknown = set(options) - {"task", "url"}
        if unknown:
            raise ValueError(f"reset options are task and url, not {', '.join(sorted(unknown))}")
        observation, info = self._loop.run(self._env.reset(options.get("task"), options.get("url")))
        self._screen = observation["screenshot"]
        return observation, info

    def step(self, action: str | dict[str, Any]) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        self._check_open()
        observation, reward, terminated, truncated, info = self._loop.run(self._env.step(action))
        self._screen = observation["screenshot"]
        return observation, reward, terminated, truncated, info

    def render(self) -> Any:
        return None if self.render_mode is None or self._screen is None else self._screen.copy()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self._env.close())
        finally:
            self._loop.release()

    def _check_open(self) -> None:
        if self._closed:
            raise EpisodeOver("the environment is closed")


ENV_ID = "surfer/Browser-v0"
if ENV_ID not in gym.registry:  # gymnasium.make("surfer/Browser-v0", config=..., task=..., url=...)
    gym.register(ENV_ID, entry_point="surfer.env.gym:SurferEnv")

__all__ = ["ENV_ID", "BrowserLoop", "EpisodeOver", "SurferEnv", "UnicodeText"]
