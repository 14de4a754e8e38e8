"""surfer's optional extras (`pip install 'surfer-agent[NAME]'`), read from the
installed distribution's metadata — never from a hand-kept list, so a new
extra in pyproject.toml is known everywhere at once: which extras there are,
what each requires on this platform, which of those this environment lacks,
and every distribution one `pip install` of some extras brings (the closure
of their requirements, followed through the installed packages' metadata).

`surfer doctor` lists every extra with it; the docs build checks with it that
the `docs` extra holds everything the build imports (docs/hooks/needs.py)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

DIST = "surfer-agent"
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*(.*)$")


def normalized(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Requirement:
    name: str  # normalized
    extras: frozenset[str]
    specifier: str  # e.g. ">=14", "" for any version
    marker: str  # "" when none

    def __str__(self) -> str:
        return f"{self.name}{self.specifier}"

    def applies(self, extra: str = "") -> bool:
        """Whether pip installs it here, for `extra` ("" for the base requirements)."""
        if not self.marker:
            return not extra
        try:
            from packaging.markers import Marker
        except ImportError:  # (no `packaging` here): the markers surfer's own metadata uses
            return _applies_without_packaging(self.marker, extra)
        return Marker(self.marker).evaluate({"extra": extra})

    def unmet(self) -> str | None:
        """None when an installed distribution satisfies it, else why not."""
        try:
            version = metadata.version(self.name)
        except metadata.PackageNotFoundError:
            return f"{self.name} missing"
        if self.specifier:
            try:
                from packaging.specifiers import SpecifierSet
            except ImportError:
                return None  # installed; its version cannot be compared here
            if not SpecifierSet(self.specifier).contains(version, prereleases=True):
                return f"{self.name}{self.specifier} needed, {version} installed"
        return None


def parse(text: str) -> Requirement:
    """One `Requires-Dist` line: `name[extras] specifier; marker`."""
    spec, _, marker = text.partition(";")
    match = _NAME.match(spec)
    if match is None:
        raise ValueError(f"not a requirement: {text!r}")
    name, extras, rest = match.groups()
    specifier = rest.strip().strip("()").replace(" ", "")
    wanted = frozenset(normalized(e) for e in (extras or "").split(",") if e.strip())
    return Requirement(normalized(name), wanted, specifier, marker.strip())


def _applies_without_packaging(marker: str, extra: str) -> bool:
    """`extra == 'x'` and `sys_platform == 'y'` clauses joined by `and` (what
    pyproject.toml's extras use); any other clause counts as true."""
    named = None
    for clause in re.split(r"\s+and\s+", marker.replace("(", " ").replace(")", " ")):
        found = re.match(r"\s*(extra|sys_platform)\s*==\s*['\"]([^'\"]*)['\"]", clause)
        if found is None:
            continue
        key, value = found.groups()
        if key == "extra":
            named = normalized(value)
        elif value != sys.platform:
            return False
    return named == (normalized(extra) if extra else None)


def requirements(dist: str = DIST) -> list[Requirement]:
    """Every `Requires-Dist` line of an installed distribution (PackageNotFoundError if it is not)."""
    return [parse(line) for line in metadata.requires(dist) or []]


def extras(dist: str = DIST) -> dict[str, list[Requirement]]:
    """Each extra the distribution declares, with what it requires on this platform."""
    declared = metadata.metadata(dist).get_all("Provides-Extra") or []
    found = requirements(dist)
    return {name: [r for r in found if r.applies(name)] for name in sorted(declared)}


def unmet(extra: str, dist: str = DIST) -> list[str]:
    """What this environment lacks for `extra` (empty when it is installed)."""
    return [problem for r in extras(dist).get(extra, []) if (problem := r.unmet()) is not None]


def from_pyproject(path: str | Path) -> list[Requirement]:
    """A project's requirements as its pyproject.toml states them, each extra's
    with its `extra == NAME` marker (the source, where an editable install's
    metadata may be older)."""
    import tomllib

    project = tomllib.loads(Path(path).read_text(encoding="utf-8"))["project"]
    found = [parse(line) for line in project.get("dependencies", [])]
    for extra, lines in project.get("optional-dependencies", {}).items():
        for line in lines:
            spec, _, marker = line.partition(";")
            joined = f"({marker.strip()}) and extra == '{extra}'" if marker.strip() else f"extra == '{extra}'"
            found.append(parse(f"{spec}; {joined}"))
    return found


def closure(wanted: set[str] | frozenset[str], dist: str = DIST, own: list[Requirement] | None = None) -> set[str]:
    """The (normalized) names of every distribution `pip install 'dist[wanted]'`
    installs: the base requirements, the extras', and theirs in turn, as the
    installed packages' metadata says (`own`: the root's requirements, e.g.
    from_pyproject(), instead of its installed metadata)."""
    seen: set[str] = set()
    root = normalized(dist)
    todo = [(root, frozenset(normalized(e) for e in wanted))]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, chosen = todo.pop()
        if (name, chosen) in done:
            continue
        done.add((name, chosen))
        seen.add(name)
        try:
            found = own if name == root and own is not None else requirements(name)
        except metadata.PackageNotFoundError:
            continue  # not installed here: nothing further to follow
        for req in found:
            if req.applies("") or any(req.applies(extra) for extra in chosen):
                todo.append((req.name, req.extras))
    return seen
