"""Suite files: YAML validated by pydantic, with `{{name}}` variables and
`{{secret:ENV}}` placeholders. Every problem is a `SuiteError` naming the
file, the line and the field (exit 2).

    name: shop smoke
    base_url: http://127.0.0.1:8080
    cases:
      - name: sign in
        url: /login.html
        steps: [Sign in as {{user}} with the password {{secret:SHOP_PASSWORD}}]
        expect: [The orders page greets alice, {text: "794.36"}, {url: "/orders"}]
    vars: {user: alice}
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping, Optional, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator, model_validator

from surfer.agent.config import AgentConfig, parse_viewport
from surfer.agent.loop import slugify
from surfer.core.errors import ConfigError
from .suite_problems import SettingError, key_twice, problem, where

VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")
SECRET = re.compile(r"\{\{\s*secret:([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
# fields of a case where a secret may appear: only text the executor types
SECRET_FIELDS = frozenset({"steps", "task"})


class SuiteError(ConfigError):
    """A suite file that cannot be used; the message names file, line and field."""


Confirm = Literal["ask", "deny", "approve"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return value


class TextExpectation(_Strict):
    """Text a user can see on the page (the rendered innerText, frames and web components included)."""

    text: str = Field(min_length=1)


class UrlExpectation(_Strict):
    """A regular expression searched in the final URL."""

    url: str = Field(min_length=1)
    _check = field_validator("url")(_regex)


class AnswerExpectation(_Strict):
    """A regular expression searched in the agent's final answer."""

    answer: str = Field(min_length=1)
    _check = field_validator("answer")(_regex)


def _expectation_kind(value: Any) -> str | None:
    if isinstance(value, (str, BaseModel)):
        return "sentence" if isinstance(value, str) else next(iter(type(value).model_fields))
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("text", "url", "answer"):
        return next(iter(value))
    return None


Expectation = Annotated[
    Union[
        Annotated[str, Tag("sentence")], Annotated[TextExpectation, Tag("text")],
        Annotated[UrlExpectation, Tag("url")], Annotated[AnswerExpectation, Tag("answer")],
    ],
    Discriminator(
        _expectation_kind, custom_error_type="expectation",
        custom_error_message="an expectation is a sentence for the validator, or one of {text: ...}, {url: ...}, {answer: ...}",
    ),
]


SHOWN_CHARS = 200  # how much of an expectation a report or a failure message quotes


def describe_expectation(expectation: Expectation) -> str:
    """The expectation as reports and failure messages say it; a long one quoted in part with its length (a 200 KB
    `text` was written whole into each message: the console line, JUnit thrice, the Markdown summary)."""
    if isinstance(expectation, str):
        return _shown(expectation)
    if isinstance(expectation, TextExpectation):
        return f"text {_quoted(expectation.text)} is visible"
    if isinstance(expectation, UrlExpectation):
        return f"URL matches {_quoted(expectation.url)}"
    return f"answer matches {_quoted(expectation.answer)}"


def _shown(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}… ({len(text)} characters)"


def _quoted(text: str) -> str:
    return repr(text) if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]!r}… ({len(text)} characters)"


class Timeouts(_Strict):
    step: float = Field(default=300.0, gt=0, description="Wall-time limit of one step (or task), in seconds.")
    expect: float = Field(default=3.0, ge=0, description="How long deterministic expectations wait to come true.")


