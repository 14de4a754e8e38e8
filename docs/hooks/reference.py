"""The reference pages' generated parts, made from the code at `mkdocs build`:

- every `surfer` command, argument and option, from the CLI's own definitions
  (Typer's click commands; `surfer bench` from its `surfer.commands` entry point);
- every configuration key, from the pydantic models of surfer/agent/config.py;
- the SDK's public names (`surfer.__all__`) as mkdocstrings directives;
- file formats as JSON Schema, from the models that describe them.

Pages ask for a part with a comment on a line of its own, e.g.
`<!-- generate: cli -->` or `<!-- generate: schema surfer.agent.result:RunResult -->`
(surfer_docs.py expands them). tests/test_docs.py reads the same functions."""

from __future__ import annotations

import functools
import html
import importlib
import json
import re
import types
import typing
from typing import Any, Iterator

SKIP_API = {"__version__"}
MARKUP = re.compile(r"\\?\[/?(?:bold|italic|dim|red|green|yellow|blue|cyan|magenta|underline|b|i)\]")


# ---------------------------------------------------------------- the CLI

@functools.lru_cache(maxsize=1)
def root_command() -> Any:
    """The click command behind `surfer`, with the entry-point commands (`bench`) loaded."""
    from importlib.metadata import entry_points

    import typer.main

    from surfer.apps.cli import OWN_PLUGINS, PLUGIN_GROUP, app, load_plugin

    for name in {*OWN_PLUGINS, *(point.name for point in entry_points(group=PLUGIN_GROUP))}:
        load_plugin(name)
    return typer.main.get_command(app)


def _context(command: Any, parent: Any, name: str) -> Any:
    import typer._click as click  # typer ships its own click

    return click.Context(command, parent=parent, info_name=name)


def walk_commands(command: Any | None = None, path: tuple[str, ...] = ("surfer",), parent: Any = None,
                  ) -> Iterator[tuple[tuple[str, ...], Any, Any]]:
    """(path, command, context) for `surfer` and every command below it, depth first."""
    command = command or root_command()
    ctx = _context(command, parent, path[-1])
    yield path, command, ctx
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                yield from walk_commands(sub, (*path, name), ctx)


def find_command(words: list[str]) -> tuple[tuple[str, ...], Any, Any, list[str]]:
    """The deepest command that `surfer WORDS...` names, and the words left after it."""
    path: tuple[str, ...] = ("surfer",)
    command = root_command()
    ctx = _context(command, None, "surfer")
    rest = list(words)
    while rest and hasattr(command, "list_commands"):
        sub = command.get_command(ctx, rest[0])
        if sub is None:
            break
        path, command = (*path, rest[0]), sub
        ctx = _context(command, ctx, rest.pop(0))
    return path, command, ctx, rest


def option_names(command: Any, ctx: Any) -> set[str]:
    names: set[str] = set()
    for param in command.get_params(ctx):
        if getattr(param, "param_type_name", "") == "option":
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def plain(text: str | None) -> str:
    """Help text without Rich markup (`[bold]`, escaped `\\[`)."""
    text = MARKUP.sub("", text or "")
    return text.replace("\\[", "[")


def _md(text: str) -> str:
    """Help text as Markdown: `<` and `*` escaped outside code spans."""
    parts = re.split(r"(`[^`]*`)", plain(text))
    return "".join(p if p.startswith("`") else html.escape(p, quote=False).replace("*", "\\*") for p in parts)


def _summary(text: str | None) -> str:
    """The first paragraph of a help text, on one line."""
    return " ".join(plain(text).strip().split("\n\n")[0].split())


def anchor(path: tuple[str, ...]) -> str:
    return "-".join(path).replace(".", "")


