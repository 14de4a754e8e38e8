"""surfer inside verl's agent loop: one AgentLoopOutput per episode.

verl's `AgentLoopBase.run(sampling_params, **kwargs)` returns an
`AgentLoopOutput`: `prompt_ids`, `response_ids`, `response_mask` (1 for ids the
model generated, 0 for those the environment wrote), `response_logprobs`,
`multi_modal_data` ({"image": [...]}), `reward_score`, `num_turns`. surfer's
`--per trajectory` records are that already, under TRL's names:

    class SurferAgentLoop(AgentLoopBase):
        async def run(self, sampling_params, **kwargs):
            records = await run_surfer_episode(config, kwargs["raw_prompt"])
            return AgentLoopOutput(**agent_loop_output(records), metrics=AgentLoopMetrics())

This file needs neither verl nor a GPU: `agent_loop_output` builds the fields
as a dict, and its test runs it on recorded runs.
"""

from __future__ import annotations

import tempfile
from typing import Any


def agent_loop_output(records: list[dict[str, Any]], *, load_images: bool = True) -> dict[str, Any]:
    """One episode's policy chain (a `surfer export --per trajectory` record) as AgentLoopOutput's fields.
    An episode whose policy calls did not chain (a window layout, a template that re-renders history)
    has several records: pass one, or train on `--per call` rows instead."""
    policy = [r for r in records if r["role"] == "policy"]
    if not policy:
        raise ValueError("the episode has no policy sequence: it ended before the policy's first call "
                         "(its results line says why)")
    if len(policy) != 1:
        raise ValueError(f"the episode's policy calls form {len(policy)} sequences, not one: train on `--per call` rows "
                         "(or run with --prompt-layout conversation, and with Holotron send tokens in: through chat "
                         "completions its template re-renders the history)")
    record = policy[0]
    images: list[Any] = list(record["images"])
    if load_images:
        from PIL import Image

        images = [Image.open(path).convert("RGB") for path in images]
    return {
        "prompt_ids": record["prompt_ids"],
        "response_ids": record["completion_ids"],
        "response_mask": record["completion_mask"],
        "response_logprobs": record["logprobs"],
        "multi_modal_data": {"image": images},
        "reward_score": record["reward"],
        "num_turns": 2 * len(record["calls"]),
        "extra_fields": {"policy": record["policy"], "policy_version": record["policy_version"],
                         "processor": record["processor"], "group": record["group"]},
    }


async def run_surfer_episode(config: Any, task: str) -> list[dict[str, Any]]:
    """Run `task` once with surfer (`config`: an AgentConfig) and return its trajectory records."""
    import surfer
    from surfer.apps.export import export_records

    out = tempfile.mkdtemp(prefix="surfer-verl-")
    async for _ in surfer.rollouts(config, [task], out_dir=out):
        pass
    return export_records(out, per="trajectory")
