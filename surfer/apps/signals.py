"""Stop signals for the commands: SIGTERM is handled like Ctrl-C, from the moment
the process starts.

CI runners, `timeout`, systemd and Kubernetes stop processes with SIGTERM, at any
moment. `arm()` (surfer/__main__.py calls it first thing for the commands that
keep a record: run, batch, qa) installs the handlers; from then on a stop request

- before the command's run has begun (imports, configuration, the browser
  starting) ends the process at once, exit 130 (SIGINT) or 143 (SIGTERM), with
  one line saying the run never started;
- while it runs (`run_interruptible`) cancels the run's main coroutine once: the
  step in progress is dropped, everything finished is written (`result.json`
  says `interrupted`), and the command exits 130 / 143 (`Interrupted`);
- after the run has ended, ends the process (its record is written;
  `StoppedOutsideRun`).

A reader that goes away — `surfer run ... | head -1` — is a stop too, with no
signal: a write to the closed pipe fails (Python ignores SIGPIPE) and the
console says so, or a watch sees the reader leave while a run waits on its
model (`reader_gone`, from surfer/apps/console.py and output.py). The command
stops as on a signal, quietly (no one is left to read it), with the exit code
of a process that SIGPIPE ended: 141, what `git log | head` does. Its record
is written.

Python runs no handler before the interpreter reaches surfer's code (~20 ms
after the process starts on a quiet machine): a stop earlier than that ends
the process as the system's default does, silently.

In an interactive session (`surfer run` at a terminal), a Ctrl-C while a task
runs is first offered to the session (`on_ctrl_c`): it stops that task alone
and asks whether to end the session; a second Ctrl-C then stops the command
as above. SIGTERM always stops the command.

Copies of one request are that request: the same signal again within
COPY_WINDOW_S, as GNU `timeout` sends it to the command and then to its process
group, and as supervisors signal every process of a group or cgroup at once. A
later signal — a person pressing Ctrl-C a second time — exits at once. The stop
is also said to the layers below (surfer/core/stopping.py) before the
cancellation reaches them, so that a browser killed by the same group signal
ends the run as `interrupted`, not as a crash.

    try:
        result = run_interruptible(main())
    except Interrupted as stop:
        ...                              # say what was kept
        raise typer.Exit(stop.exit_code)
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

from surfer.core import stopping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterator
    from typing import Any, TypeVar

    T = TypeVar("T")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
SIGPIPE = 13  # (signal.SIGPIPE where the platform has it) the stop of a closed output: exit 141
# Copies of one request arrive within a millisecond of each other (handled a few ms apart at
# most, even on a loaded machine); a person's second Ctrl-C comes later than this.
COPY_WINDOW_S = 0.5
# A stop that has not ended the command this long after it came (its cleanup held up: a browser, a thread or a server
# that never answers) ends it anyway, with the threads' stacks on stderr: a CI job never waits on it for good.
STOP_DEADLINE_S = 60.0


def _name(signum: int) -> str:
    return "SIGPIPE" if signum == SIGPIPE else signal.Signals(signum).name


def say(line: str) -> None:
    """A line on stderr, dropped when no one reads it any more."""
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe, a closed stream
        pass


class Interrupted(KeyboardInterrupt):
    """The command was stopped by a signal after cleaning up."""

    def __init__(self, signum: int) -> None:
        super().__init__(_name(signum))
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM


class StoppedOutsideRun(BaseException):
    """A stop signal after the command's run ended (its record is written). Raised
    in the main thread wherever it was (a BaseException, so that no `except
    Exception` takes it for an error); surfer/__main__.py says so and exits 130 / 143."""

    def __init__(self, signum: int) -> None:
        super().__init__(_name(signum))
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class OutputClosed(BaseException):
    """The reader of the command's output went away while no run was going: the
    command stops where it was (a BaseException: no `except Exception` takes it
    for an error), and the CLI exits 141 quietly (surfer/apps/cli.py)."""

    exit_code = 128 + SIGPIPE


class StopRequests:
    """The process's stop requests: the first one, and where it goes."""

    def __init__(self) -> None:
        self.first: tuple[int, float] | None = None  # (signal, when) of the request
        self.deliver: Callable[[int], None] | None = None  # set while a run is going (run_interruptible)
        self.began = False  # a run has begun (a stop outside one is then after it)
        self.armed = False  # the handlers are this process's for good (arm)
        self.what = "the command"  # what a stop before the run began says never started
        self.ctrl_c: Callable[[], bool] | None = None  # a session's own Ctrl-C (on_ctrl_c)
        self.ctrl_c_at = -COPY_WINDOW_S  # when the session last took one
        self.as_json = False  # `surfer run --json`: a stop before the run began also prints its JSON result on stdout

    def handle(self, signum: int, _frame: Any = None) -> None:
        """The signal handler (in the main thread, between two bytecodes of whatever it runs)."""
        now = time.monotonic()
        if signum == signal.SIGINT and self.first is None and self.ctrl_c is not None:
            if now - self.ctrl_c_at < COPY_WINDOW_S:
                return  # the session's Ctrl-C, delivered again
            if self.ctrl_c():
                self.ctrl_c_at = now
                return
        if self.first is not None:
            first, at = self.first
            if signum == first and now - at < COPY_WINDOW_S:
                return  # the same request, delivered again (to the process, then to its group)
            say(f"\nsecond {_name(signum)}: exiting at once\n")
            os._exit(128 + signum)
        self.first = (signum, now)
        stopping.request(f"stopped by {_name(signum)}")
        _exit_if_not_done(signum)
        if self.deliver is not None:
            self.deliver(signum)
            return
        if not self.began:  # nothing written yet, nothing to clean up: say so and go (an exception raised
            # here could land in a weakref callback or a __del__, where Python ignores it, and the stop be lost)
            say(f"stopped by {_name(signum)} before {self.what} started: nothing was recorded\n")
            if self.as_json:
                try:
                    sys.stdout.flush()
                    os.write(sys.stdout.fileno(), (never_started_json(signum) + "\n").encode())
                except (OSError, ValueError):  # (no one reads stdout any more)
                    pass
            os._exit(128 + signum)  # Playwright's driver sees its pipe close and closes the browser
        raise StoppedOutsideRun(signum)

    def output_closed(self, in_main_thread: bool) -> None:
        """The reader of the output went away (see the module docstring): a running run
        is stopped as by a signal (SIGPIPE's); outside one, the main thread stops where
        it is (`OutputClosed`). A stop already under way goes on as it was."""
        if self.first is not None:
            return
        self.first = (SIGPIPE, time.monotonic())
        stopping.request("its output was closed (SIGPIPE)")
        if self.deliver is not None:
            self.deliver(SIGPIPE)
        elif in_main_thread:
            raise OutputClosed()
        # (another thread, no run: what it wrote is dropped; the main thread stops at its next write)

    def install(self) -> dict[int, Any] | None:
        """Install the handlers; the previous ones, or None where signals cannot be set (not the main thread)."""
        previous = {}
        try:
            for signum in STOP_SIGNALS:
                previous[signum] = signal.signal(signum, self.handle)
        except ValueError:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            return None
        return previous

    def reset(self) -> None:
        self.first, self.deliver, self.began, self.ctrl_c = None, None, False, None
        stopping.clear()


