"""`Agent`: what lasts as long as the agent — its configuration, roles,
prompt layout, secrets and guards — and the ways to run tasks with it (run,
start, stream, sessions).

The agent loop itself is in three pieces: a session (agent/session.py) holds
what lasts across tasks; a task run (agent/task_run.py, `TaskRun` over a
`RunState`) is one task from start-up to its result; the steps
(agent/steps.py, a `Stepper` given its `StepInputs`) are observe → policy →
localizer → act → settle, with the validator on answers. Side effects (run
directory, live view, user callbacks) hang off the event stream; the loop only
emits events."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncGenerator, Awaitable, Callable, Literal, Mapping, Sequence

from surfer.core.errors import ConfigError
from surfer.models.affinity import model_session, session_policy
from surfer.models.backend import ModelBackend
from surfer.models.profiles import Profile, get_profile
from surfer.tools.base import Environment

from .answers import AnswerSchema
from .config import AgentConfig, load_config, merge_settings, validate_config
from .confirm import Confirmer, SensitiveRules, fixed_decision
from .control import RunControl, RunHandle
from .events import Event
from .layouts import Layout, check_layout
from .questions import PresetAnswers, QuestionHandler
from .result import RunResult
from .rewards import Rewarder
from .rundir import check_out_dir, claim_run_dir, default_run_dir, leaves_record, slugify  # noqa: F401  (also imported from here)
from .run_state import RunState, check_listeners, check_task
from .secrets import Secret, Secrets
from .steps import Guards, Imaging, Roles
from .roles import Localizer, Policy, RoleClient, Validator
from .task_run import AgentParts, TaskRun, error_kind, final_answer_reserve  # noqa: F401  (also imported from here)

Listener = Callable[[Event], Awaitable[None] | None]

if TYPE_CHECKING:
    from .session import Session, SyncSession

# Browser settings the SDK also takes as Agent(...) arguments.
SIGNIN_SETTINGS = ("storage_state", "save_storage_state", "keep_storage_state", "user_data_dir", "cdp_url", "browser_ws")


_error_kind = error_kind  # (its old name, imported by the QA runner)


class Agent:
    """A computer-use agent: policy, localizer and validator over an environment.

        agent = Agent(base_url="http://127.0.0.1:8000/v1", model="Hcompany/Holotron-12B")
        result = await agent.run("Find the price of ...", url="https://example.com")

    Every key of the configuration is an argument (`max_steps=15`, `base_url=...`, `model=...`,
    `browser={"headless": False}`: the configuration reference), over `config` (a file's:
    `Agent(load_config("surfer.toml"), ...)`) and SURFER_BASE_URL, SURFER_MODEL, SURFER_API_KEY and
    SURFER_PROFILE, over OPENAI_BASE_URL and OPENAI_API_KEY; an unknown key or a bad value is a ConfigError.
    `backend=` sends every role to one backend (e.g. a `ScriptedModel`);
    `backends={"localizer": ...}` overrides single roles. Without an
    `environment=`, each run opens its own `BrowserEnvironment` from the
    configuration and closes it afterwards.

    Every run is recorded in a run directory, as `surfer run` records it:
    `runs/<timestamp>-<slug>/` under the working directory (`result.run_dir`).
    `out_dir=` moves that folder (`Agent(out_dir="my-runs")`); `out_dir=False`
    records nothing. `run(..., out_dir=DIR)` records that run in `DIR` itself
    — a new or empty directory: a directory that holds anything is refused
    (ConfigError), so two runs never mix — and `run(..., out_dir=False)` does
    not record that run.

    Starting signed in: `storage_state=` (a Playwright storage-state file, or
    the state itself, e.g. a previous `result.storage_state`),
    `save_storage_state=`, `user_data_dir=` (a persistent profile), `cdp_url=`
    or `browser_ws=` (a browser surfer did not launch); `result.storage_state`
    holds the browser's state at the run's end when one was loaded or saved
    (or `keep_storage_state=True`).
    """

    def __init__(
        self,
        config: AgentConfig | None = None,
        *,
        environment: Environment | None = None,
        backend: ModelBackend | None = None,
        backends: Mapping[str, ModelBackend] | None = None,
        profile: str | Profile | None = None,
        out_dir: str | Path | Literal[False] | None = None,
        listeners: Sequence[Listener] | None = None,
        files: str | Path | Sequence[str | Path] | None = None,
        secrets: "Secrets | Mapping[str, str | Secret] | None" = None,
        confirm: Confirmer | None = None,
        on_question: QuestionHandler | None = None,
        answers: Any = None,
        **settings: Any,
    ) -> None:
        _check_arguments(config, environment, backend, backends, listeners, confirm, on_question)
        if isinstance(files, (str, os.PathLike)):  # one file: not each character of its name
            files = [files]
        if files is not None:  # the files the agent may upload
            settings["browser"] = {**settings.get("browser", {}), "upload_files": [str(f) for f in files]}
        signin = {key: settings.pop(key) for key in SIGNIN_SETTINGS if key in settings}
        if signin:  # Agent(storage_state=...), Agent(cdp_url=...): where the browser starts signed in
            settings["browser"] = {**settings.get("browser", {}), **{k: str(v) if isinstance(v, Path) else v for k, v in signin.items()}}
        if config is None:
            config = load_config(overrides=settings, overrides_source="Agent arguments")
        elif settings:
            config = validate_config(merge_settings(config.model_dump(), settings), "Agent arguments")
        self.config = config
        if profile is None and config.servers and len({s.profile for s in config.server_specs()}) == 1:
            profile = config.server_specs()[0].profile  # the profile every configured server says it serves
        if isinstance(profile, Profile):
            self.profile = profile
        else:
            self.profile = get_profile(_resolve_auto(profile or config.profile, config))
        self.environment = environment
        self.secrets = secrets if isinstance(secrets, Secrets) else Secrets(secrets)
        self.secrets.warn_unbound(config.allowed_domains)  # once: an unbound secret may be typed on any site
        self.sensitive = SensitiveRules(
            config.sensitive_words, config.confirm_domains, config.confirm_downloads, config.approve_domains, config.sensitive_exempt,
        )
        # Who says yes to a sensitive action: the caller's confirmer, else the configured default.
        self.confirm = confirm or fixed_decision(config.sensitive_actions == "approve")
        # where runs given no directory of their own are recorded (None: RUNS_ROOT, read at each run)
        self.out_dir: Path | Literal[False] | None = False if out_dir is False else (
            Path(check_out_dir(out_dir, "Agent(out_dir=...)")) if out_dir is not None else None)
        # Who replies to the policy's questions (ask_user): replies given beforehand, then on_question.
        self.on_question = on_question
        self.answers = PresetAnswers.of(answers, "Agent(answers=...)")
        self.listeners = list(listeners or [])
        self._backends = self._make_backends(backend, backends or {})
        self.layout = Layout(
            config.prompt_layout or check_layout(self.profile.prompt_layout), config.memory_images or self.profile.max_images,
            config.block_images,
        )
        budget = config.image_budget or self.profile.image_budget
        # each screenshot's share of the per-request image budget (None: no cap)
        self.image_tokens = budget // self.layout.max_images if budget else None
        self.policy = Policy(self._client("policy"), self.layout)
        self.localizer = Localizer(self._client("localizer"))
        self.validator = Validator(self._client("validator"))
        self.continuation = self._continuation()
        self.rewarder = Rewarder.of(config.reward, config.reward_timeout)  # ConfigError for a function not found

    def _continuation(self) -> dict[str, bool]:
        """Per role (localizer, validator): does it continue the policy's request of the step?
        Only where it asks the policy's backend (one endpoint and model), and where the
        configuration (else the profile) allows it."""
        wanted = self.config.role_continuation
        if wanted is None:
            wanted = self.profile.role_continuation
        return {role: bool(wanted) and self._backends[role] is self._backends["policy"] for role in ("localizer", "validator")}

    # -- construction --------------------------------------------------------

    def _make_backends(self, shared: ModelBackend | None, per_role: Mapping[str, ModelBackend]) -> dict[str, ModelBackend]:
        unknown = set(per_role) - {"policy", "localizer", "validator"}
        if unknown:
            raise ConfigError(f"unknown role(s) in backends: {', '.join(sorted(unknown))}")
        configured: dict[str, ModelBackend] = {}
        if shared is None and len(per_role) < 3:
            from .backends import role_backends

            # several servers: this agent's sessions go to those of its profile
            if self.config.servers and not any(s.profile == self.profile.name for s in self.config.server_specs()):
                raise ConfigError(f"no configured server serves profile {self.profile.name!r}")
            configured = role_backends(self.config, profile=self.profile.name)
        return {role: per_role.get(role) or shared or configured[role] for role in ("policy", "localizer", "validator")}

    def _client(self, role: str) -> RoleClient:
        settings = getattr(self.config, role)
        return RoleClient(
            role, self._backends[role], self.profile, temperature=settings.temperature,
            max_tokens=settings.max_tokens, output_retries=self.config.output_retries,
            redact=self.secrets.scrub,  # (a secret reply of the user's may join the secrets during a run)
            record_tokens=self.config.record_tokens,
        )

    def _new_environment(self) -> Environment:
        from .environments import browser_environment

        return browser_environment(self.config)

    async def aclose(self) -> None:
        """Close the model backends' connections (of this event loop); the agent may run again."""
        for backend in {id(b): b for b in self._backends.values()}.values():
            await backend.aclose()

    async def __aenter__(self) -> "Agent":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- public API ----------------------------------------------------------

    async def run(
        self, task: str, url: str | None = None, *, out_dir: str | Path | Literal[False] | None = None,
        listeners: Sequence[Listener] | None = None, answer_schema: Any = None, control: RunControl | None = None,
        rewarder: Rewarder | None = None, on_question: QuestionHandler | None = None, answers: Any = None,
    ) -> RunResult:
        """Run one task to the end and return its result. Errors of the run
        (server down, crash, bad configuration) come back as `status="error"`.

        `listeners` receive this run's events (after the agent's own). One
        Agent may run several tasks concurrently when it owns its environments
        (no `environment=` given): each run opens its own browser session. Given
        one, its runs take turns in it (a run begins when the one before has ended).
        `answer_schema` (a pydantic model class or a JSON Schema dict) makes
        the answer carry data of that shape, validated into `result.data`.
        `rewarder` rewards this run instead of the configured `reward` (agent/rewards.py).
        `on_question` / `answers` (default: the agent's) reply to the policy's
        questions; with neither, a question ends the run `needs_input`."""
        return await self._run(task, url, out_dir, listeners, answer_schema, control, on_question, answers, rewarder=rewarder)

    async def _run(
        self, task: str, url: str | None, out_dir: str | Path | Literal[False] | None, listeners: Sequence[Listener] | None,
        answer_schema: Any, control: RunControl | None, on_question: QuestionHandler | None, answers: Any, *,
        environment: Environment | None = None, earlier: str = "", rewarder: Rewarder | None = None,
    ) -> RunResult:
        """`run`; a session (agent/session.py) passes its `environment` (kept open) and its `earlier` tasks."""
        check_task(task, url)
        check_listeners(listeners)
        task = self.secrets.scrub(task)  # a value written into the task is kept out of every record
        answer = AnswerSchema.of(answer_schema)
        everyone: list[Listener] = [*self.listeners, *(listeners or [])]
        writer = self._writer(task, out_dir)
        if writer is not None:
            everyone.insert(0, writer.handle)

        async def emit(event: Event) -> None:
            for listener in everyone:
                outcome = listener(event)
                if inspect.isawaitable(outcome):  # (a coroutine, or a Future: run_in_executor's)
                    await outcome

        return await self._execute(
            task, url, writer.run_dir if writer else None, emit, answer, control or RunControl(), rewarder or self.rewarder,
            on_question=on_question, answers=answers, environment=environment, earlier=earlier,
        )

    def start(
        self, task: str, url: str | None = None, *, out_dir: str | Path | Literal[False] | None = None,
        listeners: Sequence[Listener] | None = None, answer_schema: Any = None, rewarder: Rewarder | None = None,
        on_question: QuestionHandler | None = None, answers: Any = None,
    ) -> RunHandle:
        """Start a run in the background (inside a running event loop) and return
        a handle to pause, resume, hint, finish or cancel it, and await its result.
        The other arguments are `run`'s."""
        check_task(task, url)
        control = RunControl()
        return RunHandle.started(self.run(
            task, url, out_dir=out_dir, listeners=listeners, answer_schema=answer_schema, control=control,
            rewarder=rewarder, on_question=on_question, answers=answers,
        ), control, "agent", self.secrets.scrub(task), url)

    def run_sync(
        self, task: str, url: str | None = None, *, out_dir: str | Path | Literal[False] | None = None,
        listeners: Sequence[Listener] | None = None, answer_schema: Any = None, rewarder: Rewarder | None = None,
        on_question: QuestionHandler | None = None, answers: Any = None,
    ) -> RunResult:
        """`run` for scripts without an event loop (in a notebook or a coroutine, it runs in a thread of its own),
        with `run`'s arguments."""
        from .blocking import run_blocking

        async def run_and_close() -> RunResult:
            try:
                return await self.run(task, url, out_dir=out_dir, listeners=listeners, answer_schema=answer_schema,
                                      rewarder=rewarder, on_question=on_question, answers=answers)
            finally:
                await self.aclose()  # its connections belong to this event loop, which ends here

        return run_blocking(run_and_close())

    async def stream(
        self, task: str, url: str | None = None, *, out_dir: str | Path | Literal[False] | None = None,
        listeners: Sequence[Listener] | None = None, answer_schema: Any = None, rewarder: Rewarder | None = None,
        on_question: QuestionHandler | None = None, answers: Any = None,
    ) -> AsyncGenerator[Event, None]:
        """Run the task, yielding typed events as they happen; the last is `Finished`. The other
        arguments are `run`'s."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        runner = asyncio.ensure_future(self.run(
            task, url, out_dir=out_dir, listeners=[*(listeners or []), queue.put], answer_schema=answer_schema,
            rewarder=rewarder, on_question=on_question, answers=answers,
        ))
        runner.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            await runner  # surface an unexpected exception
        finally:
            if not runner.done():
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)

    def session(
        self, url: str | None = None, *, out_dir: str | Path | Literal[False] | None = None,
        on_question: QuestionHandler | None = None,
        answers: Any = None, listeners: Sequence[Listener] | None = None,
    ) -> "Session":
        """A session: tasks one after another in one browser, each starting where the last
        ended, its prompt telling of the earlier tasks (agent/session.py).

            async with agent.session(url=...) as session:
                first = await session.run("Find the cheapest lamp")
                second = await session.run("Add it to the cart")

        `out_dir`: the session directory, new or empty (a run directory per task and session.json;
        default: a new one where the agent records its runs, none where it records nothing; False: none)."""
        from .session import Session

        return Session(self, url, out_dir=out_dir, on_question=on_question, answers=answers, listeners=listeners)

    def session_sync(
        self, url: str | None = None, *, out_dir: str | Path | Literal[False] | None = None,
        on_question: QuestionHandler | None = None,
        answers: Any = None, listeners: Sequence[Listener] | None = None,
    ) -> "SyncSession":
        """`session` for scripts without an event loop: `with agent.session_sync(url=...) as s: s.run(task)`.
        Closing it also closes the agent's model clients, as `run_sync` does."""
        from .session import SyncSession

        return SyncSession(self, url, out_dir=out_dir, on_question=on_question, answers=answers, listeners=listeners)

    def _writer(self, task: str, out_dir: str | Path | Literal[False] | None) -> Any:
        """The run's directory writer: in `out_dir` (a new or empty directory), else under
        the agent's folder for runs; None when the run, or the agent, records nothing."""
        if out_dir is False or (out_dir is None and self.out_dir is False):
            return None
        target = claim_run_dir(out_dir) if out_dir is not None else default_run_dir(task, self.out_dir or None)
        from .trajectory import TrajectoryWriter

        return TrajectoryWriter(target, scrub=self.secrets.scrub_obj, video=self.config.video)

    # -- a task run ------------------------------------------------------------

    @property
    def roles(self) -> Roles:
        return Roles(self.policy, self.localizer, self.validator, self.continuation)

    def parts(self) -> AgentParts:
        """What this agent gives a task run (agent/task_run.py), read now."""
        return AgentParts(
            config=self.config, secrets=self.secrets, roles=self.roles, layout=self.layout,
            imaging=Imaging(self.profile.image, self.image_tokens), guards=Guards(self.sensitive, self.confirm),
            backends=dict(self._backends), description=self._describe(),
        )

    async def _execute(
        self, task: str, url: str | None, run_dir: Path | None, emit: Callable[[Event], Awaitable[None]],
        answer: AnswerSchema | None, control: RunControl, rewarder: Rewarder, *,
        on_question: QuestionHandler | None = None, answers: Any = None, environment: Environment | None = None,
        earlier: str = "",
    ) -> RunResult:
        preset = PresetAnswers.of(answers, "answers") if answers is not None else self.answers
        environment = environment or self.environment  # a session's, kept open after the run; else the agent's
        owned = environment is None
        environment = self._new_environment() if owned else environment
        async with environment.turn():  # another run in it goes first: this one begins (its clock too) when it ends
            run = RunState(
                task, url, uuid.uuid4().hex[:12], str(run_dir) if run_dir else None, self.secrets.scrub, answer,
                on_question=on_question or self.on_question, answers=preset, earlier=earlier,
            )
            with model_session(run.run_id):  # every model call of the run goes to the server its session is placed on
                task_run = TaskRun(
                    self.parts(), run, environment, owned=owned, control=control, emit=emit, rewarder=rewarder,
                )
                return await task_run.execute()

    def _describe(self) -> dict[str, Any]:
        return {
            "profile": self.profile.name,
            "backends": {role: backend.label for role, backend in self._backends.items()},
            "validator": self.config.validate_answers, "max_steps": self.config.max_steps,
            "max_seconds": self.config.max_seconds,
            "environment": self.environment.kind if self.environment else "browser",
            **({"prompt_layout": self.layout.name} if self.layout.name != "window" else {}),
            **({"image_tokens_per_image": self.image_tokens} if self.image_tokens else {}),
            **({"memory_images": self.layout.memory_images} if self.layout.memory_images != 3 else {}),
            "role_continuation": self.continuation,
            **({"policy": str(policy)} if (policy := session_policy()) is not None else {}),  # a batch's adapter@version
            **({"record_tokens": True, "processor": self.processor()} if self.config.record_tokens else {}),
        }

    def processor(self) -> dict[str, Any]:
        """What produced the image tokens of the recorded calls: the profile's image rule (what surfer did to
        each screenshot before sending it) and the server's processor arguments as `surfer serve` sets them."""
        image = dataclasses.asdict(self.profile.image) if dataclasses.is_dataclass(self.profile.image) else vars(self.profile.image)
        return {"profile": self.profile.name, "image": image, "image_tokens_per_image": self.image_tokens,
                "mm_processor_kwargs": dict(self.profile.serving.mm_processor_kwargs)}


