"""A person takes over and hands back.

    handle = session.start("Sign in and report my last order")
    await session.take_over()     # returns once the agent has stopped between steps
    ...                           # the person uses the browser
    session.hand_back()           # the agent looks again and goes on

A turn is asked for from outside (the terminal's `t`, `session.take_over()`,
`RunHandle.take_over()`) or by the agent itself (`ask_user` with kind
`take_over`, for a CAPTCHA or a sign-in: the person is asked through
`on_question`, and the handler's return hands back; `None` declines). It
begins at the next step boundary (the step in progress finishes whole), in
an environment a person can use: a headful or attached browser, or the
desktop; elsewhere it is refused (`TakeOverRefused`; an agent's request ends
the run `needs_input`, as a question nobody can answer does).

While the person holds the controls, what they do is recorded
(tools/person.py) and, at the hand-back, written as **human steps** in the
run's trajectory.jsonl: lines with `"actor": "human"` (agent steps carry no
`actor`), numbered `human` 1, 2, ... in the run, `index` the number of the
last agent step before them, `screenshot` the screen before the action and
`screenshot_after` the screen after it. The agent's next prompt says that a
person acted: the page before and after, and their actions' headlines. The
time a person holds the controls is not charged to the run's time limit; it
is `timings.human_seconds` in the result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from surfer.core.actions import headline
from surfer.core.deadline import pause_deadline
from surfer.core.errors import SurferError
from surfer.core.observation import Observation
from surfer.tools.person import PersonAction

from .event_json import EventDict
from .questions import Question, call_person

log = logging.getLogger(__name__)

POLL_S = 0.1  # how often the run's limits are moved on while a person holds the controls (what a limit can lose)
NOTE_ACTIONS = 8  # the person's actions the next prompt lists (the rest are counted)


class TakeOverRefused(SurferError):
    """A person cannot take over here (a headless browser), or no task is running."""


@dataclass
class HumanStep:
    """One thing a person did during a take-over; one `actor: "human"` line of trajectory.jsonl."""

    number: int  # 1, 2, ... in the run
    index: int  # the last agent step before it (0: before the first)
    taken: PersonAction
    screenshot_file: str = ""
    screenshot_after_file: str = ""

    def to_dict(self) -> dict[str, Any]:
        before, after, action = self.taken.before, self.taken.after, self.taken.action
        points = [p for p in (getattr(action, "point", None), getattr(action, "to_point", None)) if p is not None]
        outcome: dict[str, Any] = {"detail": self.taken.detail} if self.taken.detail else {}
        if after is not None:
            outcome.update(url=after.url, title=after.title)
        if self.taken.redacted:
            outcome["redacted"] = True
        return {
            "index": self.index, "actor": "human", "human": self.number,
            "url": before.url if before else "", "title": before.title if before else "",
            "screenshot": self.screenshot_file, "screenshot_after": self.screenshot_after_file, "screen": _screen(before),
            "thought": "", "notes": "",
            "action": action.model_dump(mode="json", exclude_none=True, exclude={"point", "to_point"}) if action is not None else None,
            "points": [{"x": round(p.x, 2), "y": round(p.y, 2)} for p in points],  # (a drag: from, to)
            "outcome": outcome, "calls": {}, "verdicts": [], "error": None,
            **({"element": self.taken.element} if self.taken.element else {}),
            "timings": dict.fromkeys(("model", "action", "settle", "screenshot", "encode", "total", "overhead"), 0.0),
            "usage": {"prompt_tokens": 0, "completion_tokens": 0},
        }


@dataclass
class HumanActed(EventDict):
    """Event: a person's action during a take-over, emitted at the hand-back (the run directory writes it):
    `step`, the human step (its `number` in the run, `index` the last agent step before it, and what
    the person did, `taken`: the action, where it could be read, and the screens before and after)."""

    step: HumanStep


@dataclass
class HandedOver(EventDict):
    """Event: a person holds the controls now, after agent step `step` (`asked`: the agent's reason,
    when the agent asked)."""

    step: int
    asked: str = ""


@dataclass
class HandedBack(EventDict):
    """Event: the person handed back, after agent step `step`, having held the controls `seconds` and
    done `actions` things (`declined`: the agent asked and the person said no: the task ends `needs_input`)."""

    step: int
    seconds: float
    actions: int
    declined: bool = False


def _screen(shot: Observation | None) -> dict[str, Any]:
    if shot is None:
        return {}
    s = shot.screenshot
    return {"width": s.size.width, "height": s.size.height, "scale": s.scale, "origin": list(s.origin)}


@dataclass
class HandOver:
    """A run's take-over state, shared by whoever asks for a turn and the loop (`RunControl.handover`)."""

    refusal: str | None = None  # why no person can take over this run's environment (known once it runs)
    holding: bool = False  # a person holds the controls now
    asked: Question | None = None  # the agent's own request (ask_user, kind take_over), for the next boundary
    taken: int = 0  # human steps recorded in the run so far
    _begun: "asyncio.Future[None] | None" = None
    _back: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def requested(self) -> bool:
        return self.asked is not None or (self._begun is not None and not self.holding)

    def request(self) -> "asyncio.Future[None]":
        """Ask for a turn at the next step boundary: a future done when it begins (or failed
        with `TakeOverRefused` where no person can take over)."""
        begun = asyncio.get_running_loop().create_future()
        if self.refusal:
            begun.set_exception(TakeOverRefused(self.refusal))
        elif self.holding:
            begun.set_result(None)
        else:
            if self._begun is None or self._begun.done():
                self._begun, self._back = begun, asyncio.Event()
            return self._begun
        return begun

    def hand_back(self) -> bool:
        """End the person's turn (or a turn asked for that has not begun); False when there is none."""
        if self.holding or self.requested:
            self._back.set()
            return True
        return False

    def refuse(self, why: str) -> None:
        self.refusal = why
        self._settle(TakeOverRefused(why))

    def close(self) -> None:
        """The run ended: a turn asked for and not begun will not begin."""
        self.asked = None
        self._settle(TakeOverRefused("the task ended before a person could take over"))

    def _settle(self, error: BaseException | None) -> None:
        begun, self._begun = self._begun, None
        if begun is not None and not begun.done():
            if error is None:
                begun.set_result(None)
            else:
                begun.set_exception(error)
                begun.exception()  # (retrieved: nobody may be awaiting it)


