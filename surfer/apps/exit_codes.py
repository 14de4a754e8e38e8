"""The exit codes of every `surfer` command, and the one rule that maps a
run's result to them. Its own module so that the CLI, its options and its
controls import it without importing each other.

0 success, 1 task failed or gave up (or hit a limit), 2 bad usage or
configuration, 3 model server unreachable, 4 the agent asked a question
nobody answered (needs_input: run again with --answers), 130 interrupted by
Ctrl-C (SIGINT), 141 its output closed (a reader such as `head` went away;
surfer/apps/output.py), 143 stopped by SIGTERM."""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 3, 130, 143
EXIT_OUTPUT_CLOSED = 141  # 128 + SIGPIPE, as a shell reports a process the signal ended
EXIT_NEEDS_INPUT = 4


def exit_code(result: object) -> int:
    status = getattr(result, "status", "error")
    if status == "success":
        return EXIT_OK
    if status == "interrupted":
        return EXIT_INTERRUPTED
    if status == "needs_input":
        return EXIT_NEEDS_INPUT
    if status == "error":
        kind = getattr(result, "error_kind", None)
        return {"config": EXIT_USAGE, "unreachable": EXIT_UNREACHABLE}.get(kind or "", EXIT_FAILED)
    return EXIT_FAILED
