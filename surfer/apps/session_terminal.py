"""`surfer run` at an interactive terminal: a session of tasks typed one after
another, in one browser.

- The first task comes from the command line, else from the prompt; each next
  one from a line typed while the last ran (queued, not lost), else from the
  prompt. An empty line or Ctrl-D ends the session.
- Ctrl-C while a task runs stops that task (recorded `interrupted`, its step in
  progress dropped) and asks "End the session? [y/N]"; a second Ctrl-C — while
  the task stops or at that question — ends the session, as does SIGTERM at
  any moment. Every task is recorded in the session's summary either way.
- A browser that died is replaced before the next task, and the terminal says
  that the pages, sign-ins and tabs of the earlier tasks are gone (the next
  task's prompt says so too: agent/session.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from surfer.apps import options, signals

BROWSER_RESTARTED = "it stopped working and was restarted: the pages, sign-ins and tabs of the earlier tasks are gone"


class TaskStopper:
    """The session's Ctrl-C (signals.on_ctrl_c): the first one while a task runs stops
    that task alone; while it is pending (the task stopping, the question asked)
    another Ctrl-C stops the command, which ends the session."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.handle: Any = None  # the task running (a RunHandle), None between tasks
        self.pending = False  # a Ctrl-C stopped the task; the person has not said yet whether to go on

    def __call__(self) -> bool:  # (in the signal handler: schedules the stop on the session's loop)
        handle = self.handle
        if handle is None or self.pending:
            return False
        self.pending = True
        self.loop.call_soon_threadsafe(handle.cancel, "Ctrl-C")
        return True


async def run_session(agent: Any, controls: Any, console: Any, task: str | None, url: str | None, directory: Path,
                      answer: Any) -> Any:
    """The session (see the module's docstring). The last task's result (None: no task ran)."""
    from surfer.agent.session import Session

    # the browser `surfer run` started (early, or the desktop) is the session's: replaced when it dies
    session = Session(agent, url, out_dir=directory, on_question=controls.ask_user, adopt_environment=True)
    controls.follow_ups = []
    stopper = TaskStopper()
    signals.on_ctrl_c(stopper)
    last = None
    try:
        task = (task or "").strip() or await controls.next_task()
        while task:
            if await session.renew_environment():
                options.say(console, "browser:", "yellow", BROWSER_RESTARTED)
            handle = stopper.handle = session.start(task, answer_schema=answer if not session.results else None)
            controls.attach(handle)
            try:
                last = await handle.result()
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if not stopper.pending or (current is not None and current.cancelling()):
                    raise
                last = None  # stopped before it began: nothing of it to record
            finally:
                stopper.handle = None
                controls.detach()
            if session.browser_restarted:
                options.say(console, "browser:", "yellow", BROWSER_RESTARTED)
            if stopper.pending:
                options.say(console, "stopped:", "yellow", "the task was interrupted (Ctrl-C again ends the session)")
                reply = await controls.read_line("[bold]End the session?[/bold] \\[y/N]")
                if reply is None or reply.lower() in ("y", "yes"):
                    break
                stopper.pending = False
            task = await controls.next_task()
    finally:
        signals.on_ctrl_c(None)
        await session.close()
        await agent.aclose()
        if agent.environment is not None:  # the agent closes only environments it made
            await agent.environment.close()
    if session.results:
        options.say(console, "session:", "bold", f"{len(session.results)} task(s), saved in {directory}")
    return last
