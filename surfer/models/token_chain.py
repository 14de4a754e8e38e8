"""A conversation kept as token ids: the one owner of what a tokens-in request
sends (transport: sglang_generate.py).

Per model session (affinity.py), the chain keeps its last few requests as the
server took them: the prompt's ids as sent (each image as the template's
placeholder, the images passed alongside) and the ids the server generated.
A request that repeats one of them, then that reply as the assistant's turn,
then new turns — the `conversation` layout's next step, or a localizer or
validator continuing the policy's turn — is sent as

    the earlier prompt's ids + the generated ids + the ids of what follows the reply

where "what follows" is rendered by the model's own chat template
(chat_tokens.py: the close of the assistant's turn, the new turns, the
generation prompt). The server then finds the whole earlier request in its
cache, to the token — the reply is never re-tokenised from its text, and a
hybrid model's state, kept only where a request ended, is found every time.

Every generated id is kept where the model wrote its turn's close up to the
stop id itself (`join_reply`) — ChatML's `<|im_end|>`, Nemotron-H's
`\n<SPECIAL_12>` (the newline included), as a model trained on its template
does — and only the rest of the close follows (a newline): the new prompt
extends the previous call's whole sequence. Where it did not (no newline
before Nemotron's `<SPECIAL_12>`), the stop id is left out and the template
writes its whole close after the reply: the prompt is then the chat path's
text, and still starts with all the server computed for the earlier request
(its ids and every generated id but the last, which it never computes); the
run's tokens.jsonl says so (`dropped_stop`).

Any other request (the first of a session, or a layout that drops earlier
screenshots or rewrites its text: `window`, `blocks` between block starts) is
rendered whole, counted in `ChainStats` with the reason, and starts a new link.
"""

from __future__ import annotations

import logging
import threading
from array import array
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any, Sequence

from .affinity import forget_when_sessions_end
from .backend import ImagePart, Message, ModelRequest
from .chat_tokens import TemplateTokenizer

log = logging.getLogger(__name__)

KEEP_PER_SESSION = 4  # the policy's last request and the roles' continuations of it
MAX_SESSIONS = 1024  # sessions kept at most (each is forgotten when it ends; least recently used first past this)

FIRST = "the first request of its conversation (the session's, or its role's)"
DROPPED = "earlier screenshots dropped (the layout's window or block moved)"
REWRITTEN = "earlier turns rewritten (the layout changes text it sent before)"
UNMATCHED_REPLY = "the assistant turn is not the reply the server generated"
TEMPLATE = "the chat template does not render the new turn as an append"
MEDIA_IN_REPLY = "the generated ids hold an image or video token (sent back, the server would look for one more)"
REFUSED = "refused"  # (said once)


@dataclass(frozen=True)
class Link:
    """One request as sent in ids, and what the server generated for it."""

    messages: tuple[Message, ...]
    options_key: str
    ids: array  # the prompt as sent: one placeholder per image
    images: tuple[ImagePart, ...]
    generated: array  # the generated ids, as the server sent them (a final stop token included)
    reply: str
    stops: frozenset[int] = frozenset()  # the id the server said it stopped on


@dataclass
class TokensPrompt:
    """What one tokens-in request sends: `ids` (images as placeholders) and `images` in order."""

    messages: tuple[Message, ...]
    options_key: str
    ids: list[int]
    images: tuple[ImagePart, ...]
    extends: int | None = None  # ids reused from the session's earlier request (None: rendered whole)
    reason: str = ""  # why it was rendered whole


@dataclass
class ChainStats:
    requests: int = 0
    extended: int = 0  # sent as an earlier request's ids + generated ids + the new turn
    rendered: Counter = field(default_factory=Counter)  # rendered whole, by reason
    refused: int = 0  # of the above (extended or rendered), refused by the server, then sent by chat

    def as_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "extended": self.extended, "rendered": dict(self.rendered),
                "refused": self.refused}


def request_images(messages: Sequence[Message]) -> tuple[ImagePart, ...]:
    return tuple(p for m in messages for p in m.content if isinstance(p, ImagePart))


