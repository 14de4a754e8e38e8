"""The stdio transport's stdout, relayed through a pipe the server holds, so
that a client which stopped reading cannot keep `surfer mcp` from closing.

The SDK writes stdout in a worker thread no cancellation reaches: when the
client stopped reading (its pipe full), that write blocked for ever, and a
signal, or the client closing stdin, left the server hanging, its sessions'
browsers open. Here fd 1 becomes a pipe whose other end a daemon thread
copies to the real stdout. Once the server closes (`end()`), what the client
has not taken within `DRAIN_S` is dropped, so that the SDK's writes end and
the server closes (POSIX only: elsewhere stdout is written as it is)."""

from __future__ import annotations

import logging
import os
import select
import sys
import threading
from typing import Optional

log = logging.getLogger("surfer.mcp")
CHUNK = 65536
PIPE_BUF = 4096  # a write of at most this to a pipe select calls writable does not block (POSIX)
DRAIN_S = 1.0  # once the server closes: how long a client may read nothing before what is left is dropped


class StdoutRelay:
    def __init__(self, sink: int) -> None:
        self.sink = sink  # the real stdout (a duplicate of fd 1 before the relay)
        self.dropping = False  # the server closed and the client did not read: what comes is dropped
        self.busy = False  # the relay holds bytes it read and has not written yet
        self.idle = threading.Condition()
        self.stop_read, self.stop_write = os.pipe()
        self.source, write_end = os.pipe()
        os.dup2(write_end, 1)
        os.close(write_end)
        threading.Thread(target=self._copy, name="surfer-mcp-stdout", daemon=True).start()

    @classmethod
    def start(cls) -> Optional["StdoutRelay"]:
        """Relay fd 1 (None where it cannot: not POSIX, no stdout)."""
        if os.name != "posix":
            return None
        try:
            return cls(os.dup(1))
        except OSError as exc:
            log.warning("stdout is written as it is (%r): a client that stops reading can keep the server open", exc)
            return None

    def _copy(self) -> None:
        try:
            while True:
                select.select([self.source], [], [])
                with self.idle:  # (restore() sees the bytes in the pipe, or `busy`: never neither while some are held)
                    data = memoryview(os.read(self.source, CHUNK))
                    self.busy = True
                if not data:
                    return
                while data and not self.dropping:
                    try:
                        data = data[self._write(data):]
                    except OSError:  # the client closed its end: nobody reads any more
                        self.dropping = True
                with self.idle:
                    self.busy = False
                    self.idle.notify_all()
        except OSError:
            return
        finally:
            with self.idle:
                self.busy = False
                self.idle.notify_all()

    def _flushed(self) -> bool:
        import fcntl
        import termios

        unread = bytearray(4)
        fcntl.ioctl(self.source, termios.FIONREAD, unread)
        return not self.busy and not int.from_bytes(unread, sys.byteorder)

    def _write(self, data: memoryview) -> int:
        """What the sink takes of `data` without blocking; once the server closes, a sink that takes nothing
        for DRAIN_S switches the relay to dropping (the client stopped reading)."""
        closing = False
        while True:
            _, writable, _ = select.select([] if closing else [self.stop_read], [self.sink], [],
                                           DRAIN_S if closing else None)
            if writable:
                return os.write(self.sink, data[:PIPE_BUF])
            if closing:
                log.warning("the MCP client stopped reading its stdout: what it has not read is dropped")
                self.dropping = True
                return 0
            closing = True

    def end(self) -> None:
        """The server closes: from now on, a client that does not read for DRAIN_S no longer holds it open."""
        try:
            os.write(self.stop_write, b"x")
        except OSError:
            pass

    def restore(self) -> None:
        """fd 1 back to the real stdout (the server has closed), once what the server wrote has reached it (the last
        answers were lost when the process exited before the relay had written them), or has waited DRAIN_S."""
        with self.idle:
            self.idle.wait_for(self._flushed, DRAIN_S)
        os.dup2(self.sink, 1)
