"""The agent asks: who answers the policy's `ask_user` question.

    def on_question(question: Question) -> str | Reply | None: ...   # or async
    Agent(..., on_question=on_question)

A reply comes, in order, from the answers given beforehand (`PresetAnswers`:
a question pattern, a regular expression, mapped to the reply; `--answers
answers.json`, a batch task's `answers`), then from the person (`on_question`:
the terminal at `surfer run`, a callback in the SDK). Where nobody replies (no
callback, stdin not a terminal, a batch, a QA suite) the run ends with status
`needs_input` and the question in its result. A reply marked secret (the
question's own `secret`, a `Reply(secret=True)`, an answers entry's `secret`)
is handed to the policy as a placeholder, like `--secret`, and its value is
kept out of every record.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Mapping, Union

from surfer.core.errors import ConfigError


@dataclass(frozen=True)
class Question:
    """What the policy asked, where, and on which screen."""

    step: int
    text: str
    secret: bool = False
    url: str | None = None
    screenshot: bytes | None = None
    screenshot_ext: str = "jpg"
    take_over: bool = False  # the agent asks a person to use the screen (a CAPTCHA, a sign-in): returning hands back


@dataclass(frozen=True)
class Reply:
    """A reply; `secret`: keep its value out of every record (the policy types it by placeholder)."""

    text: str
    secret: bool = False


QuestionHandler = Callable[[Question], Union[str, Reply, None, Awaitable[Union[str, Reply, None]]]]


@dataclass(frozen=True)
class PresetAnswer:
    pattern: re.Pattern[str]
    reply: Reply


class PresetAnswers:
    """Replies given beforehand, by question pattern (a regular expression, searched case-insensitively).

    Accepted shapes: a mapping `{"pattern": "reply", ...}`, or a list of
    `{"pattern": ..., "answer": ..., "secret": false}` objects. The first
    pattern that matches the question gives the reply."""

    def __init__(self, entries: Iterable[PresetAnswer] = ()) -> None:
        self.entries = list(entries)

    def __bool__(self) -> bool:
        return bool(self.entries)

    @classmethod
    def of(cls, value: Any, source: str = "answers") -> "PresetAnswers":
        if value is None:
            return cls()
        if isinstance(value, PresetAnswers):
            return value
        if isinstance(value, Mapping):
            items = [{"pattern": k, "answer": v} for k, v in value.items()]
        elif isinstance(value, list):
            items = value
        else:
            raise ConfigError(f"{source}: give a mapping of question pattern to reply, or a list of "
                              f"{{\"pattern\", \"answer\", \"secret\"}} objects")
        entries = []
        for item in items:
            if not isinstance(item, Mapping) or not isinstance(item.get("pattern"), str) or not isinstance(item.get("answer"), str):
                raise ConfigError(f"{source}: each answer needs a string pattern and a string answer, got {item!r}")
            unknown = set(item) - {"pattern", "answer", "secret"}
            if unknown:
                raise ConfigError(f"{source}: unknown key(s) {', '.join(sorted(unknown))} in {item!r}")
            if not item["answer"].strip():  # (a person's empty reply leaves a question unanswered: no reply to give)
                raise ConfigError(f"{source}: the answer to {item['pattern']!r} is empty")
            if not isinstance(item.get("secret", False), bool):  # ("false" would be taken for true)
                raise ConfigError(f"{source}: secret must be true or false, got {item['secret']!r} in {item!r}")
            try:
                pattern = re.compile(item["pattern"], re.IGNORECASE)
            except re.error as exc:
                raise ConfigError(f"{source}: the pattern {item['pattern']!r} is not a regular expression ({exc})") from None
            entries.append(PresetAnswer(pattern, Reply(item["answer"].strip(), item.get("secret", False))))
        return cls(entries)

    @classmethod
    def load(cls, path: str | Path) -> "PresetAnswers":
        """An answers file (JSON): `{"pattern": "reply"}` or a list of entries."""
        path = Path(path)
        try:
            value = json.loads(path.read_text(encoding="utf-8-sig"))  # (a byte order mark, as Windows editors write it)
        except FileNotFoundError:
            raise ConfigError(f"answers file {path} does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read answers file {path}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"answers file {path} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
        return cls.of(value, f"answers file {path}")

    def reply_to(self, question: str) -> Reply | None:
        for entry in self.entries:
            if entry.pattern.search(question):
                return entry.reply
        return None


async def call_person(handler: Callable[[Any], Any], value: Any) -> Any:
    """`handler(value)` (an `on_question`, a confirmer), awaited if it is async. A plain function runs in a
    thread of its own: a person it waits for (`input()`) holds up nothing else in the event loop — the page's
    events a take-over records, other sessions of the process. (A daemon thread: a run stopped meanwhile is
    not kept from ending by a prompt nobody answers.)"""
    if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(getattr(handler, "__call__", None)):
        outcome = handler(value)
    else:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()

        def settle(result: Any, error: BaseException | None) -> None:
            if not done.done():
                done.set_exception(error) if error is not None else done.set_result(result)

        def work() -> None:
            try:
                result, error = handler(value), None
            except BaseException as exc:  # noqa: BLE001 - raised where it is awaited
                result, error = None, exc
            with contextlib.suppress(RuntimeError):  # (the loop closed meanwhile: nobody waits)
                loop.call_soon_threadsafe(settle, result, error)

        threading.Thread(target=work, name="surfer-person", daemon=True).start()
        outcome = await done
    if asyncio.iscoroutine(outcome) or isinstance(outcome, asyncio.Future):
        outcome = await outcome
    return outcome


async def ask(handler: QuestionHandler | None, preset: PresetAnswers, question: Question) -> tuple[Reply | None, str]:
    """The reply to `question` and who gave it ("answers", the handler's name), or (None, "")
    when nobody replies (no handler, or it returned None / an empty reply)."""
    found = preset.reply_to(question.text)
    if found is not None:
        return Reply(found.text, found.secret or question.secret), "answers"
    if handler is None:
        return None, ""
    outcome = await call_person(handler, question)
    if outcome is None:
        return None, ""
    reply = outcome if isinstance(outcome, Reply) else Reply(str(outcome))
    if not reply.text.strip():
        return None, ""
    return Reply(reply.text.strip(), reply.secret or question.secret), getattr(handler, "__name__", "on_question")
