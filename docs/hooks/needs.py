"""What the docs build imports, against what `pip install -e '.[docs]'`
installs. From the moment this module is imported (surfer_docs.py imports it
first), every import statement run by surfer's code or by these hooks is
noted when it succeeds; at the end of the build `outside_extra()` names each
third-party distribution so imported that the `docs` extra (with surfer's own
requirements, and theirs in turn) does not bring, and the build fails on it.
Imports that third-party packages make for themselves are theirs to need
(many are optional, tried and skipped), so they are not counted.

    python docs/hooks/needs.py      # the check alone, for what this process imported so far (nothing much)
"""

from __future__ import annotations

import builtins
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HOOKS = frozenset(path.stem for path in Path(__file__).parent.glob("*.py"))
EXTRA = "docs"

_imported: dict[str, str] = {}  # top-level module -> the first surfer or hook module that imported it
_original_import = builtins.__import__


def _ours(importer: str) -> bool:
    """surfer's modules and these hooks (mkdocs names the hook it loads by its path)."""
    return importer == "surfer" or importer.startswith("surfer.") or importer.rpartition("/")[2].removesuffix(".py") in HOOKS


def _noting_import(name: str, globals_: Any = None, locals_: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    module = _original_import(name, globals_, locals_, fromlist, level)
    if level == 0 and globals_:
        importer = globals_.get("__name__") or ""
        top = name.partition(".")[0]
        if top not in _imported and _ours(importer):
            _imported[top] = importer
    return module


def start() -> None:
    """Note imports from now on (idempotent)."""
    builtins.__import__ = _noting_import


def imported() -> dict[str, str]:
    """Third-party top-level modules imported by surfer or the hooks: module -> importer."""
    own = {"surfer", *HOOKS}
    return {top: who for top, who in _imported.items() if top not in sys.stdlib_module_names and top not in own}


def outside_extra(own: list[Any] | None = None, extra: str = EXTRA) -> list[str]:
    """'distribution (imported by module)' for each distribution imported so far
    that `pip install '.[extra]'` would not install (empty when the extra is enough).
    `own`: surfer's requirements (default: pyproject.toml's)."""
    from surfer.apps.extras import DIST, closure, from_pyproject, normalized

    installs = closure({extra}, DIST, own=from_pyproject(ROOT / "pyproject.toml") if own is None else own)
    owners = metadata.packages_distributions()
    outside = []
    for top, importer in sorted(imported().items()):
        for dist in sorted({normalized(d) for d in owners.get(top, [])} - installs - {normalized(DIST)}):
            outside.append(f"{dist} (imported by {importer})")
    return outside


def problem(extra: str = EXTRA) -> str | None:
    """The build's error when the extra lacks something it imported, else None."""
    outside = outside_extra(extra=extra)
    if not outside:
        return None
    return (f"the docs build imported {', '.join(outside)}, which `pip install -e '.[{extra}]'` does not install: "
            f"add them to the `{extra}` extra in pyproject.toml")


start()

if __name__ == "__main__":
    print(problem() or f"the {EXTRA} extra holds every distribution imported so far: {sorted(imported())}")