def _same_image(a: ImagePart, b: ImagePart) -> bool:
    return a is b or (a.digest is not None and a.digest == b.digest) or a.data == b.data


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items two sequences have in common (turns of two requests, ids)."""
    count = 0
    for x, y in zip(a, b):
        if x != y:
            break
        count += 1
    return count


def join_reply(chat: TemplateTokenizer, generated: Sequence[int], closing: str,
               stops: frozenset[int] = frozenset()) -> tuple[list[int], str]:
    """The generated ids a continuation keeps, and the text of the turn's close still to write after them
    (`closing`: the template's text after an assistant turn's content; `stops`: stop ids besides the
    tokenizer's). Every id is kept where the model wrote the close up to its stop id itself (ChatML's
    `<|im_end|>`; Nemotron-H's `\\n<SPECIAL_12>`): only the rest of the close follows. Otherwise the stop
    id is left out and the close follows the reply's text from where it overlaps (e.g. whole)."""
    ids = list(generated)
    ends_on_stop = bool(ids) and (ids[-1] in chat.stop_ids or ids[-1] in stops)
    stop_text = chat.decode(ids[-1:]) if ends_on_stop else ""
    for keep in ((len(ids), len(ids) - 1) if ends_on_stop else (len(ids),)):
        text = chat.decode(ids[:keep])
        for overlap in range(len(closing), -1, -1):
            head = closing[:overlap]
            if text.endswith(head) and (keep < len(ids) or not ends_on_stop or (stop_text and head.endswith(stop_text))):
                return ids[:keep], closing[overlap:]
    return ids[:-1], closing  # (not reached: the stop id left out, no overlap, always joins)


class TokenChain:
    """The sessions' conversations as token ids (see the module docstring)."""

    def __init__(self, chat: TemplateTokenizer, keep: int = KEEP_PER_SESSION) -> None:
        self.chat = chat
        self.keep = keep
        self.stats = ChainStats()
        self._sessions: OrderedDict[str, list[Link]] = OrderedDict()
        self._said: set[str] = set()
        self._lock = threading.Lock()  # prompts are rendered in worker threads, replies kept on the loop
        forget_when_sessions_end(self)

    def prompt(self, session: str, request: ModelRequest, options: dict[str, Any]) -> TokensPrompt:
        """The ids to send for `request` (blocking: renders and tokenises; run it off the loop)."""
        key = repr(sorted(options.items()))
        with self._lock:
            links = list(self._sessions.get(session, []))
            self.stats.requests += 1
        reason, closest = (FIRST if not links else ""), -1
        for link in reversed(links):
            extended, why = self._extend(link, request, key, options)
            if extended is not None:
                with self._lock:
                    self.stats.extended += 1
                return extended
            # why not: said of the link this request shares most turns with (its own role's last request,
            # not another role's that merely came last)
            shared = common_prefix(link.messages, request.messages)
            if shared > closest:
                reason, closest = why, shared
        if closest == 0:  # no earlier request shares even its first turn: another role's, or a new conversation
            reason = FIRST
        reason = reason or REWRITTEN
        with self._lock:
            self.stats.rendered[reason] += 1
            said = reason in self._said
            self._said.add(reason)
        if reason != FIRST and not said:
            log.warning("tokens in: a request could not extend its session's last one (%s); it is sent whole "
                        "(the `conversation` prompt layout continues every step)", reason)
        text = self.chat.render(request.messages, generation_prompt=True, options=options)
        return TokensPrompt(request.messages, key, self.chat.encode(text), request_images(request.messages), None, reason)

    def _extend(self, link: Link, request: ModelRequest, key: str, options: dict[str, Any]) -> tuple[TokensPrompt | None, str]:
        """`request` as `link` + its reply + the new turns, or (None, why not)."""
        messages, n = request.messages, len(link.messages)
        if key != link.options_key or len(messages) < n + 2 or messages[:n] != link.messages:
            images = request_images(messages)
            kept = len(link.images) <= len(images) and all(map(_same_image, link.images, images))
            return None, REWRITTEN if kept else DROPPED
        reply = messages[n]
        if reply.role != "assistant" or reply.image_count or not "".join(
                p.text for p in reply.content).rstrip().endswith(link.reply.rstrip()):  # type: ignore[union-attr]
            return None, UNMATCHED_REPLY
        if not self.chat.media_ids.isdisjoint(link.generated):
            return None, MEDIA_IN_REPLY
        after = messages[n + 1:]
        parts = self.chat.continuation_parts(link.messages, reply, after, options)
        if parts is None:
            return None, TEMPLATE
        kept, rest = join_reply(self.chat, link.generated, parts[0], link.stops)
        ids = [*link.ids, *kept, *self.chat.encode(rest + parts[1])]
        reused = len(link.ids) + len(kept)
        return TokensPrompt(messages, key, ids, link.images + request_images(after), reused), ""

    def keep_reply(self, session: str, prompt: TokensPrompt, generated: Sequence[int], reply: str, stop: int | None = None) -> None:
        """Remember `prompt` and what the server generated for it (`stop`: the token it stopped on)."""
        link = Link(prompt.messages, prompt.options_key, array("i", prompt.ids), prompt.images, array("i", generated), reply,
                    frozenset([stop]) if stop is not None else frozenset())
        with self._lock:
            links = self._sessions.setdefault(session, [])
            self._sessions.move_to_end(session)
            # a continuation of a kept link replaces nothing: the policy's next step extends the policy's link
            links.append(link)
            del links[:-self.keep]
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)

    def refused(self, session: str, prompt: TokensPrompt, message: str) -> None:
        """The server refused `prompt` (the request then goes by chat): counted and said once. The session's
        links stay: its next request extends the last one the server took, the turns since as rendered text."""
        with self._lock:
            self.stats.refused += 1
            said = REFUSED in self._said
            self._said.add(REFUSED)
        if not said:
            log.warning("tokens in: the server refused a request's ids (%s); that request goes by chat, the "
                        "others keep tokens in", message.splitlines()[0][:200] if message else "no message")

    def forget(self, session: str) -> None:
        with self._lock:
            self._sessions.pop(session, None)
