"""Secrets the model never sees.

The model knows a secret only by its placeholder, `{{NAME}}`: it writes
`type(text="{{PASSWORD}}")`, and the executor types the real value. Every
string that leaves the agent — model requests, completions, the trajectory,
results, reports, the live view — passes through `scrub`, which puts the
placeholder back wherever a value (or its URL-encoded form) shows up: in a
URL a form put it in, a page title, an error message, or a completion that
read it off the screen. Screenshots are pixels and cannot be scrubbed: type
secrets into password fields.

    secrets = Secrets({"PASSWORD": os.environ["SHOP_PASSWORD"]})
    Agent(..., secrets=secrets)         # or secrets={"PASSWORD": "..."}
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

from surfer.core.actions import Goto, TypeText
from surfer.core.errors import ConfigError

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class Secrets:
    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        values = dict(values or {})
        for name, value in values.items():
            if not NAME.match(name):
                raise ConfigError(f"secret name {name!r} must be letters, digits and underscores (e.g. PASSWORD)")
            if not isinstance(value, str) or not value:
                raise ConfigError(f"secret {name} has no value")
        self._values = values
        self._index()

    def _index(self) -> None:
        forms: dict[str, str] = {}
        for name, value in self._values.items():
            for form in (value, quote(value, safe=""), quote_plus(value)):
                forms.setdefault(form, name)
        # Longest first, so a value that contains another is replaced whole.
        self._forms = sorted(forms.items(), key=lambda item: -len(item[0]))

    def add_reply(self, value: str) -> str:
        """Keep a secret reply of the user's (agent/questions.py) like a `--secret`: its placeholder name
        (`REPLY_1`, `REPLY_2`, ...), the same for the same value."""
        for name, known in self._values.items():
            if known == value:
                return name
        number = 1 + sum(name.startswith("REPLY_") for name in self._values)
        name = f"REPLY_{number}"
        self._values[name] = value
        self._index()
        return name

    @classmethod
    def from_env_specs(cls, specs: Iterable[str], environ: Mapping[str, str]) -> "Secrets":
        """`NAME=ENV_VAR` specs (the CLI's `--secret`): each value read from the environment."""
        values: dict[str, str] = {}
        for spec in specs:
            name, sep, variable = spec.partition("=")
            if not sep or not name.strip() or not variable.strip():
                raise ConfigError(f"--secret takes NAME=ENV_VAR (the value is read from that variable), got {spec!r}")
            if variable.strip() not in environ:
                raise ConfigError(f"--secret {name.strip()}: the environment variable {variable.strip()} is not set")
            values[name.strip()] = environ[variable.strip()]
        return cls(values)

    def __bool__(self) -> bool:
        return bool(self._values)

    @property
    def names(self) -> list[str]:
        return list(self._values)

    def reveal(self, text: str) -> str:
        """Placeholders of known secrets replaced by their values (for the executor only)."""
        return PLACEHOLDER.sub(lambda m: self._values.get(m.group(1), m.group(0)), text)

    def scrub(self, text: str) -> str:
        """Every value (and its URL-encoded forms) replaced by its placeholder."""
        for form, name in self._forms:
            if form in text:
                text = text.replace(form, "{{" + name + "}}")
        return text

    def scrub_obj(self, value: Any) -> Any:
        """`scrub` through dicts, lists and tuples of strings (JSON-like records)."""
        if not self._forms:
            return value
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {self.scrub_obj(k): self.scrub_obj(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.scrub_obj(v) for v in value)
        return value

    def reveal_action(self, action: Any) -> Any:
        """The action the executor performs: typed text and URLs with real values."""
        if isinstance(action, TypeText) and PLACEHOLDER.search(action.text):
            return action.model_copy(update={"text": self.reveal(action.text)})
        if isinstance(action, Goto) and PLACEHOLDER.search(action.url):
            return action.model_copy(update={"url": self.reveal(action.url)})
        return action

    def prompt_note(self) -> str:
        names = ", ".join("{{" + n + "}}" for n in self._values)
        return (
            f"Secrets you can type by writing their placeholder exactly: {names}. "
            "Their values are hidden from you; never try to read or repeat them."
        )