class Case(_Strict):
    name: str = Field(min_length=1)
    url: Optional[str] = None
    steps: Optional[list[str]] = Field(default=None, min_length=1)
    task: Optional[str] = Field(default=None, min_length=1)
    expect: list[Expectation] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    retries: Optional[int] = Field(default=None, ge=0, le=10)
    confirm: Optional[Confirm] = Field(default=None, description="Sensitive actions in this case (unset: the suite's).")
    setup: bool = Field(
        default=False, description="A setup case (Playwright's setup project): it runs before the others, starts "
        "signed out, and when it passes its browser's storage state is written to its storage_state file (else the "
        "suite's), which the other cases start with. If it does not pass, they do not run.",
    )
    storage_state: Optional[str] = Field(
        default=None, min_length=1, description="The Playwright storage-state file this case starts with (a setup "
        "case: writes); relative to the suite file; unset: the suite's.",
    )

    @field_validator("steps")
    @classmethod
    def _steps_not_blank(cls, steps: Optional[list[str]]) -> Optional[list[str]]:
        if steps is not None and any(not s.strip() for s in steps):
            raise ValueError("a step must not be empty")
        return steps

    @field_validator("task")
    @classmethod
    def _task_not_blank(cls, task: Optional[str]) -> Optional[str]:
        if task is not None and not task.strip():
            raise ValueError("the task must not be blank")
        return task

    @model_validator(mode="after")
    def _steps_or_task(self) -> "Case":
        if (self.steps is None) == (self.task is None):
            raise ValueError("a case needs exactly one of 'steps' (sub-goals in order) or 'task'")
        return self

    @property
    def goals(self) -> list[str]:
        """What the agent does, in order: the steps, or the task as one step."""
        return list(self.steps) if self.steps is not None else [self.task or ""]

    @property
    def deterministic(self) -> bool:
        return not any(isinstance(e, str) for e in self.expect)


class Suite(_Strict):
    name: str = Field(min_length=1)
    base_url: Optional[str] = None
    viewport: Optional[tuple[int, int]] = None
    environment: Literal["browser", "desktop"] = "browser"
    model: dict[str, Any] = Field(default_factory=dict, description="Same keys as the config file.")
    timeouts: Timeouts = Timeouts()
    retries: int = Field(default=0, ge=0, le=10)
    concurrency: int = Field(default=4, ge=1, le=256)
    confirm: Optional[Confirm] = Field(
        default=None, description="Sensitive actions (buy, delete, send ...): unset approves them on base_url's host "
        "and keeps the default rules elsewhere; 'approve' performs them all; 'ask' applies the rules on base_url too "
        "(decided by --approve-all, else refused); 'deny' refuses them all.",
    )
    storage_state: Optional[str] = Field(
        default=None, min_length=1, description="The Playwright storage-state file every case starts with (signed "
        "in), relative to the suite file: written by the suite's setup case, or made beforehand (`surfer auth save`).",
    )
    vars: dict[str, Union[str, int, float, bool]] = Field(default_factory=dict)
    cases: list[Case] = Field(min_length=1)

    # set by the loader
    path: Optional[Path] = Field(default=None, exclude=True)
    lines: dict[str, int] = Field(default_factory=dict, exclude=True)  # case name -> line of its entry
    # case name -> "file:line: field: secret NAME is not set in the environment": refused only when the case runs
    # (a CI job running the cases of one tag need not hold the secrets of the others)
    unset_secrets: dict[str, str] = Field(default_factory=dict, exclude=True)

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: Optional[str]) -> Optional[str]:
        """A bare host is read as an address bar reads it (`localhost:3000` is http://localhost:3000, a bare
        host https://): it was joined with the case paths as a scheme of its own ('localhost:3000/login.html'
        became 'login.html'), and its host's sensitive actions were not approved."""
        from surfer.tools.url_policy import normalize_url

        if value is None or "://" in value or value.strip().startswith(("/", "./", "../", "~/", "file:", "about:", "data:")):
            return value
        return normalize_url(value)

    @field_validator("viewport", mode="before")
    @classmethod
    def _viewport(cls, value: Any) -> Any:
        return None if value is None else parse_viewport(value)

    @field_validator("model")
    @classmethod
    def _model_settings(cls, value: dict[str, Any]) -> dict[str, Any]:
        from surfer.agent.config_errors import unknown_key

        try:
            AgentConfig.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            message = unknown_key(first["loc"], AgentConfig) if first["type"] == "extra_forbidden" else first["msg"]
            raise SettingError(first["loc"], message.removeprefix("Value error, ")) from None
        return value

    @model_validator(mode="after")
    def _unique_names(self) -> "Suite":
        seen: dict[str, str] = {}
        for case in self.cases:
            key = slugify(case.name, 80, distinct=True)
            if key in seen:
                if seen[key] == case.name:
                    raise ValueError(f"two cases are named {case.name!r} (case names must be unique)")
                raise ValueError(
                    f"cases {seen[key]!r} and {case.name!r} differ only in punctuation or symbols, and would share the "
                    f"directory {key!r} (case names must differ in their letters or digits)"
                )
            seen[key] = case.name
        return self

    @model_validator(mode="after")
    def _setup_saves_somewhere(self) -> "Suite":
        for case in self.cases:
            if case.setup and not (case.storage_state or self.storage_state):
                raise ValueError(f"setup case {case.name!r} has nowhere to save its sign-in: give it (or the suite) a storage_state file")
        return self

    def state_file(self, case: Case) -> Optional[Path]:
        """The storage-state file `case` starts with (None: signed out; a setup case always is); relative
        paths against the suite file's folder."""
        return None if case.setup else self._state_path(case)

    def _state_path(self, case: Case) -> Optional[Path]:
        chosen = case.storage_state or self.storage_state
        if chosen is None:
            return None
        path = Path(chosen).expanduser()
        return path if path.is_absolute() or self.path is None else self.path.parent / path

    def setup_output(self, case: Case) -> Optional[Path]:
        """Where a setup case writes its storage state when it passes (None for other cases)."""
        return self._state_path(case) if case.setup else None

    @property
    def slug(self) -> str:
        return slugify(self.name, 60, distinct=True)

    def case_id(self, case: Case) -> str:
        return f"{self.slug}/{slugify(case.name, 80, distinct=True)}"

    def confirm_settings(self, case: Case) -> dict[str, Any]:
        """Config overrides for the sensitive actions of `case`: the suite tests the user's own app,
        so by default what the rules would ask on base_url's host is approved."""
        mode = case.confirm or self.confirm
        if mode == "approve":
            return {"sensitive_actions": "approve"}
        if mode == "deny":
            return {"sensitive_actions": "deny"}
        if mode == "ask" or not self.base_url:
            return {}
        from urllib.parse import urlsplit

        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        if not host:
            return {}
        own = f"{host}:{parts.port}" if parts.port else host
        return {"approve_domains": [own]}

    def resolve_url(self, url: Optional[str]) -> Optional[str]:
        """A case URL, relative ones against `base_url`; without one, a `./` or `../` path is a file beside
        the suite file, as a storage state's path is (its `file:` URL, opened where file URLs are allowed)."""
        from urllib.parse import urljoin

        if url is None:
            return self.base_url
        if not self.base_url and self.path is not None and url.startswith(("./", "../")):
            return (self.path.parent / url).resolve().as_uri()
        if "://" in url or not self.base_url:
            return url
        return urljoin(self.base_url if self.base_url.endswith("/") else self.base_url + "/", url)


