"""The files of a run directory, as models: one line of trajectory.jsonl and
run.json. The writers (trajectory.py, events.py's `StepRecord.to_dict`) build
plain dicts; these models say what those dicts hold, the reference docs print
their JSON Schemas, and the tests check every line a real run writes against
them (extra keys forbidden), so a new field without its description fails."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["policy", "localizer", "validator"]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Tokens(_Closed):
    prompt_tokens: int = Field(description="Prompt tokens, as the server counted them.")
    completion_tokens: int = Field(description="Completion tokens.")


class RequestSummary(_Closed):
    """What the trajectory keeps of one request."""

    schema_: str = Field(alias="schema", description="The role's schema name: policy, localizer or validator.")
    messages: int = Field(description="Chat messages in the request.")
    images: int = Field(description="Images in the request.")
    text_chars: int = Field(description="Characters of text in the request.")
    temperature: float | None = Field(description="Sampling temperature sent, if any.")
    max_tokens: int | None = Field(description="Completion token cap sent, if any.")
    prompt: list[dict[str, Any]] = Field(
        description="The prompt in chat format; images as {type: image, step: N}, the step whose screenshot it is.",
    )


class ModelCallLine(_Closed):
    """One model request of a step and its reply."""

    role: Role = Field(description="The role asked.")
    request: RequestSummary = Field(description="The request, images referenced by step.")
    completion: str = Field(description="The raw completion text.")
    seconds: float = Field(description="Time from sending the request to its reply.")
    structured: str = Field(description="How the JSON schema reached the model: response_format / structured_outputs "
                            "(server-enforced), prompt (in the prompt only), scripted, none.")
    error: str | None = Field(
        description="Why the completion was rejected (then retried with this as feedback), else null.",
    )
    usage: Tokens = Field(description="Tokens of this call.")
    model: str = Field(default="", description="The model the server answered with: with a batch's policy, the "
                       "adapter's name (docs: Adapters).")
    policy_version: str | None = Field(default=None, description="The version of the session's policy (`NAME@VERSION`) "
                                       "that served the call, else the configured policy_version (--policy-version); "
                                       "absent without either.")
    call: int | None = Field(
        default=None, description="With record_tokens: the call's number in the run, its line in tokens.jsonl.",
    )


class VerdictLine(_Closed):
    accepted: bool = Field(description="Whether the validator accepted the answer.")
    reasons: str = Field(description="The validator's reasons.")
    answer: str = Field(description="The answer it judged.")


class Point(_Closed):
    x: float = Field(description="CSS pixels from the viewport's left edge (screen pixels on the desktop).")
    y: float = Field(description="CSS pixels from the viewport's top edge.")


class StepTimings(_Closed):
    model: float = Field(description="Seconds in model calls.")
    action: float = Field(description="Seconds performing the action.")
    settle: float = Field(description="Seconds waiting for the page or screen to settle.")
    screenshot: float = Field(description="Seconds taking the screenshot.")
    encode: float = Field(description="Seconds preparing images for the model.")
    total: float = Field(description="Seconds for the whole step.")
    waiting: float = Field(default=0.0, description="Seconds waiting for a person (a reply, a yes, a take-over); only when there was a wait.")
    overhead: float = Field(description="total - model - waiting: everything that was neither a model call nor a person.")


class TrajectoryLine(_Closed):
    """One line of `trajectory.jsonl`: everything known about one step."""

    index: int = Field(description="Step number, from 1; for a human step, the number of the last agent step before it (0: none).")
    actor: Literal["agent", "human"] | None = Field(
        default=None, description="Who acted: absent for the agent's steps, `human` for what a person did after taking over.",
    )
    human: int | None = Field(default=None, description="A human step's number in the run, from 1.")
    screenshot_after: str | None = Field(
        default=None, description="A human step's screenshot after the action (`screenshot` is the one before it).",
    )
    url: str = Field(description="The page's URL when the screenshot was taken (empty on the desktop).")
    title: str = Field(description="The page or window title.")
    screenshot: str = Field(
        description="The screenshot file, relative to the run directory (screenshots/step-NNN.jpg).",
    )
    screen: dict[str, Any] = Field(description="The screenshot's geometry: pixel size, scale, CSS origin.")
    thought: str = Field(description="The policy's reasoning for the step.")
    notes: str = Field(description="The notes the policy keeps across steps.")
    action: dict[str, Any] | None = Field(description="The parsed action (one of the action types), or null.")
    points: list[Point] = Field(description="The resolved points of the action's targets.")
    outcome: dict[str, Any] = Field(
        description="What the action did: the environment's report (navigation, downloads, dialogs, refusals, errors).",
    )
    calls: dict[str, list[ModelCallLine]] = Field(description="The model calls of the step, by role.")
    verdicts: list[VerdictLine] = Field(description="The validator's verdicts on answers given in this step.")
    error: str | None = Field(description="Why the step failed, else null.")
    hints: list[str] | None = Field(default=None, description="Hints from the user that reached this step's prompt.")
    confirmation: dict[str, Any] | None = Field(
        default=None, description="A sensitive action's confirmation: the reason, whether approved, and by whom.",
    )
    element: dict[str, Any] | None = Field(
        default=None, description="What the page said about the element acted on (role, name, tag, form).",
    )
    timings: StepTimings = Field(description="Where the step's time went.")
    usage: Tokens = Field(description="Tokens of all the step's model calls.")


class RunMeta(_Closed):
    """`run.json`: what was asked, written when the run's first step starts (or with its result)."""

    run_id: str = Field(description="The run's id (its directory name for batch runs and MCP).")
    task: str = Field(description="The task, in plain language.")
    url: str | None = Field(description="The start URL, if any.")
    config: dict[str, Any] = Field(description="A summary of the configuration the run used (secrets scrubbed).")


