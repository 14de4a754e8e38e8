"""The async core of `surfer.env`: one episode at a time over a browser session,
stepped by the caller's policy with the action as the policy would answer it.

    env = AsyncSurferEnv(config, browser=shared)          # a SharedBrowser many environments use
    obs, info = await env.reset(task="...", url="https://...")
    obs, reward, terminated, truncated, info = await env.step('{"thought": "...", "action": {...}}')

An action is the policy's completion (text; the agent's own parser reads it: a JSON object
{thought, notes, action} in a code fence or not), the same as a dict, or a bare action
object ({"type": "click", ...}). A pointed action is placed either by `"point": {"x", "y"}`
in pixels of the observation's screenshot, or by the localizer (the configured endpoint,
or `backends={"localizer": ...}`) from its `target` description. What goes wrong in a step
— unparseable text, a localizer or action error — comes back in `info["error"]`, the
observation being the unchanged screen; only misuse (a step before `reset` or after the
episode ended) raises.

The episode ends (terminated) with an answer (judged by the validator when the configuration
validates answers; a rejected answer lets the episode go on, `max_rejections` times), a
`fail`, or an environment with ground truth saying so; it is cut off (truncated) at
`max_steps`. The reward at the end is the run's reward as surfer gives it everywhere
(agent/rewards.py: outcome 1/0, the environment's, or the configured `reward` function,
called with the result and None for the run directory); every other step's is 0."""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from surfer.agent.config import AgentConfig
from surfer.agent.events import Verdict
from surfer.agent.loop import Agent
from surfer.agent.result import RunResult
from surfer.agent.roles import PolicyDecision, StepFailed, _pydantic_parser
from surfer.core.actions import Action, Answer, CssPoint, Drag, Fail, targets_of, with_points
from surfer.core.coordinates import ImageGeometry, model_to_css
from surfer.fleet.browser_pool import SharedBrowser
from surfer.core.errors import ActionFailed, ActionNotSupported, ModelOutputError, SurferError
from surfer.models.imaging import prepare_image

Observation = dict[str, Any]  # {"screenshot": uint8 array (H, W, 3), "url": str, "task": str}
TEXT_LIMIT = 8192  # characters of the observation's url and task (longer ones are cut)


class EpisodeOver(RuntimeError):
    """`step` after the episode ended (or before `reset`): call `reset` first."""


def decode_screenshot(data: bytes) -> np.ndarray:
    """The encoded screenshot as an RGB uint8 array (blocking: call it off the event loop)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"), dtype=np.uint8).copy()


def parse_action(action: str | dict[str, Any]) -> PolicyDecision:
    """The policy's answer as the agent reads it; ModelOutputError when it is unusable."""
    if isinstance(action, str):
        action = _pointed_text(action)
    elif isinstance(action, dict):
        action = json.dumps(_with_targets(action if "action" in action else {"action": action}))
    else:
        raise ModelOutputError(f"an action is the policy's text or a dict, not {type(action).__name__}")
    parse = _pydantic_parser(PolicyDecision)
    try:
        return parse(action)
    except ModelOutputError:
        bare = _bare_action(action)
        if bare is None:
            raise
        return parse(json.dumps({"action": bare}))


def _with_targets(decision: dict[str, Any]) -> dict[str, Any]:
    """A policy that grounds its own clicks gives points, not descriptions: a point without its `target`
    (`to_point` without `to_target`) is described by where it is, so that the action reads as the agent's."""
    action = decision.get("action")
    if not isinstance(action, dict):
        return decision
    action = dict(action)
    for point_key, target_key in (("point", "target"), ("to_point", "to_target")):
        point = action.get(point_key)
        if isinstance(point, dict) and not action.get(target_key):
            action[target_key] = f"the point ({point.get('x')}, {point.get('y')})"
    return {**decision, "action": action}


def _pointed_text(text: str) -> str:
    """The policy's text, with `_with_targets` applied where it holds an action object with points."""
    from surfer.models.schema import parse_json_object

    if "point" not in text:
        return text
    try:
        data = parse_json_object(text)
    except ModelOutputError:
        return text  # (the parser says what is wrong with it)
    if not isinstance(data, dict):
        return text
    bare = "type" in data and "action" not in data
    decision = _with_targets({"action": data} if bare else data)
    return json.dumps(decision["action"] if bare else decision)


def _bare_action(text: str) -> dict[str, Any] | None:
    from surfer.models.schema import parse_json_object

    try:
        data = parse_json_object(text)
    except ModelOutputError:
        return None
    return data if isinstance(data, dict) and "type" in data and "action" not in data else None


@dataclass
class _StepMark:  # what validator_signals reads of a step
    index: int
    verdicts: list[Verdict] = field(default_factory=list)


