"""Package attributes imported on first use (PEP 562), so importing a package
loads none of its heavy parts until one is asked for."""

from __future__ import annotations

import importlib
TYPE_CHECKING = False  # no typing import: this loads before `surfer run` spawns its browser's driver
if TYPE_CHECKING:
    from typing import Any, Callable


def lazy_exports(package: dict[str, Any], exports: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for the package whose globals are `package`:
    `exports` maps a public name to the module defining it. A name is
    imported once, then kept in the package's globals."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        package[name] = value
        return value

    return __getattr__