def _check_arguments(
    config: object, environment: object, backend: object, backends: Any, listeners: object, confirm: object,
    on_question: object,
) -> None:
    """Agent's arguments of the wrong kind, refused at once (ConfigError saying what each takes): they failed
    deep inside the first run (an AttributeError), or at its first sensitive action or question."""
    if config is not None and not isinstance(config, AgentConfig):
        if isinstance(config, (str, os.PathLike)):
            raise ConfigError(f"Agent's first argument is an AgentConfig, not a file name: Agent(load_config({str(config)!r}))")
        raise ConfigError(f"Agent's first argument is an AgentConfig (load_config(...)), not {type(config).__name__}: "
                          "give the settings as keywords, Agent(max_steps=15, ...)")
    if environment is not None and not isinstance(environment, Environment):
        raise ConfigError(f"environment= takes an Environment (BrowserEnvironment(...), DesktopEnvironment(...)), "
                          f"not {type(environment).__name__}; without it each run opens a browser of its own")
    given = [("backend=", backend)] + [(f"backends[{role!r}]", b) for role, b in (backends or {}).items()]
    for name, value in given:
        if value is not None and not isinstance(value, ModelBackend):
            what = f"the class {value.__name__}" if isinstance(value, type) else type(value).__name__
            raise ConfigError(f"{name} takes a ModelBackend instance (e.g. ScriptedModel(...), or your subclass of "
                              f"surfer.models.backend.ModelBackend, called), not {what}")
    check_listeners(listeners)
    for name, value in (("confirm=", confirm), ("on_question=", on_question)):
        if value is not None and not callable(value):
            hint = (" (to approve every sensitive action without asking: sensitive_actions=\"approve\")"
                    if name == "confirm=" else " (replies given beforehand go in answers=)")
            raise ConfigError(f"{name} takes a callable (sync or async), not {type(value).__name__}{hint}")


def _resolve_auto(name: str, config: AgentConfig) -> str:
    """`profile="auto"`, as the CLI resolves it: the family of what the endpoint serves (its /models, the
    model's name), its reason logged; another name as it is."""
    if name != "auto":
        return name
    import logging

    from surfer.models.profiles.auto import suggest_profile_for_endpoint

    from .blocking import run_blocking

    first = config.server_specs()[0].endpoint
    chosen, reason = run_blocking(suggest_profile_for_endpoint(first.base_url, first.model, first.api_key))
    logging.getLogger(__name__).info("profile auto: %s", reason)
    return chosen
