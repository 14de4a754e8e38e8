"""The package layout keeps its rules (docs/ARCHITECTURE.md), read from the
code's imports with `ast` — at module level and inside functions alike:

- nothing outside surfer/bench/ imports `surfer.bench`;
- nothing outside surfer/apps/ (and surfer/__main__.py) imports `surfer.apps`,
  but for the benchmarks, which may use anything (the commands' helpers and
  the demo's fixtures in surfer/apps/demo/ included);
- the lower layers (core, models, tools, prompts, agent) import none of
  fleet, qa, bench or apps;
- no circle of imports between modules, imports under `if TYPE_CHECKING:`
  included: they never run, but a type that two modules need from each other
  lives in the wrong one;
- no Python module over 500 lines;
- every module docs/ARCHITECTURE.md names exists, and every import of
  surfer's own names (relative ones included) finds its module.

The old paths in `surfer.apps.MOVED` are aliases kept for one release: they
are the one exception to the apps rule's other direction (apps importing
what moved out), which the layering allows anyway."""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 500
LOWER = ("core", "models", "tools", "prompts", "agent")
UPPER = ("fleet", "qa", "bench", "apps", "env")


@dataclass
class Module:
    name: str
    path: Path
    package: bool
    imports: set[str] = field(default_factory=set)  # every import, TYPE_CHECKING ones included
    missing: set[str] = field(default_factory=set)  # imports of the package's own names that resolve to no module


def read_modules(root: Path, top: str) -> dict[str, Module]:
    """Every module of the package `top` under `root`, with the modules of
    that package it imports (a `from X import name` counts X.name when that
    is a module, else X)."""
    modules: dict[str, Module] = {}
    for path in sorted((root / top).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        modules[".".join(parts)] = Module(".".join(parts), path, package)
    for module in modules.values():
        base = module.name.split(".") if module.package else module.name.split(".")[:-1]

        def visit(node: ast.AST) -> None:
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    stem = base[: len(base) - (node.level - 1)]
                    source = ".".join(stem + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                names = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
            for name in names:
                if name.split(".")[0] == top and name not in modules:
                    module.missing.add(name)
                if name in modules and name != module.name:
                    module.imports.add(name)
            for child in ast.iter_child_nodes(node):
                visit(child)

        visit(ast.parse(module.path.read_text(encoding="utf-8")))
    return modules


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def connect(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def _room(name: str, top: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == top else None


def violations(modules: dict[str, Module], top: str = "surfer", max_lines: int = MAX_LINES,
               aliases: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """Every broken rule, one line each (empty: the layout holds)."""
    found = []
    for module in modules.values():
        room = _room(module.name, top)
        for target in sorted(module.missing):
            found.append(f"{module.name} imports {target}, which is no module of {top}")
        for target in sorted(module.imports):
            to = _room(target, top)
            if to == "bench" and room != "bench":
                found.append(f"{module.name} imports {target}: nothing outside {top}.bench imports it")
            if to == "apps" and room not in ("apps", "bench") and module.name != f"{top}.__main__":
                found.append(f"{module.name} imports {target}: nothing below {top}.apps imports it")
            if room in LOWER and to in UPPER:
                found.append(f"{module.name} imports {target}: {room} is below {to}")
        if module.name not in aliases:
            lines = len(module.path.read_text(encoding="utf-8").splitlines())
            if lines > max_lines:
                found.append(f"{module.name} has {lines} lines (at most {max_lines}: split it by job)")
    for component in cycles({m.name: m.imports for m in modules.values()}):
        found.append("import circle: " + " -> ".join(component))
    return found


def test_the_layout_holds() -> None:
    from surfer.apps import MOVED

    assert violations(read_modules(ROOT, "surfer"), aliases=set(MOVED)) == []


def test_the_check_catches_each_kind_of_violation(tmp_path: Path) -> None:
    """The checker itself, on a small package that breaks every rule once."""
    pkg = tmp_path / "pkg"
    for room in ("core", "agent", "fleet", "bench", "apps"):
        (pkg / room).mkdir(parents=True)
        (pkg / room / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("def f():\n    from pkg.fleet import b  # a lower layer reaching up, in a function\n")
    (pkg / "fleet" / "b.py").write_text("from pkg.bench.c import x  # runtime importing a benchmark\n")
    (pkg / "bench" / "c.py").write_text("from pkg.apps.d import y\nx = 1\n")
    (pkg / "apps" / "d.py").write_text("y = 2\n")
    (pkg / "agent" / "e.py").write_text("from . import f\n")
    (pkg / "agent" / "f.py").write_text("from .e import g\ng = 3\n" + "pass\n" * 20)
    (pkg / "agent" / "h.py").write_text("from pkg.apps import d\n")
    (pkg / "agent" / "t.py").write_text("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from pkg.agent import u\n")
    (pkg / "agent" / "u.py").write_text("from pkg.agent import t\n\n\ndef later():\n    from .gone import x\n")
    found = violations(read_modules(tmp_path, "pkg"), top="pkg", max_lines=10)
    text = "\n".join(found)
    assert "pkg.core.a imports pkg.fleet.b: core is below fleet" in text
    assert "pkg.fleet.b imports pkg.bench.c: nothing outside pkg.bench imports it" in text
    assert "pkg.agent.h imports pkg.apps.d: nothing below pkg.apps imports it" in text
    assert "pkg.agent.h imports pkg.apps.d: agent is below apps" in text
    assert "import circle: pkg.agent.e -> pkg.agent.f" in text
    assert "pkg.agent.f has 22 lines" in text
    assert "pkg.bench.c imports pkg.apps.d" not in text  # bench may use anything
    assert "import circle: pkg.agent.t -> pkg.agent.u" in text  # type-only imports count too
    assert "pkg.agent.u imports pkg.agent.gone, which is no module of pkg" in text
    assert len(found) == 8, found


def test_every_module_the_architecture_names_exists() -> None:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(surfer/[\w/]+(?:\.py)?)`", text))
    assert len(named) > 40, "docs/ARCHITECTURE.md names the modules as `surfer/...py`"
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert missing == []