_requests = StopRequests()


def _exit_if_not_done(signum: int) -> None:
    """After STOP_DEADLINE_S (SURFER_STOP_DEADLINE_S), a command still running since the stop exits: it says so, with
    every thread's stack (what held the stop up), and ends as the stop would have (128 + the signal)."""
    import threading

    def overdue() -> None:
        import faulthandler

        say(f"\nthe stop ({_name(signum)}) has not ended the command in {deadline:g} s: exiting now; what held it up:\n")
        try:
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        except (OSError, ValueError):
            pass
        os._exit(128 + signum)

    try:
        deadline = float(os.environ.get("SURFER_STOP_DEADLINE_S") or STOP_DEADLINE_S)
    except ValueError:
        deadline = STOP_DEADLINE_S
    timer = threading.Timer(deadline, overdue)
    timer.daemon = True  # (it never keeps a command that ends from ending)
    timer.start()


def never_started_json(signum: int) -> str:
    """`surfer run --json`'s line for a run stopped before it began: its status, and no run directory. Written
    without the json module: the signal can come while that module is being imported (a partly initialised
    module, and the stop ended in a traceback, exit 1)."""
    reason = f"stopped by {_name(signum)} before the run started".replace("\\", "\\\\").replace('"', '\\"')
    return '{"status": "interrupted", "reason": "' + reason + '", "run_dir": null}'