async def take_turn(run: Any, control: Any, emit: Any, env: Any, memory: Any, index: int) -> tuple[str, str] | None:
    """At a step boundary (after agent step `index`): a person's turn when one was asked for.
    Returns (status, reason) when the run must end (the agent asked, and the person declined)."""
    handover: HandOver = control.handover
    if handover.refusal is None and (why := env.hand_over_refusal()):
        handover.refuse(why)
    if not handover.requested:
        return None
    asked, handover.asked = handover.asked, None
    if asked is None and handover._back.is_set():  # handed back before it began
        handover._settle(None)
        handover._back = asyncio.Event()
        return None
    handler = run.on_question if asked is not None else None
    declined = await _turn(run, emit, env, memory, index, handover, asked, handler)
    if declined and asked is not None:
        run.question = asked.text
        return "needs_input", f"the agent needs a person to take over: {asked.text}"
    return None


def agent_asks(run: Any, control: Any, env: Any, memory: Any, record: Any, question: str) -> tuple[str, str | None, str | None] | None:
    """The agent's `ask_user` of kind take_over, in its step: the turn is taken at the next step
    boundary; where no person can take over (a headless browser, nobody to ask) the run ends
    `needs_input` with the question."""
    refusal = env.hand_over_refusal()
    if refusal is not None or run.on_question is None:
        why = refusal or "nobody can take over (no person to ask)"
        record.outcome = {"question": question, "take_over": True, "answered": False, "why": why}
        memory.add_history(record.index, f"ask_user({question!r}, take_over)", f"nobody took over: {why}")
        run.question = question
        return ("needs_input", None, f"the agent needs a person to take over: {question} ({why})")
    record.outcome = {"question": question, "take_over": True}
    control.handover.asked = Question(record.index, question, False, record.url, record.screenshot, record.screenshot_ext,
                                      take_over=True)
    control.resume()  # (a paused run: the person's turn is its pause)
    return None


