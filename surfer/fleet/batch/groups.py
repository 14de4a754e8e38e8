"""The samples of one task as a group: their rewards' mean and standard deviation,
and GRPO advantages when asked for.

A results line is written once, when its task's outcome is final, and never
rewritten; it holds its `group` as {id, index, size}. The group's statistics
are known only once every sample has its final line, so they are computed by
whoever reads the lines (`read_results(path, advantages=...)`,
`surfer.rollouts(groups=True)`), from the final lines alone:

    mean = the rewards' mean, std = their population standard deviation,
    advantage = (reward - mean) / std  (0 where std is 0)       # "grpo"

A group with a sample still to finish, or a sample without a reward (its
reward function failed: `reward_error`), gets null statistics. A group's size is
the largest its lines give (a batch resumed with more samples per task)."""

from __future__ import annotations

import statistics
from typing import Any, Iterable

from surfer.core.errors import ConfigError

ADVANTAGES = ("grpo",)


def check_advantages(advantages: str | None) -> str | None:
    if advantages is not None and advantages not in ADVANTAGES:
        raise ConfigError(f"advantages must be one of {', '.join(ADVANTAGES)}, got {advantages!r}")
    return advantages


def group_of(record: dict[str, Any]) -> dict[str, Any]:
    """A line's group as {id, index, size}; a line of an older version (its group a bare id) too."""
    group = record.get("group")
    if isinstance(group, dict):
        return dict(group)
    return {"id": group or record.get("id"), "index": record.get("sample") or 0, "size": None}


def reward_of(record: dict[str, Any]) -> float | None:
    reward = record.get("reward")
    return float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None


def group_statistics(rewards: list[float | None], size: int | None) -> tuple[float, float] | None:
    """(mean, std) of a complete group whose samples all have a reward, else None."""
    if size is None or len(rewards) != size or any(r is None for r in rewards):
        return None
    values = [r for r in rewards if r is not None]
    return statistics.fmean(values), statistics.pstdev(values)


def advantage(reward: float, mean: float, std: float) -> float:
    return 0.0 if std == 0 else (reward - mean) / std


def fill_groups(records: Iterable[dict[str, Any]], advantages: str | None = None) -> list[dict[str, Any]]:
    """The final lines (one per task) with each `group` complete: mean and std once the group's samples
    are all there with rewards, and the advantage with `advantages="grpo"`; copies, in the same order."""
    check_advantages(advantages)
    lines = [{**record, "group": group_of(record)} for record in records]
    members: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        members.setdefault(str(line["group"]["id"]), []).append(line)
    for group in members.values():
        # a batch resumed with more --samples: the group is as large as its latest lines say
        sizes = [line["group"]["size"] for line in group if isinstance(line["group"].get("size"), int)]
        size = max(sizes) if sizes else None
        stats = group_statistics([reward_of(line) for line in group], size)
        for line in group:
            mean, std = stats if stats is not None else (None, None)
            line["group"].update(size=size, mean=mean, std=std, advantage=None)
            if stats is not None and advantages == "grpo":
                line["group"]["advantage"] = advantage(reward_of(line) or 0.0, stats[0], stats[1])
    return lines