class StoredPrompt(_Closed):
    """A prompt's ids, stored against the call it follows."""

    base: int | None = Field(description="The call whose sequence (prompt and completion) the prompt starts from; null: stored in full.")
    shared: int = Field(description="How many ids of that call's sequence the prompt starts with.")
    ids: list[Any] = Field(description="The ids after them; `[id, n]` stands for n repeats of id (an image's placeholders).")


class ChainBreak(_Closed):
    """Where a prompt stops repeating the call it follows."""

    at: int = Field(description="The index in the previous call's sequence where they differ.")
    in_completion: bool = Field(description="The break is past the previous prompt: this prompt repeats that prompt whole, not its reply.")
    before: list[int] = Field(description="Up to 8 ids the two share, just before the break.")
    expected: list[int] = Field(description="Up to 8 ids of the previous sequence from the break.")
    found: list[int] = Field(description="Up to 8 ids of this prompt from the break.")


class TokensLine(_Closed):
    """One line of `tokens.jsonl` (record_tokens): one model call token for token."""

    call: int = Field(description="The call's number in the run (`call` in its trajectory.jsonl entry).")
    step: int = Field(description="The step it belongs to.")
    role: Role = Field(description="The role asked.")
    accepted: bool = Field(description="Whether its completion was used (false: rejected and asked again).")
    prompt: StoredPrompt = Field(description="The prompt's ids as the server computed them, images expanded.")
    prompt_len: int = Field(description="The prompt's length in ids.")
    completion_ids: list[int] = Field(description="The ids the model generated (its end-of-turn id included).")
    logprobs: list[float] = Field(description="The sampling log-probability of each generated id.")
    finish_reason: str | None = Field(description="Why generation stopped: stop, length.")
    cached_tokens: int | None = Field(description="Prompt ids the server found cached, where it says.")
    policy: str = Field(description="The model or adapter name the server answered with.")
    policy_version: str | None = Field(description="The version set by the caller (--policy-version), else null.")
    sampling: dict[str, Any] = Field(description="The sampling parameters the request set (temperature, max_tokens, ...).")
    previous: int | None = Field(description="The call it follows: the role's last, or the policy's for a continuation.")
    extends_previous: bool = Field(description="The prompt starts with that call's whole sequence, token for token "
                                   "(or all of it but the stop id it ended on: dropped_stop).")
    dropped_stop: int | None = Field(default=None, description="The stop id that call ended on, which this prompt leaves "
                                     "out (the chat template closes the turn itself), else null.")
    break_: ChainBreak | None = Field(alias="break", description="Where it stops doing so, else null.")

