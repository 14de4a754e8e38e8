"""`surfer bench miniwob`: seeded MiniWoB++ episodes at a chosen concurrency,
one shared Chromium, any model endpoint (or the ground-truth oracle behind
the stand-in server). The raw reward is read after every action and the run
stops as soon as the episode is done (a late click would start a new,
unseeded episode)."""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from surfer.agent.config import AgentConfig
from surfer.fleet.batch import shared_backends
from surfer.fleet.browser_pool import SharedBrowser
from surfer.apps.demo.static_site import StaticSite
from surfer.core.errors import ConfigError, SurferError

from .environment import MiniWobEnvironment, available_tasks, miniwob_html_dir
from .oracle import HANDLERS, Board, MiniWobOracle

SUITES: dict[str, list[str]] = {
    # every task the oracle knows: clicks, typing, keys, scrolling, selects, dates,
    # autocomplete, tabs, multi-step forms, email and search
    "oracle": list(HANDLERS),
    "smoke": ["click-checkboxes", "login-user", "use-autocomplete-nodelay", "copy-paste"],
}


@dataclass
class Episode:
    task: str
    seed: int
    utterance: str = ""
    done: bool = False
    success: bool = False
    raw_reward: float = 0.0
    reward: float = 0.0
    reason: str | None = None
    steps: int = 0
    seconds: float = 0.0
    agent_status: str = ""
    error: str | None = None


def resolve_tasks(tasks: str | None, suite: str | None) -> list[str]:
    known = set(available_tasks())
    if tasks:
        names = [t.strip() for t in tasks.split(",") if t.strip()]
    else:
        name = suite or "oracle"
        if name not in SUITES:
            raise ConfigError(f"unknown suite {name!r}; choose one of: {', '.join(SUITES)}")
        names = SUITES[name]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(
            f"unknown MiniWoB task(s): {', '.join(unknown)} (see miniwob/html/miniwob/ in the installed package)"
        )
    if not names:
        raise ConfigError("no tasks to run")
    return names


class MiniWobBench:
    def __init__(
        self, config: AgentConfig, *, concurrency: int, oracle: bool, max_inflight: int | None = None,
        oracle_input: str = "keyboard", browser: Any = None,
    ) -> None:
        if concurrency < 1:
            raise ConfigError(f"--concurrency must be at least 1, got {concurrency}")
        if oracle_input not in ("keyboard", "pointer"):
            raise ConfigError(f"--oracle-input must be 'keyboard' or 'pointer', got {oracle_input!r}")
        self.oracle_input = oracle_input
        self.config = config.model_copy(update={"validate_answers": False})
        self.concurrency = concurrency
        self.oracle = oracle
        self.max_inflight = max_inflight
        self.browser = browser  # an open Playwright Browser to run the episodes in (kept open), or None: one launched
        self.board = Board()

    async def run(self, tasks: list[str], seeds: list[int]) -> list[Episode]:
        from surfer.models.profiles import get_profile
        from surfer.models.standin import StandInServer

        html = miniwob_html_dir()
        server = (
            StandInServer(
                MiniWobOracle(self.board, get_profile(self.config.profile).frame, input_mode=self.oracle_input)
            ).start()
            if self.oracle
            else None
        )
        config = self.config
        if server is not None:
            config = config.model_copy(update={"base_url": server.base_url, "model": server.model})
        backends = shared_backends(config, self.max_inflight)
        given = self.browser
        browser = SharedBrowser(headless=config.browser.headless) if given is None else SharedBrowser.given(given)
        slots = asyncio.Semaphore(self.concurrency)
        try:
            for backend in {id(b): b for b in backends.values()}.values():
                await backend.check()  # a server down or a model it does not serve: said once, not 0% of N episodes
            with StaticSite(html) as site:
                await browser.start()

                async def one(task: str, seed: int) -> Episode:
                    async with slots:
                        return await self._episode(config, backends, browser, site, task, seed)

                return list(await asyncio.gather(*(one(t, s) for t in tasks for s in seeds)))
        finally:
            await asyncio.shield(browser.close())
            for backend in {id(b): b for b in backends.values()}.values():
                await asyncio.shield(backend.aclose())
            if server is not None:
                server.stop()

    async def _episode(
        self,
        config: AgentConfig,
        backends: dict[str, Any],
        browser: SharedBrowser,
        site: StaticSite,
        task: str,
        seed: int,
    ) -> Episode:
        from surfer.agent.loop import Agent
        from surfer.tools.settle import SettleConfig

        session = uuid.uuid4().hex[:12]
        episode = Episode(task, seed)
        started = time.monotonic()
        b = config.browser
        env = MiniWobEnvironment(
            browser=await browser.get(),
            settle=SettleConfig(timeout=b.settle_timeout, quiet=b.settle_quiet),
            on_observe=self.board.post(session, task) if self.oracle else None,
        )
        try:
            await env.start(site.url(f"miniwob/{task}.html?surfer_session={session}"))
            episode.utterance = await env.begin_episode(seed)
            agent = Agent(config, environment=env, backends=backends)
            result = await agent.run(episode.utterance, out_dir=False)  # the report holds the episodes
            episode.agent_status = result.status
            if result.status == "error":
                episode.error = result.reason
            reward = await env.reward()
            episode.steps = result.steps
            episode.done, episode.raw_reward, episode.reward, episode.reason = (
                reward.done, reward.raw, reward.reward, reward.reason,
            )
            episode.success = reward.success
        except SurferError as exc:
            episode.error = str(exc)
        finally:
            await asyncio.shield(env.close())
            self.board.drop(session)
        episode.seconds = round(time.monotonic() - started, 3)
        return episode


