"""`surfer.env`: a Gymnasium environment over surfer's browser, for trainers that own the loop.

    from surfer.env import SurferEnv                     # pip install 'surfer-agent[gym]'
    env = SurferEnv(config, task="...", url="https://...")
    obs, info = env.reset()
    obs, reward, terminated, truncated, info = env.step(policy_completion)

`AsyncSurferEnv` is the same environment for asyncio code (no Gymnasium needed).
See episode.py for what an action is and how a step ends, gym.py for the spaces and threads."""

from __future__ import annotations

from typing import Any

from .episode import AsyncSurferEnv, EpisodeOver

__all__ = ["AsyncSurferEnv", "EpisodeOver", "SurferEnv"]


def __getattr__(name: str) -> Any:
    if name in ("SurferEnv", "BrowserLoop"):  # imports Gymnasium: only when asked for
        from . import gym

        return getattr(gym, name)
    raise AttributeError(name)
