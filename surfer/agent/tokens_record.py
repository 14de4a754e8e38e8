"""A run's model calls token for token: `tokens.jsonl`, its reader, the chaining
check and the trajectory view a trainer takes.

One line per model call (`record_tokens`), in the order the calls were made:

    {"call": 7, "step": 3, "role": "policy", "accepted": true,
     "prompt": {"base": 4, "shared": 2816, "ids": [151644, [151655, 345], ...]}, "prompt_len": 3080,
     "completion_ids": [...], "logprobs": [...], "finish_reason": "stop", "cached_tokens": 2816,
     "policy": "holo2-8b", "policy_version": "step-120", "sampling": {"temperature": 0.7, "max_tokens": 1024},
     "previous": 4, "extends_previous": true, "dropped_stop": null, "break": null}

A session's prompts share most of their ids, so each prompt is stored against
the earlier call it follows (`previous`: the last call of its role; for a
localizer or validator continuing the policy's request, that policy call):
the length of the prefix it shares with that call's whole sequence (prompt and
completion, `shared`) and the ids after it (`ids`); a call with no earlier one
is stored in full (`base` null). In `ids`, `[id, n]` stands for `n` repeats of
`id` (an image's placeholder ids). `read_calls` gives back the exact full
sequences.

`extends_previous` says whether the prompt starts with the previous call's whole
sequence, token for token — what an engine that resumes a hybrid model's state
only where a request ended needs, and what lets a trainer join a role's calls
into one sequence (`trajectory_views`). It also holds where the prompt leaves
out only the stop id the previous call ended on, the chat template then closing
the turn itself (Nemotron-H's `\n<SPECIAL_12>\n` after a reply the model ended
without its newline: token_chain.py): the server never computes a request's
last generated id, so it still finds all it computed, and `dropped_stop` is
that stop id (null otherwise). Where it does not, `break` says where:
the index in the previous sequence (`at`), whether that is past its prompt
(`in_completion`: this prompt repeats the previous prompt whole, not its reply
— a layout that does not show replies, or a template that renders them
otherwise), and a few ids on either side of it (`before`, then `expected` in
the previous sequence and `found` in this prompt).
"""

from __future__ import annotations

import itertools
import json
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

TOKENS_FILE = "tokens.jsonl"
RUN_MIN = 4  # runs of at least this many equal ids are stored as [id, n]
BREAK_CONTEXT = 8  # ids shown on either side of a break


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the longest common prefix of `a` and `b` (slices compared a chunk at a time)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    i, step = 0, 256
    while step:
        while i + step <= n and a[i:i + step] == b[i:i + step]:
            i += step
        step //= 4
    while i < n and a[i] == b[i]:
        i += 1
    return i


def pack(ids: Iterable[int]) -> list[Any]:
    """`ids` with runs of RUN_MIN or more equal ids as [id, n]."""
    out: list[Any] = []
    for token, run in itertools.groupby(ids):
        count = sum(1 for _ in run)
        out.extend([[token, count]] if count >= RUN_MIN else [token] * count)
    return out


def unpack(packed: Iterable[Any]) -> list[int]:
    out: list[int] = []
    for item in packed:
        if isinstance(item, list):
            out.extend([int(item[0])] * int(item[1]))
        else:
            out.append(int(item))
    return out


