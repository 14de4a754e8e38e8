"""Start-up stays light: `import surfer` (and building the CLI for `surfer
--help`) loads none of the heavy libraries until something needs them. Each
check runs in a fresh interpreter, since this test process has them loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("openai", "playwright", "PIL", "httpx", "numpy", "mcp")


def _loaded_after(code: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _heavy(modules: list[str]) -> list[str]:
    return sorted({m.split(".")[0] for m in modules if m.split(".")[0] in HEAVY})


def test_import_surfer_loads_no_heavy_library() -> None:
    modules = _loaded_after("import surfer")
    assert _heavy(modules) == []
    assert "pydantic" not in modules and "surfer.agent.loop" not in modules


@pytest.mark.parametrize("code", [
    "import surfer.apps.cli",  # what `surfer --help` builds
    "from surfer import Agent, AgentConfig, StepFinished",  # the SDK before a run
    # an agent built for an HTTP endpoint: openai loads during the model check, while the browser starts
    "from surfer import Agent; Agent(base_url='http://127.0.0.1:9/v1', model='m')",
])
def test_entry_points_load_no_heavy_library(code: str) -> None:
    modules = _loaded_after(code)
    assert _heavy(modules) == [], code
    if code == "import surfer.apps.cli":
        assert "pydantic" not in modules and "surfer.agent.config" not in modules


def test_lazy_names_resolve() -> None:
    import surfer

    for name in surfer.__all__:
        if name != "DesktopEnvironment":  # needs pyautogui/mss and a display: tests/test_desktop.py
            assert getattr(surfer, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        surfer.Nope  # noqa: B018


def test_a_type_checker_sees_every_public_name_and_no_made_up_one() -> None:
    """mypy and pyright read `surfer/__init__.py`'s imports under TYPE_CHECKING: each public name is there, typed.
    A module `__getattr__` they can see (PEP 562) makes every other name `Any`: `from surfer import Agnet`, or a
    name that is not exported (RunError was not), passed a user's type check and failed when run."""
    import ast

    import surfer

    typed: set[str] = set()
    for node in ast.parse(Path(surfer.__file__).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            typed |= {alias.asname or alias.name for sub in node.body if isinstance(sub, (ast.Import, ast.ImportFrom))
                      for alias in sub.names}
        assert not (isinstance(node, ast.FunctionDef) and node.name == "__getattr__"), "a __getattr__ type checkers see"
    assert set(surfer.__all__) - {"__version__"} <= typed, set(surfer.__all__) - typed
    from surfer import ContextTooLong, ModelRequestError, ModelServerUnreachable, RunError  # what a backend raises

    assert issubclass(ModelServerUnreachable, RunError) and issubclass(ContextTooLong, ModelRequestError)

