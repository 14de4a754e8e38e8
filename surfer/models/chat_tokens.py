"""A model's tokenizer and chat template on the client: what turns surfer's
messages into the token ids a server would compute from them.

Loaded with transformers from the model's directory (or a Hugging Face id,
or the path the server names), never with remote code: only the tokenizer
and its chat template are read. The template renders the messages exactly as
the server's chat endpoint would (images as the template's placeholder, one
per image; the server expands each to the image's tokens); `continuation`
renders only what follows a generated reply — the close of the assistant's
turn, the new turns and the next generation prompt — so a conversation
kept as ids grows by the new turn's ids alone (token_chain.py).

    chat = TemplateTokenizer.load("/models/Holotron-12B")      # blocking: seconds (imports transformers)
    ids = chat.encode(chat.render(messages, generation_prompt=True))
"""

from __future__ import annotations

import re
import threading
from typing import Any, Sequence

from surfer.core.errors import ConfigError

from .backend import ImagePart, Message

INSTALL_TRANSFORMERS = "tokens in reads the model's tokenizer with transformers: pip install 'surfer-agent[tokens]'"
PROBE = "\x00surfer-reply\x00"  # a reply no model writes: where the template puts the assistant's text


def template_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as a chat template reads them: text-only content as one string (as the chat
    request sends it, http.to_openai_messages), else a list of text and image parts."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.image_count == 0:
            out.append({"role": message.role, "content": "".join(p.text for p in message.content)})  # type: ignore[union-attr]
        else:
            out.append({"role": message.role, "content": [
                {"type": "image"} if isinstance(p, ImagePart) else {"type": "text", "text": p.text} for p in message.content
            ]})
    return out


# An added token named for a medium (`<image>`, `<video>`, `<|video_pad|>`, `<img>`, `<|vision_start|>`, `<audio>`).
MEDIA_TOKEN = re.compile(r"image|video|audio|vision|<\|?/?img\|?>", re.IGNORECASE)


