"""The local batch runner: a bounded pool of sessions on one shared browser and
one backend per endpoint; resumable; the Ray runner (surfer/fleet/cluster/)
subclasses `Batch` and replaces only placement."""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from surfer.agent.config import AgentConfig
from surfer.agent.result import RunResult
from surfer.core.deadline import run_deadline
from surfer.core.errors import STORAGE_FULL, ConfigError, ModelServerUnreachable
from surfer.core import stopping
from surfer.models.backend import ModelBackend
from surfer.models.endpoint import shown_url
from surfer.fleet.browser_pool import SharedBrowser

from .drain import drain
from .rewards import TaskRewards, group_info
from .results import (BATCH_STOPPING_ERRORS, FINAL_STATUSES, RESULTS_FILE, RUNS, TMP_PREFIX, ResultsIndex, _publish,
                      check_same_tasks, is_final, spent)
from .servers import BatchServers, shared_backends
from .stats import BatchStats
from .summary import BatchSummary
from .tasks import BatchTask, check_task_urls, run_dir_name

__all__ = ["BROWSER_DIED", "HARD_LIMIT_GRACE", "Batch", "BatchSummary", "drain", "shared_backends"]


BROWSER_DIED = "the browser crashed (the Chromium process died)"
HARD_LIMIT_GRACE = 60.0  # seconds past a task's max_seconds before it is cut off mid-step


