"""The typed outcome of one run."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

Status = Literal["success", "failed", "limit", "stuck", "needs_approval", "needs_input", "error", "interrupted"]
# "browser_crash": Chromium or the page crashed under the run (an environment error of its own kind);
# "worker_lost": `surfer batch --ray` lost the task's worker twice.
ErrorKind = Literal["config", "unreachable", "model", "environment", "browser_crash", "worker_lost", "internal"]


class TokenTotals(BaseModel):
    prompt_tokens: int = Field(default=0, description="Prompt tokens, as the server counted them.")
    completion_tokens: int = Field(default=0, description="Completion tokens.")


class TimingTotals(BaseModel):
    seconds: float = Field(default=0.0, description="Wall time of the run.")
    model_seconds: float = Field(default=0.0, description="Time spent in model calls.")
    overhead_p50: float | None = Field(default=None, description="Median per-step time outside model calls.")
    overhead_p95: float | None = Field(default=None, description="95th percentile of the same.")
    waiting_seconds: float | None = Field(
        default=None, description="Time spent waiting for the user's replies to the agent's questions (not charged to the time limit).",
    )
    human_seconds: float | None = Field(
        default=None, description="Time a person held the controls after taking over (not charged to the time limit).",
    )


RewardSource = Literal["outcome", "environment", "function", "expectations"]


class Signal(BaseModel):
    """A reward signal of one step (the validator's verdict on an answer) or of the final page (an expectation)."""

    step: int | None = Field(description="The step it belongs to; null for a check on the final page.")
    source: Literal["validator", "expectation"] = Field(description="Who gave it.")
    value: float = Field(description="1.0 for an accepted answer or a met expectation, else 0.0.")
    detail: str = Field(default="", description="The validator's reasons, or the expectation and what was seen.")


class GroupInfo(BaseModel):
    """The run's place among the samples of one task (`--samples`). The files hold id, index and size; the
    statistics are filled in by the readers (`read_results`, `surfer.rollouts(groups=True)`) once every
    sample of the group has its final line with a reward, and are null until then."""

    id: str = Field(description="The task's id before samples were expanded: what the samples share.")
    index: int = Field(description="This sample's number, 0..size-1.")
    size: int = Field(description="How many samples the group has.")
    mean: float | None = Field(default=None, description="The group's mean reward (readers).")
    std: float | None = Field(default=None, description="The population standard deviation of the group's rewards "
                              "(readers).")
    advantage: float | None = Field(default=None, description="With advantages asked for (`grpo`): (reward - mean) "
                                    "/ std, 0 where std is 0 (readers).")


class RunResult(BaseModel):
    """status: success (answer accepted), failed (gave up / answer rejected),
    limit (step or time limit without an answer), stuck (kept repeating itself
    after being told), needs_approval (a sensitive action was refused and asked
    for again; the reason says how to allow it), needs_input (the agent asked the
    user a question nobody could answer; `question` holds it), error (server
    down, crash, bad configuration), interrupted (Ctrl-C / cancelled)."""

    status: Status = Field(description="How the run ended (see the class docstring).")
    answer: str | None = Field(default=None, description="The final answer, when the agent gave one.")
    data: Any = Field(default=None, description="The answer's data, validated, when the run had an answer schema.")
    reason: str | None = Field(default=None, description="Why the run ended so, in words.")
    question: str | None = Field(
        default=None, description="For status needs_input: the question the agent asked that nobody answered "
        "(supply the reply with --answers or a task's answers).",
    )
    reward: float | None = Field(
        default=None, description="The run's reward (see reward_source); null when it could not be computed "
        "(reward_error says why) or the run was interrupted.",
    )
    reward_source: RewardSource | None = Field(
        default=None, description="Where the reward came from: outcome (1 for success, else 0), environment (an "
        "environment with ground truth), function (the `reward` function named), expectations (the task's `expect`, "
        "checked on the final page: 1 when all are met).",
    )
    reward_error: str | None = Field(default=None, description="Why the reward function or the expectations gave "
                                     "no reward (an exception, a time-out).")
    signals: list[Signal] = Field(default=[], description="Per-step reward signals: the validator's verdicts, and "
                                  "each expectation checked on the final page.")
    group: GroupInfo | None = Field(default=None, description="Batch samples: the run's group (see GroupInfo).")
    error_kind: ErrorKind | None = Field(default=None, description="For status error (and some others): which kind.")
    task: str = Field(default="", description="The task.")
    url: str | None = Field(default=None, description="The start URL.")
    steps: int = Field(default=0, description="Steps taken.")
    run_id: str = Field(default="", description="The run's id.")
    run_dir: str | None = Field(default=None, description="The run directory.")
    usage: TokenTotals = Field(default=TokenTotals(), description="Tokens of every model call of the run.")
    timings: TimingTotals = Field(default=TimingTotals(), description="Time totals.")
    downloads: list[dict[str, Any]] = Field(
        default=[], description="Files the run downloaded: name, url, status (saved / too_large / over_count / failed "
        "/ cancelled / refused), path, bytes.",
    )
    artifacts: dict[str, str] = Field(
        default={}, description='Files made for reading the run, relative to its directory: "trace" (trace.zip), "video".',
    )
    storage_state: SkipJsonSchema[dict[str, Any] | None] = Field(  # (no file has it: not in the formats reference)
        default=None, exclude=True, repr=False,
        description="The browser context's storage state at the end (cookies, localStorage), when the run loaded or "
        "saved one (storage_state, save_storage_state, keep_storage_state). It signs anyone in: in memory only, never in "
        "result.json, --json or any file; pass it to the next Agent(storage_state=...).",
    )

    @property
    def ok(self) -> bool:
        return self.status == "success"