def arm(what: str = "the command", as_json: bool = False) -> None:
    """Handle stop signals from now until the process ends (surfer/__main__.py);
    `what` names what a stop before the run began says never started ("the run"); `as_json`: that stop
    also prints `never_started_json` on stdout, as a stop later prints the run's result."""
    _requests.what = what
    _requests.as_json = as_json
    if not _requests.armed and _requests.install() is not None:
        _requests.armed = True


def on_ctrl_c(handler: Callable[[], bool] | None) -> None:
    """While set, a Ctrl-C (SIGINT) is first offered to `handler`, called in the signal
    handler (in the main thread, maybe not the loop's: it only schedules work, thread-safely).
    It returns True when it took the Ctrl-C (the command goes on), False to stop the command
    as usual. None: no handler."""
    _requests.ctrl_c = handler


def reader_gone(stream: Any) -> None:
    """The reader of `stream` (stdout or stderr) went away (a write to it failed, or
    output.ReaderWatch saw it leave): silence the stream, and stop."""
    import threading

    from surfer.apps.output import hush, silence

    silence(stream)
    hush()
    _requests.output_closed(threading.current_thread() is threading.main_thread())


def run_interruptible(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, with SIGINT and SIGTERM cancelling `main` once and
    raising `Interrupted` when it has unwound (see the module docstring). In a
    `surfer run` that started its browser early, `main` runs on that browser's
    loop instead (surfer/apps/early_start.py). Called without `arm()` (in a
    process of the caller's), the handlers are this call's only."""
    import asyncio
    import concurrent.futures

    requests = _requests
    received: list[int] = []
    running: dict[str, Any] = {}

    def deliver(signum: int) -> None:  # (from the handler, or a console that lost its reader): cancel main
        received.append(signum)
        loop, task = running.get("loop"), running.get("task")
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop has closed: main has ended (the stop is still raised, below)
                pass

    async def guarded() -> T:
        running["loop"] = asyncio.get_running_loop()
        running["task"] = task = asyncio.current_task()
        if received and task is not None:  # the stop came before this task started
            task.cancel()
        return await main

    requests.deliver, requests.began = deliver, True
    previous = None if requests.armed else requests.install()
    from surfer.apps.output import ReaderWatch

    watch = ReaderWatch(reader_gone).start()
    try:
        early = _early_loop()
        result = asyncio.run(guarded()) if early is None else early.submit(guarded()).result()
    except (asyncio.CancelledError, concurrent.futures.CancelledError, KeyboardInterrupt, Exception):
        if received:  # (an error while stopping — a browser killed by the same group signal — is the stop)
            raise Interrupted(received[0]) from None
        raise
    finally:
        watch.stop()
        requests.deliver = None
        if previous is not None:  # the caller's process: its own handlers back, and no stop left pending
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            requests.reset()
    if received:  # main caught the cancellation and returned: still a stop
        raise Interrupted(received[0])
    return result


@contextlib.contextmanager
def writing_record() -> Iterator[None]:
    """While a command writes what its ended run leaves (`surfer qa`'s JUnit and HTML reports): a stop request
    waits until the block is done, then ends the command (`StoppedOutsideRun`). Raised in the middle, it left the
    reports unwritten (or a `.tmp` beside them) while the command said "its record is kept". A second request
    still exits at once."""
    held: list[int] = []
    previous, _requests.deliver = _requests.deliver, held.append
    try:
        yield
    finally:
        _requests.deliver = previous
    if held:
        raise StoppedOutsideRun(held[0])


def run_command(main: Coroutine[Any, Any, T], what: str = "stopped") -> T:
    """`run_interruptible` for commands with nothing more to save at a stop:
    says so on stderr and exits 130 / 143."""
    import typer

    try:
        return run_interruptible(main)
    except Interrupted as stop:
        if stop.signum != SIGPIPE:  # (no one reads what a closed output would say)
            say(f"{what} by {stop}\n")
        raise typer.Exit(stop.exit_code) from None


def _early_loop() -> Any:
    from surfer.apps import early_start

    return early_start.current()