def summarize(
    episodes: list[Episode], *, concurrency: int, seconds: float, config: AgentConfig, oracle: bool
) -> dict[str, Any]:
    per_task: dict[str, dict[str, Any]] = {}
    for task in dict.fromkeys(e.task for e in episodes):
        mine = [e for e in episodes if e.task == task]
        per_task[task] = {
            "episodes": len(mine),
            "successes": sum(e.success for e in mine),
            "success_rate": sum(e.success for e in mine) / len(mine),
            "mean_raw_reward": statistics.fmean(e.raw_reward for e in mine),
            "mean_steps": statistics.fmean(e.steps for e in mine),
            "errors": sum(e.error is not None for e in mine),
        }
    return {
        "benchmark": "miniwob",
        "oracle": oracle,
        "profile": config.profile,
        "model": None if oracle else config.model,
        "concurrency": concurrency,
        "episodes": len(episodes),
        "seconds": round(seconds, 2),
        "success_rate": sum(e.success for e in episodes) / len(episodes) if episodes else 0.0,
        "mean_steps": statistics.fmean(e.steps for e in episodes) if episodes else 0.0,
        "tasks": per_task,
        "runs": [asdict(e) for e in episodes],
    }


async def run_miniwob(
    config: AgentConfig,
    tasks: list[str],
    *,
    seeds: int = 1,
    concurrency: int = 4,
    oracle: bool = False,
    max_inflight: int | None = None,
    first_seed: int = 0,
    oracle_input: str = "keyboard",
    browser: Any = None,
) -> dict[str, Any]:
    """Run every task with seeds first_seed..first_seed+seeds-1; return the report. `browser`: an open
    Playwright Browser to run the episodes in (a context each, the browser left open) instead of one launched."""
    if seeds < 1:
        raise ConfigError(f"--seeds must be at least 1, got {seeds}")
    started = time.monotonic()
    # Deleting, sending and ordering are what these synthetic tasks ask for: nobody is asked to confirm them.
    config = config.model_copy(update={"sensitive_actions": "approve"})
    bench = MiniWobBench(
        config, concurrency=concurrency, oracle=oracle, max_inflight=max_inflight, oracle_input=oracle_input,
        browser=browser,
    )
    episodes = await bench.run(tasks, list(range(first_seed, first_seed + seeds)))
    return summarize(
        episodes, concurrency=concurrency, seconds=time.monotonic() - started, config=config, oracle=oracle
    )
