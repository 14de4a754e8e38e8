"""The documentation cannot drift from the code: every `surfer ...` command line
shown in the README and the docs exists with the flags it uses, the generated
reference lists every command, flag and configuration key, and user docs
carry no development history. (`mkdocs build --strict` itself runs in
scripts/test.sh: broken links and anchors fail there.)"""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console", "text"}
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.S | re.M)


def _reference():  # type: ignore[no-untyped-def]
    """docs/hooks/reference.py, the build's generator, under a name of its own."""
    name = "surfer_docs_reference"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, DOCS / "hooks" / "reference.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def user_docs() -> list[Path]:
    return [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)]


def command_lines(text: str) -> list[str]:
    """The shell lines of a Markdown text's code blocks, continuation lines joined."""
    lines: list[str] = []
    for block in FENCE.finditer(text):
        if block.group("lang") not in SHELL_BLOCKS:
            continue
        joined = re.sub(r"\\\n\s*", " ", block.group("body"))
        lines += [line.strip().removeprefix("$ ") for line in joined.splitlines() if line.strip()]
    return lines


def surfer_commands(line: str) -> list[list[str]]:
    """Each `surfer ...` command of a shell line, as the words after `surfer`."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # not shell (a heredoc's body, output)
        return []
    commands, segment = [], []
    for token in [*tokens, ";"]:
        if token and set(token) <= set("&|;<>()"):
            starts = [i for i, word in enumerate(segment) if word.rsplit("/", 1)[-1] == "surfer"]
            if starts:
                commands.append(segment[starts[0] + 1:])
            segment = []
        else:
            segment.append(token)
    return commands


def check_command(words: list[str]) -> list[str]:
    """Problems with `surfer WORDS`: an unknown command, or a flag it does not take."""
    reference = _reference()
    path, command, ctx, rest = reference.find_command(words)
    problems = []
    placeholder = rest and (rest[0].isupper() or rest[0] in ("...", "…"))  # `surfer COMMAND --help`
    if hasattr(command, "list_commands") and rest and not rest[0].startswith("-") and not placeholder:
        problems.append(f"{' '.join(path)} has no command {rest[0]!r}")
    options = reference.option_names(command, ctx)
    for word in rest:
        if word == "--":  # what follows goes to another program (vllm serve)
            break
        flag = word.strip("[]").split("=", 1)[0]
        if flag.startswith("-") and len(flag) > 1 and not flag[1:].replace(".", "").isdigit() and flag not in options:
            problems.append(f"{' '.join(path)} has no option {flag}")
    return problems


def documented_commands() -> list[tuple[str, list[str]]]:
    """Every `surfer ...` command in the code blocks of the README and the docs, and in their inline code."""
    found = []
    for path in user_docs():
        text = path.read_text(encoding="utf-8")
        inline = re.findall(r"`(surfer [^`\n]+)`", FENCE.sub("", text))
        for line in [*command_lines(text), *inline]:
            found += [(f"{path.relative_to(ROOT)}: {line}", words) for words in surfer_commands(line)]
    return found


def test_the_command_line_parser_of_the_docs_test():
    assert surfer_commands("SURFER_MCP_TOKEN=x surfer mcp --http 8765 --host 0.0.0.0  # a comment") == [
        ["mcp", "--http", "8765", "--host", "0.0.0.0"]]
    assert surfer_commands("python3 -m venv .venv && .venv/bin/surfer run 'a b' --url U") == [["run", "a b", "--url", "U"]]
    assert surfer_commands("pip install 'surfer-agent[view]'") == []
    assert check_command(["run", "TASK", "--url", "URL", "--no-such-flag"]) == ["surfer run has no option --no-such-flag"]
    assert check_command(["bench", "gpu", "nope"]) == ["surfer bench gpu has no command 'nope'"]
    assert check_command(["serve", "M", "--dry-run", "--", "--load-format", "dummy"]) == []


def test_every_surfer_command_in_the_readme_and_docs_exists_with_its_flags():
    commands = documented_commands()
    assert len(commands) > 100, commands  # the docs show many; a broken scan would find few
    problems = [f"{where}: {problem}" for where, words in commands for problem in check_command(words)]
    assert problems == []


def test_the_generated_cli_reference_lists_every_command_and_every_flag_of_surfer_run():
    reference = _reference()
    markdown = reference.cli_markdown()
    for path, command, ctx in reference.walk_commands():
        assert f"`{' '.join(path)}` {{ #{reference.anchor(path)} }}" in markdown
    section = markdown.split("`surfer run` { #surfer-run }", 1)[1].split("\n### ", 1)[0]
    _, run, ctx, _ = reference.find_command(["run"])
    flags = reference.option_names(run, ctx)
    assert {"--url", "--base-url", "--max-steps", "--secret", "--json"} <= flags
    missing = [flag for flag in sorted(flags) if not re.search(rf"`{re.escape(flag)}\b", section)]
    assert missing == []
    assert "surfer bench gpu run" in markdown  # the entry-point command is loaded
    # usage lines name arguments as --help conventions do, whatever braces Typer prints around required ones
    usages = re.findall(r"^```text\n(surfer .*)\n```$", markdown, re.M)
    assert [line for line in usages if re.search(r"[{}]", line)] == []
    assert {"surfer qa [OPTIONS] FILES...", "surfer run [OPTIONS] [TASK]", "surfer batch [OPTIONS] TASKS_FILE",
            "surfer policy switch [OPTIONS] NAME@VERSION"} <= set(usages)


def test_an_unanswered_question_is_told_as_each_command_ends_it():
    """`surfer run` asks at a terminal or exits 4; a batch asks nobody and exits 0 over a needs_input task."""
    reference = _reference()

    def answers_help(command: str) -> str:
        _, found, ctx, _ = reference.find_command([command])
        return next(p.help for p in found.get_params(ctx) if "--answers" in getattr(p, "opts", []))

    assert "exit code 4" in answers_help("run") and "interactive terminal" in answers_help("run")
    assert "needs_input, a final outcome" in answers_help("batch")
    assert "exit code 4" not in answers_help("batch") and "terminal" not in answers_help("batch")


def test_the_generated_config_reference_has_every_key_with_a_description():
    from surfer.agent.config import AgentConfig, BrowserSettings, DesktopSettings, RoleSettings, ServerSettings

    markdown = _reference().config_markdown()  # raises on a field without a description
    assert "## `servers = [...]` entries" in markdown and "## `[desktop]`" in markdown
    for model in (AgentConfig, BrowserSettings, DesktopSettings, RoleSettings, ServerSettings):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name}"
            assert f"**`{name}`**" in markdown or name in ("browser", "desktop", "policy", "localizer", "validator")


def test_the_format_schemas_generate():
    reference = _reference()
    for spec in ("surfer.agent.formats:TrajectoryLine", "surfer.agent.formats:RunMeta", "surfer.agent.formats:TokensLine",
                 "surfer.agent.result:RunResult", "surfer.fleet.batch.results:ResultLine",
                 "surfer.fleet.batch.tasks:BatchTask"):
        text = reference.schema_markdown(spec)
        assert '"properties"' in text and "| field | type | description |" in text


def test_every_generate_directive_in_the_docs_is_known():
    reference = _reference()
    for path in user_docs():
        for match in reference.DIRECTIVE.finditer(path.read_text(encoding="utf-8")):
            assert match.group(1) in ("cli", "config", "api", "schema"), f"{path}: {match.group(0)}"


@pytest.mark.parametrize("pattern", [r"\bissues? \d+", r"/work/", r"\bbefore this change\b", r"\bprevious main\b"])
def test_user_docs_hold_no_development_history_or_machine_paths(pattern):
    hits = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
            for path in user_docs() for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if re.search(pattern, line, re.I)]
    assert hits == []


NEEDS_PROBE = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
import needs  # notes every import from here on, as in the docs build (surfer_docs.py imports it first)
from surfer.apps.extras import from_pyproject
from surfer.apps.view.server import ViewServer

async def view_once() -> None:  # what the build's screenshots do: a batch watched by `surfer view`
    view = await ViewServer(sys.argv[2], port=0).start()
    await view.stop()

asyncio.run(view_once())
without_view = [r for r in from_pyproject(needs.ROOT / "pyproject.toml") if r.name not in ("starlette", "uvicorn") or "docs" not in r.marker]
print(json.dumps({"imported": needs.imported(), "outside": needs.outside_extra(), "without": needs.outside_extra(without_view)}))
"""


def test_the_docs_extra_installs_what_the_docs_build_imports(tmp_path):
    """docs/hooks/needs.py fails the build when it imported a distribution that
    `pip install -e '.[docs]'` does not bring; here the part of the build that
    once lacked its packages (the screenshots' `surfer view`), in a fresh process."""
    import json
    import subprocess

    proc = subprocess.run([sys.executable, "-c", NEEDS_PROBE, str(DOCS / "hooks"), str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["imported"]["starlette"] == found["imported"]["uvicorn"] == "surfer.apps.view.server"
    assert "httptools" not in found["imported"]  # uvicorn's own optional choice: not counted as the build's
    assert found["outside"] == []
    assert found["without"] == ["starlette (imported by surfer.apps.view.server)", "uvicorn (imported by surfer.apps.view.server)"]