class AsyncSurferEnv:
    """See the module docstring. `browser`: a started `surfer.fleet.browser_pool.SharedBrowser` (or a
    Playwright Browser) the session opens its context on; without one, the environment launches its own
    Chromium. `backend` / `backends` as for `Agent` (e.g. a ScriptedModel, or {"localizer": ...}).
    `environment`: a function making another surfer environment for each episode instead of a browser
    session, e.g. `lambda: DesktopEnvironment(display=":99")` (then `measure()` once before the first
    `reset`, for the screen's shape)."""

    def __init__(
        self, config: AgentConfig | None = None, *, browser: Any = None, backend: Any = None,
        backends: dict[str, Any] | None = None, profile: str | None = None, task: str = "", url: str | None = None,
        environment: Callable[[], Any] | None = None,
    ) -> None:
        from surfer.agent.config import load_config

        self.config = config or load_config()
        self.agent = Agent(self.config, backend=backend, backends=backends, profile=profile)
        self.browser = browser
        self.environment = environment
        self._shape: tuple[int, int, int] | None = None  # an environment's screen, measured
        self.task, self.url = task, url  # what `reset` runs when its options name none
        self.session: Any = None
        self.steps = 0
        self.over = True
        self._marks: list[_StepMark] = []
        self._last: Any = None  # the last Observation (surfer's), for points and the localizer
        self._images: list[Any] = []  # prepared screenshots of the episode (the validator's last ones)
        self._rejections = 0
        self._origin = ""

    @property
    def screen_shape(self) -> tuple[int, int, int]:
        """(height, width, 3) of the observation's screenshot."""
        if self._shape is not None:
            return self._shape
        if self.environment is not None:
            raise RuntimeError("measure() the environment's screen first")
        b = self.config.browser
        return round(b.viewport[1] * b.device_scale_factor), round(b.viewport[0] * b.device_scale_factor), 3

    async def reset(self, task: str | None = None, url: str | None = None) -> tuple[Observation, dict[str, Any]]:
        """A new episode: a fresh browser context at `url`, the task `task`."""
        from surfer.agent.environments import browser_environment, check_start_url

        task = task if task is not None else self.task
        url = url if url is not None else self.url
        if url and self.environment is None:
            check_start_url(url, self.config)  # ConfigError: a refused start URL is misuse
        self.over = True  # until the new episode has started
        await self._close_session()
        if self.environment is not None:
            self.session = self.environment()
        else:
            browser = await self.browser.get() if isinstance(self.browser, SharedBrowser) else self.browser
            self.session = browser_environment(self.config, browser)
        self.session.begin_run(None)
        try:
            await self.session.start(url)
        except BaseException:
            await self._close_session()
            raise
        self.task, self.url = task, url  # the next reset's, when its options name none
        self.steps, self.over, self._marks, self._images, self._rejections = 0, False, [], [], 0
        self._origin = ""  # where the episode started (a card number typed elsewhere is sensitive)
        return await self._observe(), {"url": self._last.url, "title": self._last.title}

    async def step(self, action: str | dict[str, Any]) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        if self.over:
            raise EpisodeOver("the episode is over (terminated or truncated): call reset() before step()")
        self.steps += 1
        mark = _StepMark(self.steps)
        self._marks.append(mark)
        info: dict[str, Any] = {"step": self.steps}
        result: RunResult | None = None
        try:
            decision = parse_action(action)
            info["action"] = decision.action.model_dump(mode="json", exclude_none=True, exclude={"point", "to_point"})
            result = await self._act(decision.action, mark, info)
        except (ModelOutputError, StepFailed, ActionFailed, ActionNotSupported, ValueError) as exc:
            info["error"] = str(exc)
        except SurferError as exc:  # the model server or the browser went away: said, and the episode goes on
            info["error"] = f"{type(exc).__name__}: {exc}"
        if result is None and "error" not in info:
            end = await self.session.episode_end()
            if end is not None:
                result = self._result(end.status, reason=end.reason, reward=end.reward)
        truncated = result is None and self.steps >= self.config.max_steps
        if truncated:
            result = self._result("limit", reason=f"step limit of {self.config.max_steps} reached")
        observation = await self._observe()
        reward = 0.0
        if result is not None:
            self.over = True
            await self.agent.rewarder.score(result, self._marks, None, self.session)
            info["result"] = result.model_dump(mode="json", exclude={"run_id", "run_dir", "usage", "timings"})
            reward = result.reward if result.reward is not None else 0.0
        return observation, float(reward), result is not None and not truncated, truncated, info

    async def measure(self) -> tuple[int, int, int]:
        """The shape of the screen an `environment` shows, from one screenshot."""
        if self.environment is None:
            return self.screen_shape
        session = self.environment()
        try:
            await session.start(None)
            shot = (await session.observe()).screenshot
        finally:
            await session.close()
        self._shape = shot.size.height, shot.size.width, 3
        return self._shape

    async def close(self) -> None:
        await self._close_session()
        self.over = True
        await self.agent.aclose()

    # -- inside a step -------------------------------------------------------------

    async def _act(self, action: Action, mark: _StepMark, info: dict[str, Any]) -> RunResult | None:
        if isinstance(action, Fail):
            return self._result("failed", reason=action.reason)
        if isinstance(action, Answer):
            return await self._answer(action, mark, info)
        points = await self._points(action)
        if points:
            action = with_points(action, points)
            info["points"] = [{"x": round(p.x, 2), "y": round(p.y, 2)} for p in points]
        await self._check_sensitive(action)
        outcome = await self.session.perform(action)
        info["outcome"] = {"detail": outcome.detail, "settle_reason": outcome.settle_reason,
                           **({"downloads": outcome.downloads} if outcome.downloads else {})}
        return None

    async def _points(self, action: Action) -> list[CssPoint]:
        """The action's CSS points: its own (pixels of the observation) or the localizer's."""
        given = [p for p in (getattr(action, "point", None), getattr(action, "to_point", None)) if p is not None]
        needed = targets_of(action)
        if given and len(given) == len(needed):
            shot = self._last.screenshot
            geometry = ImageGeometry(shot.size, shot.size, shot.scale, *shot.origin)
            return [model_to_css(p.x, p.y, "absolute", geometry) for p in given]
        if given:
            raise ModelOutputError("a drag with points needs both `point` and `to_point`" if isinstance(action, Drag)
                                   else "give the action's points, or none and let the localizer find its targets")
        sink = self._discard
        return [await self.agent.localizer.locate(target, self._images[-1], sink) for target in needed]

    async def _check_sensitive(self, action: Action) -> None:
        """A sensitive action (buying, deleting, sending, ...) is refused as in a run, unless the configuration
        approves it (`sensitive_actions = "approve"`, `approve_domains`)."""
        from surfer.agent.confirm import acted_on, origin_of

        url = self._last.url
        self._origin = getattr(self, "_origin", "") or origin_of(url)
        element = await acted_on(self.session, action)
        sensitive = self.agent.sensitive
        reason = sensitive.reason(action, url, "\n".join(self._last.notices), element, self._origin)
        if reason is None or self.config.sensitive_actions == "approve":
            return
        if not sensitive.on_confirm_domain(url) and sensitive.approved_host(url):
            return
        raise ActionFailed(f"not performed: {reason} (sensitive; allow it with sensitive_actions = \"approve\" or "
                           "approve_domains)")

    async def _answer(self, action: Answer, mark: _StepMark, info: dict[str, Any]) -> RunResult | None:
        if not self.config.validate_answers:
            return self._result("success", answer=action.text)
        verdict = await self.agent.validator.judge(
            self.task, action.text, self._images[-self.agent.layout.max_images:], self._discard)
        mark.verdicts.append(verdict)
        info["verdict"] = {"accepted": verdict.accepted, "reasons": verdict.reasons}
        if verdict.accepted:
            return self._result("success", answer=action.text, reason=verdict.reasons or None)
        self._rejections += 1
        if self._rejections > self.config.max_rejections:
            return self._result("failed", answer=action.text,
                                reason=f"the validator rejected the answer {self._rejections} times: {verdict.reasons}")
        return None

    async def _observe(self) -> Observation:
        observation = await self.session.observe()
        self._last = observation
        prepared = await prepare_image(observation.screenshot, self.agent.profile.image, self.agent.image_tokens)
        self._images = [*self._images[-7:], prepared]
        screenshot = await asyncio.to_thread(decode_screenshot, observation.screenshot.data)
        if screenshot.shape != self.screen_shape:  # (a page that resized the window): kept to the declared shape
            screenshot = await asyncio.to_thread(_fit, screenshot, self.screen_shape)
        return {"screenshot": screenshot, "url": observation.url[:TEXT_LIMIT], "task": self.task[:TEXT_LIMIT]}

    def _result(self, status: str, **fields: Any) -> RunResult:
        return RunResult(status=status, task=self.task, url=self.url, steps=self.steps, **fields)  # type: ignore[arg-type]

    @staticmethod
    async def _discard(call: Any) -> None:
        return None

    async def _close_session(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            await session.close()


def _fit(screenshot: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    from PIL import Image

    image = Image.fromarray(screenshot).resize((shape[1], shape[0]))
    return np.asarray(image, dtype=np.uint8).copy()


__all__ = ["AsyncSurferEnv", "EpisodeOver", "Observation", "decode_screenshot", "parse_action"]
