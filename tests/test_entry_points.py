"""What users import and run keeps working after the move into fleet/, qa/,
bench/ and apps/: the console script, the pytest plugin, the `surfer.commands`
entry point (`surfer bench`), the old import paths (aliases listed in
`surfer.apps.MOVED`) and the SDK imports the docs show."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]


def test_console_script_points_at_main() -> None:
    (script,) = [p for p in entry_points(group="console_scripts") if p.name == "surfer"]
    assert script.value == "surfer.__main__:main"
    assert callable(script.load())


def test_pytest_plugin_entry_point_is_the_qa_plugin() -> None:
    (plugin,) = [p for p in entry_points(group="pytest11") if p.name == "surfer"]
    assert plugin.value == "surfer.qa.pytest_plugin"
    assert plugin.load() is importlib.import_module("surfer.qa.pytest_plugin")


def test_bench_comes_through_the_commands_entry_point() -> None:
    (bench,) = [p for p in entry_points(group="surfer.commands") if p.name == "bench"]
    assert bench.value == "surfer.bench.commands:register"
    from surfer.apps.cli import app

    result = CliRunner().invoke(app, ["bench", "--help"])
    assert result.exit_code == 0, result.output
    for name in ("overhead", "miniwob", "throughput", "qa", "prompts", "gpu"):
        assert name in result.output


def test_bench_works_from_a_source_tree_without_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/gpu_device.sh runs `python3 -m surfer bench gpu ...` from a checkout on PYTHONPATH."""
    import importlib.metadata

    from surfer.apps import cli

    assert cli.OWN_PLUGINS == {p.name: p.value for p in entry_points(group=cli.PLUGIN_GROUP)}
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: [])
    cli.app.registered_groups[:] = [g for g in cli.app.registered_groups if g.name != "bench"]
    result = CliRunner().invoke(cli.app, ["bench", "gpu", "--help"])
    assert result.exit_code == 0, result.output
    assert "make-model" in result.output


def test_building_the_cli_imports_no_benchmark() -> None:
    probe = "import sys; import surfer.apps.cli; print(sorted(m for m in sys.modules if m.startswith('surfer.bench')))"
    out = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_python_m_surfer_bench_runs_the_same_commands() -> None:
    out = subprocess.run([sys.executable, "-m", "surfer.bench", "--help"], env={**os.environ, "PYTHONPATH": str(ROOT)},
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "throughput" in out.stdout and "gpu" in out.stdout


@pytest.mark.parametrize("old", sorted(importlib.import_module("surfer.apps").MOVED))
def test_old_paths_are_the_new_modules(old: str) -> None:
    from surfer.apps import MOVED

    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


def test_readme_sdk_imports() -> None:
    import surfer
    from surfer import Agent, Finished, ScriptedModel, StepFinished  # noqa: F401
    from surfer.agent.config import load_config  # noqa: F401
    from surfer.apps.batch import run_batch as old_run_batch
    from surfer.apps.cluster import RayBatch as OldRayBatch
    from surfer.fleet.batch import run_batch
    from surfer.fleet.cluster import RayBatch
    from surfer.fleet.rollouts import rollouts
    from surfer.tools import DesktopEnvironment  # noqa: F401

    assert old_run_batch is run_batch and OldRayBatch is RayBatch
    assert surfer.rollouts is rollouts


def test_the_package_says_it_is_typed() -> None:
    """PEP 561: without `py.typed` in the package, mypy skips surfer (import-untyped) and a user's
    `result = await agent.run(...)` is Any; hatchling ships every file of the package in the wheel."""
    import surfer

    assert (Path(surfer.__file__).parent / "py.typed").is_file()
