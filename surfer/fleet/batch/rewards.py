"""How a batch rewards each task's run (surfer/agent/rewards.py): the task line's
`reward` function, else its `expect` (QA expectations checked on the final page,
by the same code as QA suites: the validator looks at the screen), else the
configuration's `reward`, else the outcome."""

from __future__ import annotations

from typing import Any, Callable

from surfer.agent.config import AgentConfig
from surfer.agent.result import GroupInfo, Signal
from surfer.agent.rewards import Judge, Rewarder, load_reward_function

from .tasks import BatchTask

EXPECT_WAIT_S = 3.0  # how long text and URL expectations wait to come true (a QA suite's default)


class TaskRewards:
    """The reward functions of a batch's tasks, imported once each when the batch is made (a function
    that cannot be imported is a ConfigError before anything runs)."""

    def __init__(self, config: AgentConfig, tasks: list[BatchTask]) -> None:
        self.config = config
        self.functions: dict[str, Callable[..., Any]] = {}
        for spec in {config.reward, *(task.reward for task in tasks)} - {None}:
            self.functions[spec] = load_reward_function(spec)  # type: ignore[index,arg-type]

    def rewarder(self, task: BatchTask, agent: Any) -> Rewarder:
        spec = task.reward or (None if task.expect else self.config.reward)
        function = self.functions[spec] if spec else None
        judge = expectations_judge(task, agent) if task.expect and not task.reward else None
        return Rewarder(function, spec or "", judge, self.config.reward_timeout)


def expectations_judge(task: BatchTask, agent: Any) -> Judge:
    """The task's expectations, checked on the final page through the agent's validator."""

    async def judge(result: Any, env: Any) -> tuple[float, list[Signal]]:
        from surfer.qa.executor import QaEnvironment
        from surfer.qa.expectations import check_expectations

        async def sink(call: Any) -> None:
            return None

        checked = await check_expectations(
            task.expect, QaEnvironment(env, agent.secrets, None), answer=result.answer, timeout=EXPECT_WAIT_S,
            validator=agent.validator, profile=agent.profile, sink=sink,
        )
        signals = [
            Signal(step=None, source="expectation", value=1.0 if c.passed else 0.0,
                   detail=c.expectation + (f": {c.detail}" if c.detail else ""))
            for c in checked
        ]
        return (1.0 if all(c.passed for c in checked) else 0.0), signals

    return judge


def group_info(task: BatchTask) -> GroupInfo:
    """The task's group as its line and result.json hold it (the statistics come from the readers)."""
    return GroupInfo(id=task.group or task.id or "", index=task.sample or 0, size=task.samples or 1)
