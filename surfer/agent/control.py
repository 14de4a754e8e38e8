"""Live control of a running agent.

    handle = agent.start("Book the cheapest flight", url=...)
    handle.pause()                    # takes effect between steps
    handle.hint("Use the date picker, not the text field")
    handle.resume()
    handle.finish_now()               # ask for a final answer now
    await handle.take_over()          # a person uses the browser (agent/handover.py) ...
    handle.hand_back()                # ... and hands back
    result = await handle.result()    # or handle.cancel(): status `interrupted`

Commands act at the next step boundary, so the step in progress always
finishes whole and the run directory stays consistent. The time limit keeps
running while a run is paused.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Coroutine

from surfer.core.errors import ConfigError

from .handover import HandOver

if TYPE_CHECKING:
    from .result import RunResult


class RunControl:
    """The state the loop checks between steps (shared with a `RunHandle`)."""

    def __init__(self) -> None:
        self._running = asyncio.Event()
        self._running.set()
        self._hints: list[str] = []
        self.finish_requested = False
        self.handover = HandOver()  # a person's turn at the controls, asked for or held
        self._result: "RunResult | None" = None
        self.stopped_by: str | None = None  # who cancelled the run, said in its reason ("Ctrl-C")

    @property
    def result(self) -> "RunResult | None":
        """Set when the run ends, also when cancelled."""
        return self._result

    @result.setter
    def result(self, value: "RunResult | None") -> None:
        self._result = value
        if value is not None:
            self.handover.close()  # a take-over asked for and never begun ends with the run

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def hint(self, text: str) -> None:
        text = " ".join(text.split())
        if text:
            self._hints.append(text)

    def finish_now(self) -> None:
        self.finish_requested = True
        self._running.set()  # a paused run wakes to answer

    def take_over(self) -> "asyncio.Future[None]":
        """Ask for a person's turn at the next step boundary (a paused run wakes for it)."""
        begun = self.handover.request()
        if not begun.done():
            self._running.set()
        return begun

    async def checkpoint(self) -> list[str]:
        """Between steps: wait while paused; the hints given since the last call."""
        await self._running.wait()
        hints, self._hints = self._hints, []
        return hints


class RunHandle:
    """A run in progress, started by `Agent.start`."""

    @classmethod
    def started(cls, run: "Coroutine[Any, Any, RunResult]", control: RunControl, where: str, task: str = "",
                url: str | None = None) -> "RunHandle":
        """`run` (of `task` at `url`) begun as a task of the running event loop; outside one, a ConfigError (the
        run was made a task of a loop nobody runs: it never began, and its handle waited forever)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            run.close()
            raise ConfigError(f"{where}.start() runs in the background of a running event loop (call it from async "
                              f"code); without one, use run_sync(...)") from None
        return cls(loop.create_task(run), control, task, url)

    def __init__(self, task: "asyncio.Task[RunResult]", control: RunControl, what: str = "", url: str | None = None) -> None:
        self._task = task
        self._control = control
        self._what, self._url = what, url  # the task and its URL, for a result of a run cancelled before it began

    @property
    def done(self) -> bool:
        return self._task.done()

    def when_ended(self, callback: Callable[[], object]) -> None:
        """Call `callback()` once the run has ended, however (also cancelled before it began)."""
        self._task.add_done_callback(lambda _: callback())

    @property
    def paused(self) -> bool:
        return self._control.paused

    def pause(self) -> None:
        self._control.pause()

    def resume(self) -> None:
        self._control.resume()

    def hint(self, text: str) -> None:
        """A note for the policy's next prompt."""
        self._control.hint(text)

    def finish_now(self) -> None:
        """Stop stepping and ask the policy for its final answer (validated as usual)."""
        self._control.finish_now()

    def take_over(self) -> "asyncio.Future[None]":
        """Let a person use the browser: the agent stops at the next step boundary. Await the
        result to know the turn began (`TakeOverRefused` in a headless browser)."""
        return self._control.take_over()

    def hand_back(self) -> bool:
        """End the person's turn: the agent looks again and goes on. False when nobody held it."""
        return self._control.handover.hand_back()

    @property
    def taken_over(self) -> bool:
        """Whether a person holds the controls now."""
        return self._control.handover.holding

    def cancel(self, by: str | None = None) -> None:
        """Stop at once: the step in progress is dropped, the result says `interrupted`
        (`by`: who stopped it, e.g. "Ctrl-C", said in the result's reason)."""
        if by and not self._task.done():
            self._control.stopped_by = by
        self._task.cancel()

    async def result(self) -> "RunResult":
        """The run's result. If the caller is cancelled while waiting (Ctrl-C), the run is
        cancelled too, and its record written, before the cancellation goes on."""
        try:
            return await asyncio.shield(self._task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                if not self._task.done():
                    self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
                raise
            if self._control.result is None:  # cancelled before the run began (or while it waited its turn)
                from .result import RunResult

                # (it raised CancelledError into a caller nobody cancelled)
                self._control.result = RunResult(status="interrupted", task=self._what, url=self._url,
                                                 reason="interrupted before it began (cancelled)")
            return self._control.result
