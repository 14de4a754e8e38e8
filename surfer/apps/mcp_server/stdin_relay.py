"""The stdio transport's stdin, relayed through a pipe the server holds both
ends of, so that a signal (SIGTERM, Ctrl-C) ends the transport as the client
closing stdin does.

The SDK reads stdin in a worker thread no cancellation reaches: while the
client kept its end open, a signal left `surfer mcp` waiting for the next
line for ever, its runs going on. Here a daemon thread copies the real stdin
into a pipe that becomes fd 0; `end()` makes it close that pipe, the
transport reads end-of-file and the server closes as it does when the client
goes away (POSIX only: elsewhere stdin is read as it is)."""

from __future__ import annotations

import logging
import os
import select
import threading
from typing import Callable, Optional

log = logging.getLogger("surfer.mcp")
CHUNK = 65536


class StdinRelay:
    def __init__(self, source: int, on_end: Optional[Callable[[], None]] = None) -> None:
        self.source = source  # the real stdin (a duplicate of fd 0 before the relay)
        self.on_end = on_end  # called (in the relay's thread) once the transport's input has ended
        self.stop_read, self.stop_write = os.pipe()
        read_end, self.write_end = os.pipe()
        os.dup2(read_end, 0)
        os.close(read_end)
        threading.Thread(target=self._copy, name="surfer-mcp-stdin", daemon=True).start()

    @classmethod
    def start(cls, on_end: Optional[Callable[[], None]] = None) -> Optional["StdinRelay"]:
        """Relay fd 0 (None where it cannot: not POSIX, no stdin)."""
        if os.name != "posix":
            return None
        try:
            return cls(os.dup(0), on_end)
        except OSError as exc:
            log.warning("stdin is read as it is (%r): a signal ends the server only once the client closes it", exc)
            return None

    def _copy(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self.source, self.stop_read], [], [])
                if self.stop_read in ready:
                    return
                data = memoryview(os.read(self.source, CHUNK))
                if not data:
                    return
                while data:
                    data = data[os.write(self.write_end, data):]
        except OSError:
            return
        finally:
            os.close(self.write_end)  # the transport reads end-of-file
            if self.on_end is not None:
                self.on_end()

    def end(self) -> None:
        """End the transport's input now (a signal): the server closes as if the client had."""
        try:
            os.write(self.stop_write, b"x")
        except OSError:
            pass

    def restore(self) -> None:
        """fd 0 back to the real stdin (the server has closed)."""
        os.dup2(self.source, 0)