async def _turn(run: Any, emit: Any, env: Any, memory: Any, index: int, handover: HandOver, asked: Question | None, handler: Any) -> bool:
    """The person's turn: record what they do until they hand back. Returns True when they declined
    (the agent asked, and its handler returned None without a hand-back)."""
    loop = asyncio.get_running_loop()
    watch = env.watch_person()
    await watch.start()
    handover.holding = True
    if handover._begun is not None and not handover._begun.done():
        handover._begun.set_result(None)
    await emit(HandedOver(index, asked.text if asked else ""))
    waits = {asyncio.ensure_future(handover._back.wait())}
    replying = None
    if handler is not None:
        replying = asyncio.ensure_future(_call(handler, asked))
        waits.add(replying)
    started = last = loop.time()
    try:
        while True:
            done, _ = await asyncio.wait(waits, timeout=POLL_S, return_when=asyncio.FIRST_COMPLETED)
            now = loop.time()
            pause_deadline(now - last)  # not the task's time
            last = now
            if done:
                break
    except BaseException:  # stopped while the person held the controls (Ctrl-C): what they did so far is kept
        with contextlib.suppress(Exception):
            for action in await asyncio.wait_for(watch.stop(), 5):
                handover.taken += 1
                await emit(HumanActed(HumanStep(handover.taken, index, action)))
        raise
    finally:
        for waiting in waits:
            waiting.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
        seconds = loop.time() - started
        run.human += seconds
        handover.holding, handover._begun = False, None
        handover._back = asyncio.Event()
    taken = await watch.stop()
    answered = replying is not None and replying.done() and not replying.cancelled()  # (else: handed back)
    if answered and replying.exception() is not None:
        log.warning("on_question failed while a person held the controls: %r", replying.exception())
    reply = replying.result() if answered and replying.exception() is None else None
    declined = answered and reply is None
    if declined:  # the person said no: only what was read of their actions is kept (not the screens of a turn not taken)
        taken = [action for action in taken if action.action is not None]
    await _record(run, emit, memory, index, handover, taken, reply)
    await emit(HandedBack(index, round(seconds, 3), len(taken), declined))
    return declined


async def _call(handler: Any, question: Question | None) -> Any:
    return await call_person(handler, question)  # (a plain function in a thread: the person's actions are read meanwhile)


async def _record(run: Any, emit: Any, memory: Any, index: int, handover: HandOver, taken: list[PersonAction], reply: Any) -> None:
    """The human steps into the record, and what the agent is told of them."""
    for action in taken:
        handover.taken += 1
        await emit(HumanActed(HumanStep(handover.taken, index, action)))
    first = next((a.before for a in taken if a.before is not None), None)
    last = next((a.after for a in reversed(taken) if a.after is not None), None)
    scrub = run.scrub

    def where(shot: Observation | None) -> str:
        return f"{scrub(shot.title)!r} ({scrub(shot.url)})" if shot is not None and (shot.url or shot.title) else "unknown"

    if not taken:
        memory.add_note("A person held the controls and handed back without doing anything on the page.")
    else:
        memory.add_note(f"A person took over the controls and handed back: before, the screen showed {where(first)}; "
                        f"now it shows {where(last)}. Look at the screen again before you act.")
    read = [a for a in taken if a.action is not None]
    if read:
        told = [scrub(headline(a.action)) + (f" ({scrub(a.detail)})" if a.detail else "") for a in read[:NOTE_ACTIONS]]
        more = f"; and {len(read) - NOTE_ACTIONS} more" if len(read) > NOTE_ACTIONS else ""
        memory.add_note("What the person did: " + "; ".join(told) + more)
    text = getattr(reply, "text", reply)
    if isinstance(text, str) and text.strip() and not getattr(reply, "secret", False):
        memory.add_note(f"The person said: {scrub(text.strip())}")
