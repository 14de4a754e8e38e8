"""Prompt templates as package data (one file per role and family).

Templates use `string.Template` placeholders (`$name`); rendering fails
loudly on an undefined variable (STYLE.md #8)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from string import Template


@lru_cache(maxsize=None)
def _template(name: str) -> Template:
    try:
        text = resources.files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LookupError(f"no prompt template named {name!r} in surfer/prompts") from None
    return Template(text)


def render(name: str, **values: object) -> str:
    try:
        return _template(name).substitute(values).strip()
    except KeyError as exc:
        raise KeyError(f"prompt template {name!r} needs a value for ${exc.args[0]}") from None
