"""The command group every `surfer` command runs in (`surfer`, and `python -m
surfer.bench` on its own): what all commands share on their way to the user.

- Misuse reaches the user as one line, wherever in a command it was raised
  (a profile name read late, Chromium not found while a demo measures its
  page, a window without a display): `error: ...` and exit 2; a model server
  that cannot be reached, exit 3 (surfer/apps/exit_codes.py); files that
  cannot be written (a full disk, a quota, a read-only file system), exit 1.
- A reader of its output that went away (`surfer ... | head -1`) stops it
  quietly, exit 141 (surfer/apps/signals.py), where click would exit 1 and a
  traceback could follow.
- The help shows no value label on a flag: Typer labels every option with its
  type, flags too, and `-V, --version <bool>` reads as if it took a value.
- A command's line in its group's help is its docstring's first paragraph as
  one text (Typer kept the docstring's line breaks there: `surfer --help` broke
  `run`'s line after "at an interactive" at any width)."""

from __future__ import annotations

from typing import Any

import typer
import typer.core

from surfer.apps.exit_codes import EXIT_FAILED, EXIT_OUTPUT_CLOSED, EXIT_UNREACHABLE, EXIT_USAGE
from surfer.apps.signals import OutputClosed


class CommandGroup(typer.core.TyperGroup):
    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            unlabel_flags_below(command, ctx)
        return command

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        unlabel_flags(params)
        return params

    def invoke(self, ctx: Any) -> Any:
        from surfer.core.errors import ConfigError, ModelServerUnreachable

        try:
            return super().invoke(ctx)
        except (ConfigError, ModelServerUnreachable) as exc:
            from surfer.apps.options import console, say

            say(console(stderr=True), "error:", "red", exc)
            raise typer.Exit(EXIT_USAGE if isinstance(exc, ConfigError) else EXIT_UNREACHABLE) from None
        except OutputClosed:  # (its stream already silenced)
            raise typer.Exit(EXIT_OUTPUT_CLOSED) from None
        except BrokenPipeError:  # a plain print's
            from surfer.apps.output import silence_closed

            if not silence_closed():
                raise
            raise typer.Exit(EXIT_OUTPUT_CLOSED) from None
        except OSError as exc:
            from surfer.core.errors import STORAGE_FULL

            if exc.errno not in STORAGE_FULL:
                raise
            from surfer.apps.options import console, say

            say(console(stderr=True), "error:", "red", f"cannot write {exc.filename or 'the output'}: {exc.strerror}; "
                "what was written before is kept: make room (or give another --out) and run it again")
            raise typer.Exit(EXIT_FAILED) from None


def unlabel_flags(params: list[Any]) -> None:
    """An empty value label for each flag (`--headful`, `--help`) of `params`."""
    for param in params:
        if getattr(param, "is_flag", False) and not getattr(param, "count", False) and param.metavar is None:
            param.metavar = ""


def unlabel_flags_below(command: Any, ctx: Any) -> None:
    """`unlabel_flags` for `command` and every command below it (`surfer auth save`, `surfer bench ...`),
    each with its one-paragraph `short_help`."""
    unlabel_flags(command.get_params(ctx))
    if command.short_help is None and command.help:
        import inspect

        command.short_help = " ".join(inspect.cleandoc(command.help).partition("\n\n")[0].split())
    for sub in getattr(command, "commands", {}).values():
        unlabel_flags_below(sub, ctx)
