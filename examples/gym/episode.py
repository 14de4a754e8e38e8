"""One episode of surfer's Gymnasium environment, the policy played by a function.

    python examples/gym/episode.py https://example.com

Put your model where `policy` is: it sees the observation (`screenshot`, an RGB
array; `url`; `task`) and answers as surfer's policy does, a JSON object with an
action. This one scrolls twice and gives up, so it runs without any model server."""

from __future__ import annotations

import json
import sys
from typing import Any

from surfer.agent.config import AgentConfig
from surfer.env import SurferEnv


def policy(observation: dict[str, Any], step: int) -> str:
    if step < 2:
        return json.dumps({"thought": "Look further down.", "action": {"type": "scroll", "direction": "down"}})
    return json.dumps({"thought": "Nothing to do here.", "action": {"type": "fail", "reason": "not found"}})


def run_episode(env: SurferEnv, task: str, url: str) -> tuple[float, dict[str, Any]]:
    observation, info = env.reset(options={"task": task, "url": url})
    total, step = 0.0, 0
    while True:
        observation, reward, terminated, truncated, info = env.step(policy(observation, step))
        total, step = total + reward, step + 1
        if "error" in info:  # the step did nothing: the policy's answer was unusable, or the action failed
            print(f"step {step}: {info['error']}")
        if terminated or truncated:
            return total, info["result"]


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        print("usage: python examples/gym/episode.py URL", file=sys.stderr)
        sys.exit(2)
    env = SurferEnv(AgentConfig(max_steps=10))
    try:
        reward, result = run_episode(env, "Find the opening hours.", argv[0])
    finally:
        env.close()
    print(f"reward {reward} ({result['status']}: {result['reason']}) after {result['steps']} steps")


if __name__ == "__main__":
    main(sys.argv[1:])
