"""The terminal view: a status line while a model call is in flight (seen
through a pseudo-terminal), plain lines off a terminal, `--version`, and
messages (install hints) printed as text, never read as markup."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from surfer.apps.cli import app
from surfer.apps.demo.oracle import DEMO_TASK, DemoOracle, frame_mapper

VIEWPORT = (1024, 700)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
async def centres(demo_site, measure):  # type: ignore[no-untyped-def]
    return await measure(demo_site.base_url, VIEWPORT)


def run_args(site, server, out: Path) -> list[str]:  # type: ignore[no-untyped-def]
    return [sys.executable, "-m", "surfer", "run", DEMO_TASK, "--url", site.url("index.html"), "--no-follow-up", "--base-url", server.base_url,
            "--model", server.model, "--profile", "holotron", "--viewport", "1024x700", "--max-steps", "1", "--no-validator", "--out", str(out)]


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", "TERM": "xterm-256color"}


def read_pty(args: list[str], timeout: float = 90) -> str:
    """Run a command on a pseudo-terminal and return all it wrote."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(args, stdin=follower, stdout=follower, stderr=follower, env=child_env(), close_fds=True)
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif process.poll() is not None:
                break
    finally:
        process.kill() if process.poll() is None else None
        process.wait()
        os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_status_line_shows_the_role_asked_during_a_slow_call(demo_site, standin, centres, tmp_path):
    server = standin(DemoOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0)), delay=1.3)
    shown = read_pty(run_args(demo_site, server, tmp_path / "run"))
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)
    assert "asking the policy… 1s" in plain, plain[-2000:]
    assert "asking the localizer" in plain
    assert "step  1" in plain


def test_output_off_a_terminal_is_plain_lines(demo_site, standin, centres, tmp_path):
    """As in a CI job's log: no COLUMNS (a pipe counts as 80 columns), an output encoding that is not UTF-8."""
    server = standin(DemoOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0)))
    env = {**child_env(), "PYTHONIOENCODING": "latin-1"}
    del env["COLUMNS"]
    done = subprocess.run(run_args(demo_site, server, tmp_path / "run"), capture_output=True, text=True, encoding="latin-1",
                          env=env, stdin=subprocess.DEVNULL, timeout=90)
    text = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in text, text[-3000:]  # (the step limit, 1)
    assert "step  1" in text and "model " in text
    assert "\x1b" not in text and "\r" not in text and "asking the" not in text
    # each line whole, however long: the endpoint beside the profile, the timings on one line, the arrow escaped
    assert f"policy={server.model} @ {server.base_url}" in text
    assert re.search(r"\n   model [0-9.]+s · action .* · overhead [0-9.]+s · tokens \d+\n", text), text
    assert "   \\u2192 click" in text


def test_version_flags_print_the_version():
    from surfer import __version__

    for flag in ("--version", "-V"):
        result = CliRunner().invoke(app, [flag])
        assert result.exit_code == 0 and result.output.strip() == __version__


def install_hints() -> list[str]:
    """Every `pip install '...'` hint in surfer's sources."""
    hints = set()
    for path in (ROOT / "surfer").rglob("*.py"):
        hints.update(re.findall(r"pip install '(surfer-agent\[[a-z]+\])'", path.read_text(encoding="utf-8")))
    return sorted(hints)


def test_every_install_hint_prints_whole(capsys):
    from rich.console import Console

    from surfer.apps import options
    from surfer.core.errors import ConfigError

    hints = install_hints()
    assert {"surfer-agent[miniwob]", "surfer-agent[view]", "surfer-agent[export]"} <= set(hints)
    console = Console(file=sys.stdout, highlight=False, width=200)
    for hint in hints:
        with pytest.raises(Exception):
            with options.setup_errors(console):
                raise ConfigError(f"this needs more: pip install '{hint}'")
        assert f"pip install '{hint}'" in capsys.readouterr().out


def test_verdict_prints_under_the_step_it_judges_and_model_text_is_not_markup():
    import io

    from rich.console import Console

    from surfer.agent.events import StepFinished, StepRecord, StepStarted, Validated, Verdict
    from surfer.apps.live import LiveView

    out = io.StringIO()
    view = LiveView(Console(file=out, width=200, highlight=False))
    record = StepRecord(3)
    record.thought = "The page says [bold]ACME-1[/bold] took 0.04s"
    view(StepStarted(3))
    view(Validated(3, Verdict(True, "The code [red]matches[/red].", "ACME-1")))
    view(StepFinished(record))
    lines = out.getvalue().splitlines()
    step = next(i for i, line in enumerate(lines) if line.startswith("step  3"))
    verdict = next(i for i, line in enumerate(lines) if "validator accepted" in line)
    assert verdict > step
    assert "[red]matches[/red]" in lines[verdict] and "[bold]ACME-1[/bold]" in out.getvalue()


def test_control_characters_show_as_symbols_and_a_cut_thought_says_so():
    """A page can put escape sequences in what a model answers (or a URL, a server's error): printed raw they would
    retitle the window, set the clipboard (OSC 52) or clear the screen. The CLI's console shows them as symbols;
    its own styles and the status line's cursor moves still reach the terminal."""
    import io

    from surfer.agent.events import Finished, StepFinished, StepRecord, StepStarted
    from surfer.agent.result import RunResult
    from surfer.apps.console import Console
    from surfer.apps.live import LiveView

    out = io.StringIO()
    view = LiveView(Console(file=out, width=200, highlight=False, force_terminal=True, color_system="standard"))
    record = StepRecord(1)
    record.thought = "Reading \x1b]0;pwned\x07 the page\x1b[2J"
    record.url = "http://127.0.0.1/\x9b31m"
    view(StepStarted(1))
    view(StepFinished(record))
    view(Finished(RunResult(status="success", answer="ACME-1\x1b]52;c;cm0gLXJmIH4=\x07", reason="ok\x7f", steps=1)))
    text = out.getvalue()
    assert "\x1b]" not in text and "\x1b[2J" not in text and "\x07" not in text and "\x9b" not in text and "\x7f" not in text
    assert "Reading ␛]0;pwned the page␛[2J" in text and "ACME-1␛]52;c;cm0gLXJmIH4=" in text and "ok␡" in text  # (rich drops BEL itself)
    assert "\x1b[1m" in text  # (rich's own styles: "step" in bold)
    # a long thought is cut on its one line, and shows it was cut
    record = StepRecord(2)
    record.thought = "word " * 100
    view(StepFinished(record))
    assert "   " + ("word " * 60)[:299] + "…\x1b[0m\n" in out.getvalue()