def usage_piece(piece: str) -> str:
    """An argument of a usage line as --help conventions write it: Typer's `{name}` (required) is `NAME`, `[name]`
    (optional) `[NAME]`, a trailing `...` kept; a metavar keeps its spelling (`{NAME@VERSION}`: `NAME@VERSION`), and
    `[OPTIONS]`, `COMMAND [ARGS]...` stay as they are."""
    match = re.fullmatch(r"([{\[])(.+?)([}\]])(\.\.\.)?", piece)
    if match is None or piece in ("[OPTIONS]", "[ARGS]..."):
        return piece
    name = match.group(2).upper() if re.fullmatch(r"[a-z_][a-z0-9_]*", match.group(2)) else match.group(2)
    return (name if match.group(1) == "{" else f"[{name}]") + (match.group(4) or "")


def cli_markdown() -> str:
    out: list[str] = []
    for path, command, ctx in walk_commands():
        level = "#" * min(len(path) + 1, 6)
        out.append(f"{level} `{' '.join(path)}` {{ #{anchor(path)} }}\n")
        if command.help:
            out.append(_md(command.help.strip()) + "\n")
        pieces = [usage_piece(p) for p in command.collect_usage_pieces(ctx)]
        out.append("```text\n" + " ".join([*path, *pieces]) + "\n```\n")
        subs = [(p, c) for p, c, _ in walk_commands(command, path, ctx.parent) if len(p) == len(path) + 1]
        if subs:
            out.append("Commands:\n")
            out.extend(f"- [`{' '.join(p)}`](#{anchor(p)}) — {_md(_summary(c.help))}" for p, c in subs)
            out.append("")
        params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
        arguments = [p for p in params if p.param_type_name == "argument"]
        options = [p for p in params if p.param_type_name == "option"]
        for title, group in (("Arguments", arguments), ("Options", options)):
            if not group:
                continue
            out.append(f"{title}:\n")
            for param in group:
                record = param.get_help_record(ctx)
                if record is None:
                    continue
                names, help_text = record
                if param.param_type_name == "argument":
                    names = param.name.upper() + (" ..." if param.nargs == -1 else "")
                out.append(f"- `{plain(names)}` — {_md(help_text)}" if help_text else f"- `{plain(names)}`")
            out.append("")
        if getattr(command, "epilog", None):
            out.append(_md(command.epilog) + "\n")
    return "\n".join(out)


# ---------------------------------------------------------------- configuration

def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (list, tuple, dict):
        inner = ", ".join(_type_name(a) for a in args if a is not Ellipsis)
        return f"{origin.__name__}[{inner}]"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: Any) -> str:
    if field.is_required():
        return "none (required)"
    if field.default_factory is not None:
        value = field.default_factory()
    else:
        value = field.default
    if value is None:
        return "unset"
    if hasattr(value, "model_dump"):
        return "section"
    return "`" + json.dumps(value) + "`"


def _bounds(field: Any) -> str:
    words = []
    for item in field.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if getattr(item, attr, None) is not None:
                words.append(f"{sign} {getattr(item, attr)}")
    return f" ({', '.join(words)})" if words else ""


def config_table(model: Any, prefix: str = "", environment: bool = True) -> tuple[list[str], list[tuple[str, Any]]]:
    """List items for the plain keys of `model`, and its nested sections (`environment`: say the
    SURFER_* variable of a top-level key)."""
    from surfer.agent.config import ENV_VARS

    env = {field: var for var, field in ENV_VARS.items()}
    rows, sections = [], []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
            sections.append((name, annotation))
            continue
        if not field.description:
            raise ValueError(f"{model.__name__}.{name} has no description: add Field(description=...)")
        items = typing.get_args(annotation) if typing.get_origin(annotation) is list else ()
        if items and hasattr(items[0], "model_fields"):  # a list of tables (servers = [...]): its keys listed too
            sections.append((name, items[0]))
        facts = [f"{_type_name(annotation)}{_bounds(field)}", f"default {_default(field)}"]
        if environment and not prefix and name in env:
            facts.append(f"environment `{env[name]}`")
        rows.append(f"- **`{prefix}{name}`** · {' · '.join(facts)}  \n  {_md(field.description)}")
    return rows, sections