class Batch:
    """Run `tasks` with `concurrency` sessions; see the module docstring."""

    def __init__(
        self,
        config: AgentConfig,
        tasks: Iterable[BatchTask],
        out_dir: str | Path,
        *,
        concurrency: int | str = 4, max_inflight: int | None = None,
        backend: ModelBackend | None = None, retry_errors: bool = False,
        listeners: list[Any] | None = None, replay: list[Any] | None = None,
        secrets: Any = None, answers: Any = None,
        crash_retries: int = 1,
        auto: dict[str, Any] | None = None,
        say: Any = None,
        policy: Any = None,
    ) -> None:
        """`replay`: recordings (surfer.tools.replay.Recording) to play back instead of a
        browser; task k gets the one its metadata names (`"replay": name`), else number k mod n,
        its screenshots marked with k so that no two tasks send the same images.
        `concurrency="auto"`: sessions follow the server's cache (surfer/apps/concurrency.py;
        `auto` holds AutoConcurrency's options); `say(text)` tells what it does. `policy`: the adapter
        (`name@version`, or a surfer.policy.PolicySwitch) new sessions use (surfer/fleet/policy.py)."""
        from surfer.fleet.concurrency import AUTO, AutoConcurrency, parse_concurrency

        concurrency = parse_concurrency(concurrency)
        self.auto = AutoConcurrency.for_servers(config, **(auto or {})) if concurrency == AUTO else None
        self.say = say or (lambda text: None)
        self.concurrency_report: dict[str, Any] | None = None
        concurrency = self.auto.start if self.auto else int(concurrency)
        if max_inflight is not None and max_inflight < 1:
            raise ConfigError(f"--max-inflight must be at least 1, got {max_inflight}")
        self.config = config
        self.tasks = list(tasks)
        check_task_urls(self.tasks, config)
        self.rewards = TaskRewards(config, self.tasks)  # every reward function imported, or a ConfigError now
        self.out_dir = Path(out_dir)
        self.runs_dir = self.out_dir / RUNS
        self.concurrency = concurrency
        self.max_inflight = max_inflight
        self.retry_errors = retry_errors
        if crash_retries < 0:
            raise ConfigError(f"--crash-retries must be 0 or more, got {crash_retries}")
        self.crash_retries = crash_retries  # reruns of a task whose browser or page crashed under it
        self.crashes: dict[str, int] = {}  # browser crashes per task id, until its line is written
        self.index = ResultsIndex(self.out_dir / RESULTS_FILE)
        self.stats = BatchStats(total=len(self.tasks))
        self.listeners = list(listeners or [])
        self.secrets = secrets
        self.answers = answers  # replies to the agent's questions (a task's own `answers` first)
        self.backends = shared_backends(config, max_inflight, backend)
        self.servers = BatchServers(self.backends)  # with several model servers: where each session goes
        self.stats.servers = self.servers.snapshot
        # task id -> (its server, moves, its data-parallel rank there), until its line is written
        self._server_of: dict[str, tuple[str | None, int, int | None]] = {}
        self._owns_backend = backend is None
        self.replay = list(replay or [])
        self._replay_of = self._assign_recordings()
        self._replay_shots: dict[str, list[Any]] = {}
        self._browser = SharedBrowser.of(config.browser, "auto" if self.auto else concurrency, guarded=config.has_domain_rules)
        from surfer.fleet.sessions import BatchFiles

        self.files = BatchFiles(self.out_dir)
        self.stats.waiting = self.files.waiting
        self._slots: Any = None  # with --concurrency auto: the resizable slots sessions hold (and park from)
        self._stopped: str | None = None
        self._stopped_kind: str | None = None
        self._unfinished: dict[str, int] = {}  # attempts of this run that ended no task, by kind
        self.on_record: Any = None  # called with each line appended to results.jsonl (surfer.rollouts)
        self.on_resumed: Any = None  # awaited with the tasks to run, once the directory is held (surfer.rollouts)
        from surfer.fleet.policy import BatchPolicy

        self.policy = BatchPolicy(policy, [s.endpoint for s in config.server_specs()] if backend is None else [],
                                  self.out_dir, self.say, (config.endpoint("policy").model, config.policy_version))
        named = self.policy.current
        if named is not None and named.version is not None and config.policy_version not in (None, named.version):
            raise ConfigError(f"--policy {named} names version {named.version}, and --policy-version (policy_version) "
                              f"{config.policy_version}: give the version once")

    # -- preparation -------------------------------------------------------------

    def _assign_recordings(self) -> dict[str, Any]:
        if not self.replay:
            return {}
        by_name = {r.name: r for r in self.replay}
        chosen: dict[str, Any] = {}
        for number, task in enumerate(self.tasks):
            wanted = task.metadata.get("replay")
            if wanted is not None and wanted not in by_name:
                raise ConfigError(f"task {task.id!r} asks for recording {wanted!r}; recorded: {', '.join(by_name)}")
            recording = by_name[wanted] if wanted is not None else self.replay[number % len(self.replay)]
            chosen[task.id or ""] = (recording, number)
        return chosen

    async def read_replays(self) -> None:
        """Read (and mark) every replayed screenshot now rather than when each
        session starts, e.g. before a timed window (benchmarks)."""
        from surfer.tools.replay import read_screenshots

        todo = [(task_id, pair) for task_id, pair in self._replay_of.items() if task_id not in self._replay_shots]
        shots = await asyncio.gather(*(asyncio.to_thread(read_screenshots, *pair) for _, pair in todo))
        self._replay_shots.update((task_id, read) for (task_id, _), read in zip(todo, shots))

    def _clean_stale(self) -> None:
        if self.runs_dir.exists():
            for entry in self.runs_dir.iterdir():
                if entry.name.startswith(TMP_PREFIX):
                    shutil.rmtree(entry, ignore_errors=True)

    def pending(self, finished: dict[str, dict[str, Any]] | None = None) -> list[BatchTask]:
        """The tasks without a final outcome in results.jsonl (`finished`: its final lines, read already)."""
        finished = self.index.finished(self.retry_errors) if finished is None else finished
        check_same_tasks(self.index.path, finished, self.tasks)
        # a task that ended needs_input runs again once replies are given (--answers, the task's own answers)
        return [t for t in self.tasks if t.id not in finished or (
            finished[t.id].get("status") == "needs_input" and (self.answers is not None or t.answers is not None))]

    # -- running -------------------------------------------------------------------

    async def prepare(self) -> list[BatchTask]:
        """Create the output directory, remove stale temporary run directories
        and return the tasks not finished yet (resume)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(self._clean_stale)
        await asyncio.to_thread(self.index.compact, self.retry_errors)  # one final line per task, nothing else
        finished = await asyncio.to_thread(self.index.finished, self.retry_errors)
        todo = self.pending(finished)
        left = {task.id for task in todo}
        self.stats.resumed([finished[t.id] for t in self.tasks if t.id not in left and t.id in finished])
        await asyncio.to_thread(self.files.start, self.tasks)
        if self.on_resumed is not None:  # (the directory is this batch's now: no other one yields those lines)
            await self.on_resumed(todo)
        return todo

    async def run(self) -> BatchSummary:
        """Run the tasks not finished yet, the only batch in the output directory while it runs."""
        try:
            await asyncio.to_thread(self.files.claim)
            return await self._run()
        except BaseException:  # (stopped before its own close: another batch there, or another batch's results)
            await self._close_backends()
            raise
        finally:
            self.files.release()

    async def _close_backends(self) -> None:
        if self._owns_backend:
            self._owns_backend = False  # (once)
            for backend in {id(b): b for b in self.backends.values()}.values():
                await asyncio.shield(backend.aclose())

    async def _run(self) -> BatchSummary:
        todo = await self.prepare()
        await self.policy.start()  # its adapter is on every server, or nothing runs
        if todo and not self.replay:
            await self._browser.start()
        metrics = asyncio.create_task(self.files.write_metrics(self.stats, self.servers.refresh))
        switches = asyncio.create_task(self.policy.watch())  # `surfer policy switch` from outside
        try:
            if self.auto is not None:
                await self._drain_auto(todo)
            else:
                await drain(todo, self.concurrency, self._run_counted, lambda: self._stopped is None)
        finally:
            metrics.cancel()
            switches.cancel()
            await asyncio.gather(metrics, switches, return_exceptions=True)
            await asyncio.shield(self._browser.close())
            await self._close_backends()
        return await asyncio.to_thread(self.summary, self._browser.relaunches)

    def summary(self, relaunches: int) -> BatchSummary:
        ids = {task.id for task in self.tasks}
        statuses: dict[str, int] = {}  # every task's final outcome so far, earlier runs' included (resume)
        for record in self.index.finished().values():
            if record["id"] in ids:
                statuses[record["status"]] = statuses.get(record["status"], 0) + 1
        return BatchSummary(
            self.out_dir,
            len(self.tasks),
            self.stats.skipped,
            self.stats.done,
            statuses,
            self._stopped,
            self.stats.snapshot(),
            self._stopped_kind,
            relaunches,
            self.concurrency_report,
            dict(self._unfinished),
        )

    async def _drain_auto(self, todo: list[BatchTask]) -> None:
        from surfer.fleet.concurrency import Slots
        from surfer.models.json_http import http_library, proxied_client

        auto = self.auto
        assert auto is not None
        keep_going = lambda: self._stopped is None  # noqa: E731
        async with proxied_client(http_library().AsyncClient, auto.metrics_url, timeout=5) as client:
            if await auto.read(client) is None:
                self.concurrency = auto.fallback
                self.concurrency_report = {"mode": "fixed (no /metrics)", "metrics": auto.metrics_url,
                                           "concurrency": auto.fallback}
                self.say(f"--concurrency auto: no vLLM or SGLang /metrics at {auto.metrics_url}; "
                         f"running a fixed concurrency of {auto.fallback} sessions")
                await drain(todo, auto.fallback, self._run_counted, keep_going)
                return
            more = f" and {len(auto.more_urls)} more server(s)" if auto.more_urls else ""
            self.say(f"--concurrency auto: following {auto.metrics_url}{more}, starting at {auto.start} sessions")
            slots = self._slots = Slots(auto.start)
            controller = asyncio.create_task(auto.control(slots, lambda: self.stats.steps, client))
            try:
                await drain(todo, auto.maximum, self._run_counted, keep_going, slots=slots)
            finally:
                controller.cancel()
                await asyncio.gather(controller, return_exceptions=True)
                self.concurrency_report = auto.summary()
                self.concurrency = slots.limit

    def _control(self) -> Any:
        """A session's RunControl: under --concurrency auto, one that parks the session between steps
        while the limit is below the sessions running (in the drain worker that holds its slot)."""
        if self._slots is None:
            return None
        from surfer.fleet.concurrency import ParkingControl

        return ParkingControl(self._slots)

    async def _run_counted(self, task: BatchTask) -> None:
        self.stats.running += 1
        try:
            await self._run_one(task)
        finally:
            self.stats.running -= 1

    def _task_config(self, task: BatchTask) -> AgentConfig:
        update: dict[str, Any] = {}
        if task.max_steps is not None:
            update["max_steps"] = task.max_steps
        if task.max_seconds is not None:
            update["max_seconds"] = task.max_seconds
        if task.storage_state is not None:  # this task starts signed in with its own state
            update["browser"] = self.config.browser.model_copy(update={"storage_state": task.storage_state})
        return self.config.model_copy(update=update) if update else self.config

    def _environment(self, task: BatchTask, browser: Any) -> Any:
        if self.replay:
            from surfer.tools.replay import ReplayEnvironment

            recording, number = self._replay_of[task.id or ""]
            shots = self._replay_shots.pop(task.id or "", None)
            return ReplayEnvironment(recording, variant=number, screenshots=shots)  # each task its own images
        from surfer.agent.environments import browser_environment

        return browser_environment(self._task_config(task), browser)

    async def _attempt(self, task: BatchTask, config: AgentConfig, browser: Any, tmp: Path, watch: Any,
                       profile: str | None = None) -> RunResult:
        from surfer.agent.loop import Agent

        env = self._environment(task, browser)
        control = self._control()
        listeners = [self.stats, watch, *self.listeners, *([control.observe] if control is not None else [])]
        agent = Agent(config, environment=env, backends=self.backends, listeners=listeners, secrets=self.secrets,
                      profile=profile)  # the profile of the server the session was placed on
        try:
            # a clock, not a bare timeout: time held for a model server that went away moves it (core/deadline.py)
            cutoff = config.max_seconds + HARD_LIMIT_GRACE + config.reward_timeout  # the reward is given in the run
            with run_deadline(asyncio.get_running_loop().time() + cutoff) as hard:
                async with hard.limit():
                    return await agent.run(task.task, task.url, out_dir=tmp, control=control,
                                           rewarder=self.rewards.rewarder(task, agent),
                                           answers=task.answers if task.answers is not None else self.answers)
        except TimeoutError:
            return RunResult(
                status="limit",
                task=task.task,
                url=task.url,
                reason=f"cut off {cutoff - config.max_seconds:g} s past the time limit of {config.max_seconds:g} s",
            )
        except Exception as exc:  # noqa: BLE001 - recorded for this task; the batch goes on
            if isinstance(exc, OSError) and exc.errno in STORAGE_FULL:
                raise  # not the task's fault: the batch stops (_run_one) and the task runs again on resume
            if browser is not None and not self._browser.alive(browser):
                return RunResult(status="error", task=task.task, url=task.url, reason=BROWSER_DIED, error_kind="browser_crash")
            return RunResult(
                status="error", task=task.task, url=task.url, reason=f"internal error: {exc!r}", error_kind="internal"
            )
        finally:
            await asyncio.shield(env.close())

    async def _run_one(self, task: BatchTask) -> None:
        try:
            executed = await self.execute(task)
            if executed is not None:
                await self.record(task, *executed)
        except OSError as exc:  # the output directory takes no more (a full disk): the batch stops, as for a server gone
            self.stop_for_storage(exc)

    def stop_for_storage(self, exc: OSError, where: str = "") -> None:
        """A run's files could not be written (a full disk, a quota, a read-only file system; `where`: on which
        Ray worker): no task's fault. The batch stops and that task has no line: it runs again on resume."""
        if self._stopped is None:
            self._stopped, self._stopped_kind = (f"cannot write {exc.filename or self.out_dir}{where}: {exc.strerror or exc}; "
                                                 "the tasks finished are kept: make room, then run the same command again"), "storage"

    async def execute(self, task: BatchTask, server: int | None = None, policy: Any = None) -> tuple[RunResult, Path, float] | None:
        """Run one task into a temporary run directory: (result, that directory,
        seconds), or None when the run did not end with a final status. A task
        whose browser or page crashed under it runs again (`crash_retries`).
        With several model servers, its session is placed first (on `server`, its
        number, where a Ray driver chose it), and its policy taken (`policy`, where a Ray driver chose it)."""
        assert task.id is not None
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        name = run_dir_name(task.id)
        tmp = self.runs_dir / f"{TMP_PREFIX}{name}-{uuid.uuid4().hex[:6]}"
        config = self._task_config(task)
        started = time.monotonic()
        watch = self.files.session(name, task, self.stats)
        chosen = self.policy.begin(task.id, policy)  # fixed for the session: it never mixes two
        try:
            try:
                async with self.servers.session(task.id, server, chosen) as (session, profile):
                    executed = await self._attempts(task, config, tmp, watch, started, profile)
                    rank = session.data_parallel_rank
                    if (session.server is not None or rank is not None) and executed is not None:
                        self._server_of[task.id] = (session.server.base_url if session.server else None, session.moves, rank)
            except ModelServerUnreachable as exc:  # no server left to place the session on: the batch stops
                unplaced = RunResult(status="error", task=task.task, url=task.url, reason=str(exc), error_kind="unreachable")
                executed = unplaced, tmp, time.monotonic() - started
        except asyncio.CancelledError:  # the batch was stopped: the attempt is recorded, the task runs on resume
            stopped = RunResult(status="interrupted", task=task.task, url=task.url, reason=stopping.interrupted_reason(),
                                **spent(tmp))  # the steps and tokens its run had spent, as its own record says
            await asyncio.shield(self._unfinished_attempt(self._line(task, stopped, time.monotonic() - started)))
            raise
        finally:  # the session's live state file goes (its thumbnail stays for a page still loading it)
            await self.policy.end(chosen)
            await asyncio.shield(self.files.end(task.id))
        return executed

    async def _attempts(
        self, task: BatchTask, config: AgentConfig, tmp: Path, watch: Any, started: float, profile: str | None = None,
    ) -> tuple[RunResult, Path, float] | None:
        assert task.id is not None
        crashes = 0
        while True:
            browser = None if self.replay else await self._browser.get()
            result = await self._attempt(task, config, browser, tmp, watch, profile)
            died = browser is not None and not self._browser.alive(browser)
            if result.status != "error" or (result.error_kind != "browser_crash" and not died):
                break
            # Chromium or the page died under this session: not the task's fault
            if result.error_kind != "browser_crash":
                result = result.model_copy(update={"error_kind": "browser_crash", "reason": f"{BROWSER_DIED} ({result.reason})"})
            crashes += 1
            self.stats.browser_crashes += 1
            if died:
                await self._browser.relaunch(browser)
            if crashes > self.crash_retries:
                break
            await asyncio.to_thread(shutil.rmtree, tmp, True)
            await watch.retry()
        self.crashes[task.id] = crashes
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            # stopped (Ctrl-C) while the run was failing: an error caused by the stop is not the task's
            await asyncio.to_thread(shutil.rmtree, tmp, True)
            raise asyncio.CancelledError
        if result.status not in FINAL_STATUSES:
            await asyncio.to_thread(shutil.rmtree, tmp, True)
            await self._unfinished_attempt(self._line(task, result, time.monotonic() - started))
            return None
        return result, tmp, time.monotonic() - started

    def _line(self, task: BatchTask, result: RunResult, seconds: float, **extra: Any) -> dict[str, Any]:
        return {
            "id": task.id,
            "group": group_info(task).model_dump(exclude_none=True),
            "sample": task.sample,
            "task": task.task,
            "url": task.url,
            "status": result.status,
            "answer": result.answer,
            "reason": result.reason,
            "error_kind": result.error_kind,
            **({"question": result.question} if result.question else {}),
            "steps": result.steps,
            "browser_crashes": self.crashes.pop(task.id or "", 0),
            "seconds": round(seconds, 3),
            "usage": result.usage.model_dump(),
            "reward": result.reward,
            "reward_source": result.reward_source,
            **({"reward_error": result.reward_error} if result.reward_error else {}),
            "signals": [signal.model_dump() for signal in result.signals],
            "metadata": task.metadata,
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            **self._server_line(task.id or ""),
            **self.policy.line(task.id or ""),
            **extra,
        }

    def _server_line(self, task_id: str) -> dict[str, Any]:
        """With several servers: the one the session ended on, and how often it moved; at a server with several
        data-parallel ranks, the one the session kept."""
        if task_id not in self._server_of:
            return {}
        url, moves, rank = self._server_of.pop(task_id)
        return {**({"server": shown_url(url), "server_moves": moves} if url else {}),
                **({"data_parallel_rank": rank} if rank is not None else {})}

    async def _unfinished_attempt(self, record: dict[str, Any]) -> None:
        """An attempt that ended no task (a stop, a server gone): a line in attempts.jsonl, counted apart."""
        key = record.get("error_kind") or record["status"]
        self._unfinished[key] = self._unfinished.get(key, 0) + 1
        self.stats.unfinished += 1
        await self.index.append_attempt(record)

    async def record(self, task: BatchTask, result: RunResult, tmp: Path, seconds: float, **extra: Any) -> None:
        """Publish a finished run directory and append its line to results.jsonl. An
        attempt that ended no task (model server unreachable, bad configuration)
        stops the batch and goes to attempts.jsonl instead: the task runs on resume."""
        assert task.id is not None
        record = self._line(task, result, seconds, **extra)
        if not is_final(record):
            if result.error_kind in BATCH_STOPPING_ERRORS and self._stopped is None:
                self._stopped, self._stopped_kind = result.reason or result.error_kind, result.error_kind
            await asyncio.to_thread(shutil.rmtree, tmp, True)
            await self._unfinished_attempt(record)
            return
        name = run_dir_name(task.id)
        result.group = group_info(task)
        await asyncio.to_thread(_publish, tmp, self.runs_dir / name, result)
        record["run_dir"] = f"{RUNS}/{name}"
        if result.artifacts:
            record["artifacts"] = {k: f"{RUNS}/{name}/{v}" for k, v in result.artifacts.items()}
        await self.index.append(record)
        self.stats.task_done(result.status)
        if self.on_record is not None:
            self.on_record(record)