class TokenLog:
    """Writes a run's tokens.jsonl, one call at a time (blocking: call it off the event loop)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / TOKENS_FILE
        # role -> (call, its whole sequence, its prompt's length, whether it ended on a stop id)
        self._last: dict[str, tuple[int, array, int, bool]] = {}

    def _previous(self, role: str, prompt: array) -> tuple[int, array, int, bool] | None:
        """The call this one follows: the role's last; for another role than the policy, the policy's
        last call instead when the prompt shares more with it (role continuation)."""
        own = self._last.get(role)
        if role == "policy":
            return own
        policy = self._last.get("policy")
        if own is None or (policy is not None and policy[0] > own[0]
                           and shared_prefix(policy[1], prompt) > shared_prefix(own[1], prompt)):
            return policy
        return own

    def line(self, call: int, step: int, role: str, accepted: bool, tokens: Any) -> dict[str, Any]:
        """The record of one call (`tokens`: a surfer.models.backend.Tokens), and its state kept for the next."""
        prompt = array("q", tokens.prompt_ids)
        previous = self._previous(role, prompt)
        shared = shared_prefix(previous[1], prompt) if previous else 0
        extends = previous is not None and shared == len(previous[1])
        dropped = None
        if previous is not None and not extends and previous[3] and shared == len(previous[1]) - 1 >= previous[2]:
            extends, dropped = True, int(previous[1][-1])  # all but the stop id: the template closed the turn
        broken = None
        if previous is not None and not extends:
            lo = max(0, shared - BREAK_CONTEXT)
            broken = {"at": shared, "in_completion": shared >= previous[2], "before": list(prompt[lo:shared]),
                      "expected": list(previous[1][shared:shared + BREAK_CONTEXT]), "found": list(prompt[shared:shared + BREAK_CONTEXT])}
        stopped = bool(tokens.completion_ids) and tokens.finish_reason == "stop"
        self._last[role] = (call, prompt + array("q", tokens.completion_ids), len(prompt), stopped)
        return {
            "call": call, "step": step, "role": role, "accepted": accepted,
            "prompt": {"base": previous[0] if previous else None, "shared": shared, "ids": pack(prompt[shared:])},
            "prompt_len": len(prompt),
            "completion_ids": list(tokens.completion_ids), "logprobs": list(tokens.logprobs),
            "finish_reason": tokens.finish_reason, "cached_tokens": tokens.cached_tokens,
            "policy": tokens.policy, "policy_version": tokens.policy_version, "sampling": dict(tokens.sampling),
            "previous": previous[0] if previous else None, "extends_previous": extends, "dropped_stop": dropped,
            "break": broken,
        }

    def add(self, call: int, step: int, role: str, accepted: bool, tokens: Any) -> None:
        record = self.line(call, step, role, accepted, tokens)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, separators=(",", ":")) + "\n")


@dataclass
class CallTokens:
    """One recorded call with its full sequences (what `read_calls` gives back)."""

    call: int
    step: int
    role: str
    accepted: bool
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    finish_reason: str | None = None
    cached_tokens: int | None = None
    policy: str = ""
    policy_version: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    previous: int | None = None
    extends_previous: bool = False
    dropped_stop: int | None = None  # the previous call's stop id this prompt leaves out (extends_previous all the same)
    broken: dict[str, Any] | None = None  # the line's `break`

    @property
    def sequence(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


def read_calls(run_dir: str | Path) -> list[CallTokens]:
    """A run's recorded calls with their exact full ids; [] when it recorded none. A torn last line
    (a crash mid-write) is skipped."""
    path = Path(run_dir) / TOKENS_FILE
    if not path.exists():
        return []
    sequences: dict[int, list[int]] = {}
    calls = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        prompt_part = data["prompt"]
        base = prompt_part.get("base")
        prefix = sequences[base][:prompt_part["shared"]] if base is not None else []
        prompt = prefix + unpack(prompt_part["ids"])
        call = CallTokens(
            call=data["call"], step=data["step"], role=data["role"], accepted=data.get("accepted", True),
            prompt_ids=prompt, completion_ids=[int(i) for i in data["completion_ids"]],
            logprobs=[float(x) for x in data["logprobs"]], finish_reason=data.get("finish_reason"),
            cached_tokens=data.get("cached_tokens"), policy=data.get("policy") or "", policy_version=data.get("policy_version"),
            sampling=data.get("sampling") or {}, previous=data.get("previous"),
            extends_previous=bool(data.get("extends_previous")), dropped_stop=data.get("dropped_stop"),
            broken=data.get("break"),
        )
        sequences[call.call] = call.sequence
        calls.append(call)
    return calls


def trajectory_views(calls: Sequence[CallTokens], role: str | None = None) -> list[dict[str, Any]]:
    """Each role's calls joined where they chain (each extends the one before, token for token) into
    one sequence: `prompt_ids` (the first call's prompt), `completion_ids` (everything after it),
    `completion_mask` (1: the model generated the id; 0: the environment wrote it — screenshots,
    observations, feedback) and `logprobs` aligned with it (0.0 where the mask is 0). The sequence is
    exactly what the last call's prompt and completion hold: a stop id that a later prompt left out (the
    template closing the turn itself) is not in it but in `dropped` (`at`: where it stood in
    completion_ids, `id`, `logprob`). A call that does not extend the one before starts a new view, so
    calls that never chain come one per view. `role`: that role's calls only."""
    views: list[dict[str, Any]] = []
    open_views: dict[str, dict[str, Any]] = {}
    for call in calls:
        if role is not None and call.role != role:
            continue
        view = open_views.get(call.role)
        if view is not None and call.extends_previous and call.previous == view["calls"][-1]:
            if call.dropped_stop is not None:  # the previous call's stop id: generated, then left out by this prompt
                view["completion_ids"].pop()
                view["completion_mask"].pop()
                view["dropped"].append({"at": len(view["completion_ids"]), "id": call.dropped_stop,
                                        "logprob": view["logprobs"].pop()})
                view["length"] -= 1
            added = call.prompt_ids[view["length"]:]
            view["completion_ids"] += added + call.completion_ids
            view["completion_mask"] += [0] * len(added) + [1] * len(call.completion_ids)
            view["logprobs"] += [0.0] * len(added) + _aligned(call)
            view["calls"].append(call.call)
            view["steps"].append(call.step)
        else:
            view = {
                "role": call.role, "calls": [call.call], "steps": [call.step], "policy": call.policy,
                "policy_version": call.policy_version, "prompt_ids": list(call.prompt_ids),
                "completion_ids": list(call.completion_ids), "completion_mask": [1] * len(call.completion_ids),
                "logprobs": _aligned(call), "dropped": [],
            }
            views.append(view)
            open_views[call.role] = view
        view["length"] = len(view["prompt_ids"]) + len(view["completion_ids"])
        if call.policy != view["policy"] or call.policy_version != view["policy_version"]:
            view["policy"], view["policy_version"] = "", None  # (a session keeps its policy: never expected)
    for view in views:
        del view["length"]
    return views


def _aligned(call: CallTokens) -> list[float]:
    return list(call.logprobs) if call.logprobs else [0.0] * len(call.completion_ids)


def chain_report(calls: Sequence[CallTokens]) -> dict[str, Any]:
    """Per role: how many calls followed an earlier one, how many of those extended it token for
    token (`extends`), how many at least repeated its whole prompt (`extends_prompt`: what a prefix
    cache reuses), and where the others broke."""
    report: dict[str, Any] = {}
    for call in calls:
        if call.previous is None:
            continue
        entry = report.setdefault(call.role, {"calls": 0, "extends": 0, "extends_prompt": 0, "breaks": []})
        entry["calls"] += 1
        if call.extends_previous:
            entry["extends"] += 1
        if call.extends_previous or (call.broken or {}).get("in_completion"):
            entry["extends_prompt"] += 1
        elif call.broken is not None:
            entry["breaks"].append({"call": call.call, "step": call.step, **call.broken})
    for entry in report.values():
        entry["share"] = round(entry["extends"] / entry["calls"], 4) if entry["calls"] else None
    return report