# -- loading -------------------------------------------------------------------------


@dataclass
class _Located:
    """The YAML node tree, for turning a field path into a line number."""

    node: Any

    def line(self, path: tuple[Any, ...]) -> int:
        import yaml

        node = self.node
        line = node.start_mark.line + 1 if node is not None else 1
        for part in path:
            if isinstance(node, yaml.MappingNode):
                match = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
                key = next((k for k, v in node.value if getattr(k, "value", None) == part), None)
                if match is None:
                    break
                line = key.start_mark.line + 1 if key is not None else line
                node = match
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                break
        return line


def field_name(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _fail(path: Path, located: _Located, loc: tuple[Any, ...], message: str) -> SuiteError:
    return SuiteError(f"{path}:{located.line(loc)}: {field_name(loc)}: {message}")


def _substitute(
    value: Any, loc: tuple[Any, ...], variables: Mapping[str, str], environ: Mapping[str, str],
    path: Path, located: _Located, unset: dict[int, str],
) -> Any:
    """`value` with its variables replaced; a secret not set in the environment is noted in `unset` (case index ->
    the located message), for the runner to refuse if that case runs."""
    if isinstance(value, dict):
        return {k: _substitute(v, (*loc, k), variables, environ, path, located, unset) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, (*loc, i), variables, environ, path, located, unset) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in variables:
            return str(variables[name])
        if name in environ:
            return environ[name]
        raise _fail(path, located, loc, f"variable {{{{{name}}}}} is not defined (suite vars, --var {name}=... or the environment)")

    value = VARIABLE.sub(replace, value)
    for match in SECRET.finditer(value):  # (after the variables: a secret may come through one, `vars: {pw: ...}`)
        field = next((p for p in reversed(loc) if isinstance(p, str)), "")
        if field not in SECRET_FIELDS:
            raise _fail(path, located, loc, f"secrets may appear only in steps and task, not in {field!r}")
        if not environ.get(match.group(1)):
            problem = _fail(path, located, loc, f"secret {match.group(1)} is not set in the environment")
            if len(loc) < 2 or loc[0] != "cases" or not isinstance(loc[1], int):
                raise problem
            unset.setdefault(loc[1], str(problem))
    return value


def load_suite(
    path: str | Path, variables: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None,
) -> Suite:
    """Read, substitute and validate one suite file. `variables` (--var)
    override the suite's `vars`, which override the environment."""
    import yaml

    path = Path(path)
    environ = os.environ if environ is None else environ
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SuiteError(f"suite file {path} does not exist") from None
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise SuiteError(f"{path}:{line}: not UTF-8 text (byte {exc.object[exc.start]:#04x}): save the suite file as "
                         "UTF-8") from None
    except OSError as exc:
        raise SuiteError(f"cannot read suite file {path}: {exc}") from None
    try:
        located = _Located(yaml.compose(text, Loader=yaml.SafeLoader))
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise SuiteError(f"{path}:{line}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise SuiteError(f"{path}:1: (top level): a suite is a mapping with 'name' and 'cases'")
    if twice := key_twice(located.node, ()):
        loc, line, first = twice
        raise SuiteError(f"{path}:{line}: {field_name(loc)}: given twice in one mapping (first at line {first}); "
                         "YAML keeps only the last, so the first would be ignored")
    raw_vars = data.get("vars") or {}
    if not isinstance(raw_vars, dict):
        raise _fail(path, located, ("vars",), "must be a mapping of names to values")
    merged = {**{str(k): str(v) for k, v in raw_vars.items()}, **dict(variables or {})}
    body = {k: v for k, v in data.items() if k != "vars"}
    unset: dict[int, str] = {}
    body = _substitute(body, (), merged, environ, path, located, unset)
    body["vars"] = raw_vars
    try:
        suite = Suite.model_validate(body)
    except ValidationError as exc:
        first: dict[tuple[Any, ...], Any] = {}
        for err in exc.errors():  # one a field (each member of a union fails on its own)
            first.setdefault(where(err), err)
        errors = list(first.values())
        problems = [str(_fail(path, located, where(err), problem(err, Suite))) for err in errors[:5]]
        if len(errors) > 5:
            problems.append(f"(and {len(errors) - 5} more problem(s) in {path})")
        raise SuiteError("\n".join(problems)) from None
    suite.path = path
    suite.lines = {case.name: located.line(("cases", i)) for i, case in enumerate(suite.cases)}
    suite.unset_secrets = {suite.cases[i].name: message for i, message in unset.items()}
    if suite.environment == "desktop":
        for i, case in enumerate(suite.cases):
            for j, expectation in enumerate(case.expect):
                if isinstance(expectation, (TextExpectation, UrlExpectation)):
                    raise _fail(path, located, ("cases", i, "expect", j), "text and url expectations need the browser environment")
            if case.url:
                raise _fail(path, located, ("cases", i, "url"), "the desktop environment has no URL; describe the start in the steps")
    return suite


def parse_vars(pairs: list[str]) -> dict[str, str]:
    """--var k=v pairs."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--var takes NAME=VALUE, got {pair!r}")
        out[name.strip()] = value
    return out


def secret_names(text: str) -> list[str]:
    return [m.group(1) for m in SECRET.finditer(text)]


def agent_goal(goal: str) -> str:
    """A goal as the agent gets it: `{{secret:NAME}}` becomes the agent's placeholder `{{NAME}}`."""
    return SECRET.sub(lambda m: "{{" + m.group(1) + "}}", goal)


def secrets_for(goals: list[str], environ: Mapping[str, str]) -> Any:
    """The `Secrets` the goals type, read from the environment."""
    from surfer.agent.secrets import Secrets

    values = {}
    for goal in goals:
        for name in secret_names(goal):
            if not environ.get(name):
                raise ConfigError(f"secret {name} is not set in the environment")
            values[name] = environ[name]
    return Secrets(values)