def config_markdown() -> str:
    from surfer.agent.config import AgentConfig

    header: list[str] = []
    rows, sections = config_table(AgentConfig)
    out = ["## Top level\n", *header, *rows, ""]
    roles: list[str] = []
    for name, model in sections:
        if name in ("policy", "localizer", "validator"):
            roles.append(name)
            continue
        if typing.get_origin(AgentConfig.model_fields[name].annotation) is list:  # the keys of each entry
            sub_rows, _ = config_table(model, environment=False)
            out += [f"## `{name} = [...]` entries {{ #{name} }}\n", _md(model.__doc__ or "") + "\n", *header, *sub_rows, ""]
            continue
        sub_rows, _ = config_table(model)
        out += [f"## `[{name}]` {{ #{name} }}\n", _md(AgentConfig.model_fields[name].description or "") + "\n",
                *header, *sub_rows, ""]
    if roles:
        model = AgentConfig.model_fields[roles[0]].annotation
        sub_rows, _ = config_table(model)
        out += ["## `[policy]`, `[localizer]`, `[validator]` { #roles }\n",
                _md(model.__doc__ or "") + "\n", *header, *sub_rows, ""]
    return "\n".join(out)


# ---------------------------------------------------------------- the SDK

def api_markdown() -> str:
    import surfer

    out = []
    for name in sorted(n for n in surfer.__all__ if n not in SKIP_API):
        target = {"actions": "surfer.core.actions", "policy": "surfer.fleet.policy"}.get(name, f"surfer.{name}")
        out.append(f"## `surfer.{name}` {{ #{name} }}\n\n::: {target}\n    options:\n      show_root_heading: false\n"
                   "      show_root_toc_entry: false\n")
    return "\n".join(out)


# ---------------------------------------------------------------- file formats

def load_object(spec: str) -> Any:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _schema_type(prop: dict[str, Any], page: str) -> str:
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{page}-{name.lower()})"
    if "anyOf" in prop:
        return " or ".join(_schema_type(p, page) for p in prop["anyOf"])
    if "enum" in prop:
        return " \\| ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"])
    kind = prop.get("type", "any")
    if kind == "array" and "items" in prop:
        return f"array of {_schema_type(prop['items'], page)}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"object of {_schema_type(prop['additionalProperties'], page)}"
    return str(kind)


def _properties_table(schema: dict[str, Any], page: str) -> list[str]:
    required = set(schema.get("required", []))
    rows = ["| field | type | description |", "|---|---|---|"]
    for name, prop in schema.get("properties", {}).items():
        mark = "" if name in required else " (optional)"
        rows.append(f"| `{name}`{mark} | {_schema_type(prop, page)} | {_md(prop.get('description', ''))} |")
    return rows


def schema_markdown(spec: str) -> str:
    model = load_object(spec)
    schema = model.model_json_schema(by_alias=True)
    page = model.__name__.lower()  # anchors of nested models: unique on a page of several schemas
    out = [_md(model.__doc__ or "").strip() + "\n", *_properties_table(schema, page), ""]
    for name, sub in schema.get("$defs", {}).items():
        if sub.get("properties"):
            out += [f"#### {name} {{ #{page}-{name.lower()} }}\n", *_properties_table(sub, page), ""]
    body = json.dumps(schema, indent=2)
    out += ['??? abstract "JSON Schema"\n', "    ```json", *("    " + line for line in body.splitlines()), "    ```", ""]
    return "\n".join(out)


DIRECTIVE = re.compile(r"^<!-- generate: (\w[\w-]*)(?: (\S+))? -->$", re.M)


def expand(markdown: str) -> str:
    """The page with each `<!-- generate: ... -->` line replaced by what it asks for."""

    def one(match: re.Match[str]) -> str:
        kind, arg = match.group(1), match.group(2)
        if kind == "cli":
            return cli_markdown()
        if kind == "config":
            return config_markdown()
        if kind == "api":
            return api_markdown()
        if kind == "schema" and arg:
            return schema_markdown(arg)
        raise ValueError(f"unknown generate directive: {match.group(0)}")

    return DIRECTIVE.sub(one, markdown)
