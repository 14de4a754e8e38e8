"""A suite file's problems in its own words: pydantic's errors as a suite's author reads them (a misspelt key
with the key it may be, a line YAML read as a mapping, a key given twice)."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel


class SettingError(ValueError):
    """A problem of the suite's `model` settings, with the key's place in them (its line in the file)."""

    def __init__(self, loc: tuple[Any, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


def where(err: Any) -> tuple[Any, ...]:
    """The field of a problem: a variable's value is one field, whichever member of its union pydantic names; a
    key of the `model` settings is where it is in them."""
    loc = _without_tags(err["loc"])
    setting = (err.get("ctx") or {}).get("error")
    if isinstance(setting, SettingError):
        return (*loc, *setting.loc)
    return loc[:2] if loc[:1] == ("vars",) else loc


def problem(err: Any, root: type[BaseModel]) -> str:
    """pydantic's message for one problem, in the words of a suite file: a misspelt key names the key it may be."""
    loc, kind = where(err), err["type"]
    if loc[:1] == ("vars",) and len(loc) == 2:
        return f"a variable is text, a number or true/false, not {_yaml_type(err['input'])}"
    if kind == "extra_forbidden":
        return _unknown_key(loc, root)
    if kind == "missing":
        return "missing: this key is required"
    if kind == "too_short" and isinstance(err["input"], list) and not err["input"]:
        return "must not be empty" if loc != ("cases",) else "the suite has no cases (a list of at least one)"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        what = "a case is a mapping" if loc[:1] == ("cases",) and len(loc) == 2 else "must be a mapping"
        return f"{what} of keys (`key: value` lines), not {_yaml_type(err['input'])}"
    if kind == "string_type" and isinstance(err["input"], dict) and len(err["input"]) == 1:
        return f"must be text, but the {_colon_hint(err['input'])}"
    if kind == "string_type":
        return f"must be text, not {_yaml_type(err['input'])} (quote it: '{err['input']}')"
    if kind == "expectation" and isinstance(err["input"], dict) and len(err["input"]) == 1:
        return f"{err['msg']}; the {_colon_hint(err['input'])}"
    if kind == "list_type":
        return f"must be a list (`[a, b]`, or one `- item` a line), not {_yaml_type(err['input'])}"
    return err["msg"].removeprefix("Value error, ")


def _unknown_key(loc: tuple[Any, ...], root: type[BaseModel]) -> str:
    """A key that the suite (`root`), a case or `timeouts` does not have: the one it may be, else the keys there."""
    from surfer.agent.config_errors import did_you_mean

    model = root
    if len(loc) > 1 and loc[0] in ("cases", "timeouts"):  # (a case: an item of the `cases` list)
        annotation = root.model_fields[str(loc[0])].annotation
        model = next((t for t in (annotation, *typing.get_args(annotation))
                      if isinstance(t, type) and issubclass(t, BaseModel)), root)
    keys = [name for name, field in model.model_fields.items() if not field.exclude]  # (not the loader's own)
    close = did_you_mean(str(loc[-1]), keys)
    return f"unknown key (did you mean {close!r}?)" if close else f"unknown key; the keys here are: {', '.join(keys)}"


def _colon_hint(value: dict[Any, Any]) -> str:
    """YAML reads `- Sign in: as alice` as a mapping, not as the text a user meant."""
    key, item = next(iter(value.items()))
    return f"line was read as a mapping ({key!r}: {item!r}) because of the ': ' in it: put the whole text in quotes"


def _yaml_type(value: Any) -> str:
    if value is None:
        return "nothing (an empty value)"
    if isinstance(value, str):
        return f"the text {value[:60]!r}" + ("…" if len(value) > 60 else "")
    return {bool: "true/false", int: "a number", float: "a number", list: "a list", dict: "a mapping"}.get(
        type(value), type(value).__name__)


def key_twice(node: Any, loc: tuple[Any, ...], seen_nodes: set[int] | None = None) -> tuple[tuple[Any, ...], int, int] | None:
    """The first key given twice in one mapping (its field, its line, the line of the first): YAML keeps the last
    silently, and a case's second `expect:` dropped its first list of expectations without a word."""
    import yaml

    seen_nodes = set() if seen_nodes is None else seen_nodes
    if id(node) in seen_nodes:  # (an alias: the node its anchor named, already read)
        return None
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key, value in node.value:
            name = getattr(key, "value", None)
            if isinstance(key, yaml.ScalarNode) and name in seen:
                return (*loc, name), key.start_mark.line + 1, seen[name]
            seen[name] = key.start_mark.line + 1
            if found := key_twice(value, (*loc, name), seen_nodes):
                return found
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            if found := key_twice(item, (*loc, i), seen_nodes):
                return found
    return None


_TAGS = frozenset({"sentence", "text", "url", "answer"})


def _without_tags(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop the union tag pydantic puts after an expectation's index."""
    return tuple(p for i, p in enumerate(loc) if not (p in _TAGS and i >= 2 and loc[i - 2] == "expect"))
