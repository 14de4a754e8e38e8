"""The commands only: the CLI (cli.py) and its options, exit codes, terminal
views and controls, signals and early start; serve, doctor, calibrate,
export, batch, qa, view and demo. Nothing outside apps/ imports it (except
surfer/__main__.py); benchmarks come through the `surfer.commands` entry
point (surfer/bench/commands.py).

Old import paths that moved out of apps/ stay importable for one release as
thin aliases of the new modules, listed here and only here:"""

from __future__ import annotations

import importlib
import sys

# old path -> new home (the documented one); each old path is a module here
# that calls moved(__name__), so `surfer.apps.batch` IS `surfer.fleet.batch`.
MOVED = {
    "surfer.apps.batch": "surfer.fleet.batch",
    "surfer.apps.cluster": "surfer.fleet.cluster",
    "surfer.apps.rollouts": "surfer.fleet.rollouts",
    "surfer.apps.sessions": "surfer.fleet.sessions",
    "surfer.apps.qa.pytest_plugin": "surfer.qa.pytest_plugin",
    "surfer.apps.qa.suite": "surfer.qa.suite",
    "surfer.apps.qa.runner": "surfer.qa.runner",
}


def moved(name: str) -> None:
    """Make the old module `name` an alias of its new home (MOVED)."""
    sys.modules[name] = importlib.import_module(MOVED[name])
