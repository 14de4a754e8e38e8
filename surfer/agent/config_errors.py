"""What a configuration's problems are called: pydantic's errors in the words of the file or the flags, a
misspelt key with the key it may be."""

from __future__ import annotations

from typing import Any, Callable

from pydantic import BaseModel, ValidationError


def format_validation_error(
    exc: ValidationError, source: str, origin: Callable[[tuple[Any, ...]], str] | None = None,
    root: type[BaseModel] | None = None,
) -> str:
    """The problems pydantic found, each with its field and where its value came from (`origin` of
    its location, else `source`): one line for one problem; a misspelt key of `root`'s named by its near keys."""
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":  # pydantic's "Extra inputs are not permitted": a misspelt key, mostly
            message = unknown_key(err["loc"], root) if root is not None else "unknown key"
        problems.append((origin(err["loc"]) if origin else source, f"{where}: {message}"))
    if len(problems) == 1:
        return f"invalid configuration ({problems[0][0]}): {problems[0][1]}"
    sources = ", ".join(dict.fromkeys(label for label, _ in problems))
    return "\n".join([f"invalid configuration ({sources}):", *(f"  {text}" for _, text in problems)])


def unknown_key(loc: tuple[Any, ...], root: type[BaseModel]) -> str:
    """What to say of a key at `loc` that no section of the configuration (`root`) has: the keys it may have
    meant."""
    import typing

    model: Any = root
    for part in loc[:-1]:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            continue  # (an index into a list of sections: `servers`)
        model = next((t for t in (field.annotation, *typing.get_args(field.annotation))
                      if isinstance(t, type) and issubclass(t, BaseModel)), None)
        if model is None:
            return "unknown key"
    close = did_you_mean(str(loc[-1]), list(model.model_fields))
    if close:
        return f"unknown key (did you mean {close!r}?)"
    if model is root:
        return "unknown key (every key is in the configuration reference)"
    return f"unknown key; [{'.'.join(str(p) for p in loc[:-1] if isinstance(p, str))}] has: {', '.join(model.model_fields)}"


def did_you_mean(name: str, names: list[str]) -> str | None:
    """The one of `names` that a misspelt `name` most likely meant, if any is close."""
    import difflib

    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return close[0] if close else None
