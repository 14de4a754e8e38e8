"""Checking a case's expectations at its end, the way a user would: visible
text and the URL bar (waiting a moment for them to come true), the agent's
answer, and plain-language statements judged by the validator on the final
screen."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

from surfer.agent.events import ModelCall
from surfer.models.imaging import prepare_image

from .executor import QaEnvironment
from .suite import AnswerExpectation, Expectation, TextExpectation, UrlExpectation, describe_expectation

POLL_SECONDS = 0.1


@dataclass
class ExpectationResult:
    expectation: str
    passed: bool
    detail: str = ""
    judged_by: str = "deterministic"  # or "validator"

    def to_dict(self) -> dict[str, Any]:
        return vars(self)


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def _wait_for(check: Callable[[], Awaitable[tuple[bool, str]]], timeout: float) -> tuple[bool, str]:
    deadline = time.monotonic() + timeout
    while True:
        passed, detail = await check()
        if passed or time.monotonic() >= deadline:
            return passed, detail
        await asyncio.sleep(POLL_SECONDS)


async def check_expectations(
    expectations: list[Expectation], env: QaEnvironment, *, answer: Optional[str], timeout: float,
    validator: Any, profile: Any, sink: Callable[[ModelCall], Awaitable[None]],
) -> list[ExpectationResult]:
    results = []
    for expectation in expectations:
        label = describe_expectation(expectation)
        if isinstance(expectation, TextExpectation):
            wanted = " ".join(expectation.text.split())

            async def text_visible(wanted: str = wanted) -> tuple[bool, str]:
                visible = await env.visible_text()
                return wanted in visible, f"visible text: {_clip(visible)!r}"

            passed, detail = await _wait_for(text_visible, timeout)
            results.append(ExpectationResult(label, passed, "" if passed else f"not visible on the page; {detail}"))
        elif isinstance(expectation, UrlExpectation):
            pattern = re.compile(expectation.url)

            async def url_matches(pattern: re.Pattern[str] = pattern) -> tuple[bool, str]:
                return bool(pattern.search(env.url)), f"the URL is {env.url}"

            passed, detail = await _wait_for(url_matches, timeout)
            results.append(ExpectationResult(label, passed, "" if passed else detail))
        elif isinstance(expectation, AnswerExpectation):
            passed = answer is not None and re.search(expectation.answer, answer) is not None
            results.append(ExpectationResult(label, passed, "" if passed else f"the answer was {_clip(repr(answer))}"))
        else:
            results.append(await _judge(expectation, env, validator, profile, sink))
    return results


async def _judge(statement: str, env: QaEnvironment, validator: Any, profile: Any, sink: Any) -> ExpectationResult:
    observation = await env.observe()
    image = await prepare_image(observation.screenshot, profile.image)
    verdict = await validator.judge(
        f"Check on the screen that this statement is true: {statement}", f"Confirmed: {statement}", [image], sink,
    )
    return ExpectationResult(describe_expectation(statement), verdict.accepted, verdict.reasons, judged_by="validator")
