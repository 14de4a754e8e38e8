"""The typed outcome of one run."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Status = Literal["success", "failed", "limit", "stuck", "needs_approval", "error", "interrupted"]
# "browser_crash": Chromium or the page crashed under the run (an environment error of its own kind).
ErrorKind = Literal["config", "unreachable", "model", "environment", "browser_crash", "internal"]


class TokenTotals(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class TimingTotals(BaseModel):
    seconds: float = 0.0
    model_seconds: float = 0.0
    overhead_p50: float | None = None
    overhead_p95: float | None = None


class RunResult(BaseModel):
    """status: success (answer accepted), failed (gave up / answer rejected),
    limit (step or time limit without an answer), stuck (kept repeating itself
    after being told), needs_approval (a sensitive action was refused and asked
    for again; the reason says how to allow it), error (server down, crash,
    bad configuration), interrupted (Ctrl-C / cancelled)."""

    status: Status
    answer: str | None = None
    data: Any = None  # the answer's data, validated, when the run had an answer schema
    reason: str | None = None
    reward: float | None = None  # from environments with ground truth (benchmarks, RL tasks)
    error_kind: ErrorKind | None = None
    task: str = ""
    url: str | None = None
    steps: int = 0
    run_id: str = ""
    run_dir: str | None = None
    usage: TokenTotals = TokenTotals()
    timings: TimingTotals = TimingTotals()
    # files the run downloaded: name, url, status (saved / too_large / over_count / failed / cancelled), path, bytes
    downloads: list[dict[str, Any]] = []
    # files made for reading the run, relative to its directory: "trace" (trace.zip), "video"
    artifacts: dict[str, str] = {}
    # the browser context's storage state at the end (cookies, localStorage), when the run loaded or saved one
    # (storage_state, save_storage_state, keep_storage_state): signs anyone in, so it is in memory only, never
    # in result.json, --json or any file (excluded from every dump); pass it to the next Agent(storage_state=...)
    storage_state: dict[str, Any] | None = Field(default=None, exclude=True, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "success"
