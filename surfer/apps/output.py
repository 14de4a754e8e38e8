"""The commands' output, and its reader going away.

`surfer run ... | head -1`: `head` reads one line and exits; every later write
to the pipe fails (Python ignores SIGPIPE). The command then stops at once and
quietly, its record written, and exits 141 — what `git log | head` does, the
status of a process SIGPIPE ended (surfer/apps/signals.py stops it). Here: whether
a stream's reader left (`reader_left`), pointing such a stream at /dev/null so
that no later write, nor the interpreter's last flush, fails again (`silence`),
and a watch that sees the reader leave while nothing is written (`ReaderWatch`:
a run waiting on its model stops then, not at its next line). The console that
stops the command when a write fails is surfer/apps/console.py.

Output whose encoding cannot write every character (a latin-1 locale, a Windows
code page, PYTHONIOENCODING=ascii) gets Python's escapes for those characters
(`\\u2192`) rather than a UnicodeEncodeError that ends the command — in `--help`,
or mid-run at the first page title in another script (`tolerate_encodings`)."""

from __future__ import annotations

import os
import stat
import sys
import threading
import weakref

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


consoles: weakref.WeakSet[Any] = weakref.WeakSet()  # the commands' consoles (console.py), hushed together


def hush() -> None:
    """Quiet every console of the command: a stop for a closed output says nothing, on any stream."""
    for console in list(consoles):
        console.quiet = True


def tolerate_encodings() -> None:
    """Let stdout and stderr write characters their encoding lacks, as `\\uXXXX` escapes (what Python's
    stderr does already): the command's text (arrows, check marks) and the pages' and models' text (any script)
    must never end a command on a terminal or a log that is not UTF-8."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            try:
                reconfigure(errors="backslashreplace")
            except (OSError, ValueError):  # a closed or detached stream
                pass


def reader_left(stream: Any) -> bool:
    """Whether `stream` writes to a pipe whose reading end is closed (poll's POLLERR)."""
    import select

    try:
        poller = select.poll()
        poller.register(stream.fileno(), 0)  # no events asked: an error or a hang-up only
        return any(flags & select.POLLERR for _, flags in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def silence(stream: Any) -> None:
    """Point `stream`'s file descriptor, and those of the standard streams that write
    to the same pipe (`2>&1 | head`), at /dev/null."""
    broken = _identity(stream)
    if broken is None:
        return
    streams = [stream, *(s for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__) if s is not None)]
    targets = {s.fileno() for s in streams if _identity(s) == broken}
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in targets:
            try:
                os.dup2(devnull, fd)
            except OSError:
                pass
    finally:
        os.close(devnull)


def silence_closed() -> bool:
    """Silence the standard streams whose reader went away; whether there was one
    (a BrokenPipeError from a socket is not the output's)."""
    closed = [stream for stream in (sys.stdout, sys.stderr) if reader_left(stream)]
    for stream in closed:
        silence(stream)
    return bool(closed)


class ReaderWatch:
    """A thread waiting, while a run goes, for the reader of stdout or stderr (when
    they are pipes) to go away; then `gone(stream)`, once. `stop()` ends it."""

    def __init__(self, gone: Callable[[Any], None]) -> None:
        self.gone = gone
        self.streams = {s.fileno(): s for s in (sys.stdout, sys.stderr) if _is_pipe(s)}
        self._wake_r, self._wake_w = os.pipe() if self.streams else (-1, -1)
        self._thread = threading.Thread(target=self._watch, name="surfer-output-watch", daemon=True)

    def start(self) -> ReaderWatch:
        if self.streams:
            self._thread.start()
        return self

    def _watch(self) -> None:
        import select

        poller = select.poll()
        for fd in self.streams:
            poller.register(fd, 0)
        poller.register(self._wake_r, select.POLLIN)
        for fd, flags in poller.poll():
            if fd in self.streams and flags & select.POLLERR:
                self.gone(self.streams[fd])
                return

    def stop(self) -> None:
        if self.streams:
            os.write(self._wake_w, b"x")  # (the thread may have ended: a pipe holds the byte all the same)
            self._thread.join()
            os.close(self._wake_r)
            os.close(self._wake_w)


def _is_pipe(stream: Any) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(stream.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):
        return False


def _identity(stream: Any) -> tuple[int, int] | None:
    """(device, inode) of the file `stream` writes to; None without one (a test's capture)."""
    try:
        status = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None
    return status.st_dev, status.st_ino