class TemplateTokenizer:
    """One model's tokenizer and chat template (thread-safe: renders and encodes may run off the loop)."""

    def __init__(self, tokenizer: Any, source: str) -> None:
        self.tokenizer = tokenizer
        self.source = source
        self._lock = threading.Lock()  # a fast tokenizer is not re-entrant across threads
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError(f"the tokenizer at {source} has no chat template: tokens in cannot render a turn")
        eos = tokenizer.eos_token_id
        self.stop_ids = frozenset(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        self._media_ids: frozenset[int] | None = None

    @classmethod
    def load(cls, source: str, local_only: bool = False) -> "TemplateTokenizer":
        """The tokenizer at `source` (a directory or a Hugging Face id; `local_only`: from this machine's
        cache, never downloaded); ConfigError when it cannot be read."""
        try:
            import logging

            from transformers import AutoTokenizer
        except ImportError:
            raise ConfigError(INSTALL_TRANSFORMERS) from None
        quiet = logging.getLogger("transformers")
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # a VL config's model type is not the tokenizer's: transformers says so
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False, local_files_only=local_only)
        except Exception as exc:  # noqa: BLE001 - any failure to read it is the same misuse
            raise ConfigError(f"cannot load a tokenizer from {source!r}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        finally:
            quiet.setLevel(level)
        return cls(tokenizer, source)

    def render(self, messages: Sequence[Message] | list[dict[str, Any]], *, generation_prompt: bool,
               options: dict[str, Any] | None = None) -> str:
        """The template's text for `messages` (surfer's, or already as the template reads them);
        `options`: the request's chat_template_kwargs (e.g. thinking off)."""
        rows = messages if messages and isinstance(messages[0], dict) else template_messages(messages)  # type: ignore[arg-type]
        with self._lock:
            return self.tokenizer.apply_chat_template(
                rows, tokenize=False, add_generation_prompt=generation_prompt, **(options or {}))

    def encode(self, text: str) -> list[int]:
        """The ids of rendered text (the template writes any special tokens itself)."""
        with self._lock:
            return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        with self._lock:
            return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    @property
    def media_ids(self) -> frozenset[int]:
        """The ids a model's processor reads as media: what the template writes for an image (its
        placeholder and any markers around it) and the added tokens named for images, video or audio
        (`<video>`, `<|video_pad|>`, `<img>`...). A generated reply holding one must not be sent back as
        ids: the server would look for an image (or a video) of the request for each (measured on SGLang
        with Holotron: "More 'IMAGE' tokens than images", "No data iterator found for token: <video>")."""
        if self._media_ids is None:
            text = [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
            image = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "x"}]}]
            with_image, without = self.chat_ids(image, add_generation_prompt=False), self.chat_ids(text, add_generation_prompt=False)
            added = self.tokenizer.get_added_vocab() if hasattr(self.tokenizer, "get_added_vocab") else None
            # (an image's ids are tokens added to the vocabulary: a text token the image turn merely splits differently
            # must not stop every reply that holds it from being sent back)
            drawn = frozenset(with_image) - frozenset(without)
            if added:
                named = frozenset(i for token, i in added.items() if MEDIA_TOKEN.search(token))
                self._media_ids = (drawn & frozenset(added.values())) | named
            else:
                self._media_ids = drawn
        return self._media_ids

    @property
    def end_ids(self) -> list[int]:
        """The ids a generated turn ends with (the stop tokens the model samples)."""
        return sorted(self.stop_ids)

    def chat_ids(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = True) -> list[int]:
        """Chat messages (as the template reads them) to ids, each image as the template's placeholder
        (one per image: the server expands it)."""
        return self.encode(self.render(messages, generation_prompt=add_generation_prompt))

    def continuation(self, before: Sequence[Message], reply: Message, after: Sequence[Message],
                     options: dict[str, Any] | None = None) -> str | None:
        """The template's text after the assistant's `reply` to `before`: the rest of the assistant's turn
        (e.g. `<|im_end|>` and a newline), the turns of `after` and the generation prompt. None when the
        template does not render the conversation as the earlier request, the reply and this text (a
        template that rewrites earlier turns)."""
        parts = self.continuation_parts(before, reply, after, options)
        return None if parts is None else parts[0] + parts[1]

    def continuation_parts(self, before: Sequence[Message], reply: Message, after: Sequence[Message],
                           options: dict[str, Any] | None = None) -> tuple[str, str] | None:
        """`continuation` in two: the close of the assistant's turn (`<|im_end|>\\n`; Nemotron's
        `\\n<SPECIAL_12>\\n`) and what follows it (the new turns, the generation prompt).

        The reply is where the template writes it in the history, not as a last turn (Nemotron-Nano-v2's
        template renders a conversation's last assistant turn after the generation prompt). A template may
        leave out of an earlier assistant turn what its generation prompt ends with — an empty thinking block
        (Nemotron-Nano-v2's and Qwen3's drop everything up to `</think>`): that is no rewrite where the reply
        starts with it (the profile's `reply_prefix`), as the earlier request was shown it; the continuation
        then follows the ids the model saw, and the chat path's text lacks that block."""
        rows = template_messages(before)
        text = "".join(p.text for p in reply.content if not isinstance(p, ImagePart))
        probe = self.render([*rows, {"role": "assistant", "content": PROBE}, *template_messages(after)],
                            generation_prompt=True, options=options)
        closed = self.render([*rows, {"role": "assistant", "content": PROBE}], generation_prompt=False, options=options)
        if probe.count(PROBE) != 1 or closed.count(PROBE) != 1:
            return None
        shown, following = probe.split(PROBE)
        closing = closed[closed.index(PROBE) + len(PROBE):]
        asked = self.render(rows, generation_prompt=True, options=options)  # the earlier request
        whole = self.render([*rows, {"role": "assistant", "content": text}, *template_messages(after)],
                            generation_prompt=True, options=options)
        if not (following.startswith(closing) and asked.startswith(shown) and text.startswith(asked[len(shown):])
                and whole.startswith(shown) and whole.endswith(following)):
            return None
        return closing, following[len(closing):]
