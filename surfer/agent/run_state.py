"""The state of one task run: what a run has done so far (its steps, model
calls, refusals, repetitions, the questions asked and the time spent waiting
for a person), and the result it ends with. The steps (agent/steps.py) update
it; the task run (agent/task_run.py) makes it and turns it into a `RunResult`."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

from surfer.core.deadline import pause_deadline
from surfer.core.errors import ConfigError

from .answers import AnswerSchema
from .confirm import Refusal
from .events import StepRecord
from .questions import PresetAnswers, QuestionHandler
from .repetition import RepetitionDetector
from .result import RunResult, TimingTotals, TokenTotals


def check_task(task: object, url: object = None) -> None:
    """A task as a run takes it, checked before anything starts (no browser, no directory): a task that
    says nothing is a ConfigError (it ran, the model guessing at a goal), a task or URL that is not a
    string a TypeError (it failed deep in the run)."""
    if not isinstance(task, str):
        raise TypeError(f"the task must be a str, not {type(task).__name__}")
    if not task.strip():
        raise ConfigError("the task is empty: say what the agent should do")
    if url is not None and not isinstance(url, str):
        raise TypeError(f"url must be a str or None, not {type(url).__name__}")
    if url and not url.strip():  # (it opened "https://": "Cannot navigate to invalid URL")
        raise ConfigError("the url is blank: give the page to start on, or None to start on a blank page")


def check_listeners(listeners: object) -> None:
    """ConfigError unless `listeners` is None or a list (any iterable) of callables: a single callable
    failed as "not iterable"."""
    if listeners is not None and (callable(listeners) or isinstance(listeners, (str, bytes, Mapping))
                                  or not hasattr(listeners, "__iter__")
                                  or not all(callable(listener) for listener in listeners)):  # type: ignore[attr-defined]
        raise ConfigError("listeners= takes a list of callables, each given every event: listeners=[print]")


@dataclass
class RunState:
    task: str
    url: str | None
    run_id: str
    run_dir: str | None
    scrub: Callable[[str], str] = str  # keeps the secrets out of what the result says
    answer: AnswerSchema | None = None
    on_question: QuestionHandler | None = None  # who replies to the policy's ask_user (agent/questions.py)
    answers: PresetAnswers = field(default_factory=PresetAnswers)  # replies given beforehand, by question pattern
    earlier: str = ""  # the session's account of its earlier tasks (agent/session.py), for the prompt
    started: float = field(default_factory=time.monotonic)
    records: list[StepRecord] = field(default_factory=list)
    repetition: RepetitionDetector = field(default_factory=RepetitionDetector)
    hints: list[str] = field(default_factory=list)  # given since the last step began; recorded on the next step
    current: StepRecord | None = None  # the step in progress
    repeats: int = 0
    calls: int = 0  # model calls made so far (each call's number in the run: ModelCall.seq)
    start_origin: str = ""  # where the task started: typing a card number elsewhere is sensitive
    refusals: list[Refusal] = field(default_factory=list)  # sensitive actions refused so far
    needs_approval: str | None = None  # set when the policy asks again for what was refused: the run ends
    question: str | None = None  # the question nobody answered: the run ends needs_input
    waited: float = 0.0  # seconds spent waiting for the user's replies (not charged to the time limit)
    human: float = 0.0  # seconds a person held the controls (agent/handover.py; not charged either)

    def result(self, status: str, **fields: Any) -> RunResult:
        overheads = sorted(r.timings.overhead for r in self.records if r.action is not None)
        usage = TokenTotals()
        for record in self.records:
            usage.prompt_tokens += record.usage.prompt_tokens
            usage.completion_tokens += record.usage.completion_tokens
        timings = TimingTotals(
            seconds=round(time.monotonic() - self.started, 3),
            model_seconds=round(sum(r.timings.model for r in self.records), 3),
            overhead_p50=round(statistics.median(overheads), 4) if overheads else None,
            overhead_p95=round(overheads[min(len(overheads) - 1, int(0.95 * len(overheads)))], 4) if overheads else None,
            waiting_seconds=round(self.waited, 3) if self.waited else None,
            human_seconds=round(self.human, 3) if self.human else None,
        )
        if status == "needs_input" and self.question:
            fields.setdefault("question", self.question)
        fields = {k: self.scrub(v) if isinstance(v, str) else v for k, v in fields.items()}
        return RunResult(
            status=status, task=self.task, url=self.url, steps=len(self.records), run_id=self.run_id,
            run_dir=self.run_dir, usage=usage, timings=timings, **fields,  # type: ignore[arg-type]
        )


def time_limit_reason(max_seconds: float) -> str:
    return f"time limit of {max_seconds:g} s reached"


async def waiting_for_person(asking: Awaitable[Any], run: RunState) -> Any:
    """Await a person's reply, moving the run's limits later while it waits
    (the wait is counted in `run.waited`, not charged to the task's time limit)."""
    loop = asyncio.get_running_loop()
    waiting = asyncio.ensure_future(asking)
    last = started = loop.time()
    try:
        while True:
            done, _ = await asyncio.wait({waiting}, timeout=0.5)
            now = loop.time()
            pause_deadline(now - last)
            last = now
            if done:
                return waiting.result()
    finally:
        run.waited += loop.time() - started
        if not waiting.done():
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
