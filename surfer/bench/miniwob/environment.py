"""A MiniWoB++ task page as a surfer environment: the installed `miniwob`
package's pages served on 127.0.0.1, seeded episodes, a screenshot cropped
to the 160x210 task area (the reward HUD and click canvas left out) at a
high device scale factor, and the raw reward read back after each action.

The crop is only a screenshot `clip` plus the capture origin in the
`Screenshot`: surfer.core.coordinates maps the model's points back."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from surfer.core.errors import ConfigError, EnvironmentFailure
from surfer.core.observation import Observation
from surfer.tools.base import EpisodeEnd
from surfer.tools.browser import BrowserEnvironment

TASK_WIDTH, TASK_HEIGHT = 160, 210
EPISODE_MS = 10 * 60 * 1000  # the page's own episode timer (default 10 s) must outlast the agent

_START = """
async ({ seed, maxMs }) => {
  Math.seedrandom(seed);
  core.EPISODE_MAX_TIME = maxMs;
  core.startEpisodeReal();
  const t0 = Date.now();
  while (!WOB_TASK_READY) {
    if (Date.now() - t0 > 10000) throw new Error("task not ready after 10 s");
    await new Promise((r) => setTimeout(r, 10));
  }
  const wrap = document.getElementById("wrap").getBoundingClientRect();
  return { utterance: core.getUtterance(), x: wrap.left, y: wrap.top };
}
"""

_REWARD = "() => ({ done: WOB_DONE_GLOBAL, raw: WOB_RAW_REWARD_GLOBAL, reward: WOB_REWARD_GLOBAL, reason: WOB_REWARD_REASON })"

_GROUND_TRUTH = """
() => ({
  utterance: core.getUtterance(),
  dom: core.getDOMInfo(),
  done: WOB_DONE_GLOBAL,
  scroll: Array.from(document.querySelectorAll("textarea, #area div, #area ul, select")).filter(
    (e) => e.scrollHeight > e.clientHeight).map((e) => ({ id: e.id, tag: e.tagName, top: e.scrollTop,
    max: e.scrollHeight - e.clientHeight })),
  selects: Array.from(document.querySelectorAll("select")).map((s) => ({ id: s.id,
    value: s.selectedIndex >= 0 ? s.options[s.selectedIndex].text : null })),
  popup: window.__surferWidgets ? window.__surferWidgets.drawn() : [],
})
"""


def miniwob_html_dir() -> Path:
    """The installed package's html/ folder (found without importing it: its
    __init__ pulls in gymnasium and selenium, which surfer does not need)."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the MiniWoB++ benchmark needs the miniwob package: pip install 'surfer-agent[miniwob]'")
    html = Path(list(spec.submodule_search_locations)[0]) / "html"
    if not (html / "core" / "core.js").exists():
        raise ConfigError(f"the installed miniwob package has no html/core/core.js under {html}")
    return html


def available_tasks() -> list[str]:
    return sorted(p.stem for p in (miniwob_html_dir() / "miniwob").glob("*.html"))


@dataclass
class EpisodeReward:
    done: bool
    raw: float
    reward: float
    reason: str | None

    @property
    def success(self) -> bool:
        return self.done and self.raw > 0


class MiniWobEnvironment(BrowserEnvironment):
    """One MiniWoB++ page in its own browser context. Screenshots show the
    task area only (a clip); the episode ends when the page says it is done;
    `on_observe` (optional) receives the page's ground truth after each
    capture (the oracle's eyes)."""

    def __init__(
        self, *, scale: float = 3.0, on_observe: Callable[[dict[str, Any]], None] | None = None, **options: Any
    ) -> None:
        options.setdefault("viewport", (400, 300))
        options.setdefault("screenshot_format", "png")
        super().__init__(device_scale_factor=scale, **options)
        self.on_observe = on_observe

    async def begin_episode(self, seed: int, max_ms: int = EPISODE_MS) -> str:
        """Start a seeded episode on the loaded page; return the instruction."""
        try:
            started = await self.page.evaluate(_START, {"seed": seed, "maxMs": max_ms})
        except Exception as exc:  # noqa: BLE001
            raise EnvironmentFailure(f"could not start the MiniWoB episode: {str(exc).splitlines()[0]}") from None
        self.clip = (float(started["x"]), float(started["y"]), TASK_WIDTH, TASK_HEIGHT)
        await self.settle(await self.mark())
        return str(started["utterance"])

    async def reward(self) -> EpisodeReward:
        state = await self.page.evaluate(_REWARD)
        return EpisodeReward(
            bool(state["done"]), float(state["raw"] or 0), float(state["reward"] or 0), state["reason"]
        )

    async def episode_end(self) -> EpisodeEnd | None:
        reward = await self.reward()
        if not reward.done:
            return None
        return EpisodeEnd("success" if reward.success else "failed", f"episode done, raw reward {reward.raw:g}", reward.raw)

    async def observe(self) -> Observation:
        observation = await super().observe()
        if self.on_observe is not None:
            shot = observation.screenshot
            truth = await self.page.evaluate(_GROUND_TRUTH)
            truth.update(
                url=observation.url, screenshot={"width": shot.size.width, "height": shot.size.height},
                scale=shot.scale, origin=list(shot.origin),
            )
            self.on_observe(truth)
        return observation
