"""`surfer COMMAND ...` in the test's own process (typer's CliRunner), for tests
that check what a command leaves behind — its exit status, its files, what it
says — rather than the process itself. A child process costs ~0.6 s of imports
and, for `surfer run`, a browser started early; signals, closed pipes and the
real entry point are tested with child processes (test_cli.py, test_qa_run.py,
test_stop_any_moment.py, test_closed_output.py)."""

from __future__ import annotations

from dataclasses import dataclass

# The environment of a user who set none of surfer's endpoint variables.
UNSET = ("SURFER_BASE_URL", "SURFER_MODEL", "SURFER_API_KEY", "SURFER_PROFILE")


@dataclass
class Ran:
    """What subprocess.run would have returned for `python -m surfer ARGS`."""

    returncode: int
    stdout: str
    stderr: str


def surfer(*args: str, env: dict[str, str | None] | None = None) -> Ran:
    """Run the command; an exception escaping it (a traceback, in a real process) fails the test.
    `env`: variables set for the call (None: unset). Blocking: an async test calls it through asyncio.to_thread."""
    from typer.testing import CliRunner

    from surfer.apps.cli import app

    environment: dict[str, str | None] = {"NO_COLOR": "1", "COLUMNS": "200", **dict.fromkeys(UNSET), **(env or {})}
    result = CliRunner().invoke(app, list(args), env=environment)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(result.exit_code, result.stdout, result.stderr)
