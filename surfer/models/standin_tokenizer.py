"""The stand-in server's tokenizer: what turns a chat request into the prompt ids a
server computes and a reply into the ids it generated, behind a small interface
(`ChatTokenizer`) so that a real one (a Hugging Face tokenizer and processor) can
take its place.

    tokenizer = StandInTokenizer(template=TEMPLATES["qwen3"])
    ids = tokenizer.chat_ids(body["messages"])          # the prompt, images expanded
    reply = tokenizer.encode('{"x": 1}') + tokenizer.end_ids

`StandInTokenizer` is deterministic and needs nothing: text is cut into pieces
as Qwen2's pre-tokenizer cuts them (words cut at six letters: about four
characters a piece), each piece's id a hash of it; an image becomes a start id,
one placeholder id per 28×28 pixels (Qwen2-VL's 14-pixel patches merged 2×2,
`image_ids`) and an end id; a chat template (`ChatTemplate`) frames each turn with special ids and
adds the generation prompt, whose tail (an empty thinking block, say) a history
turn does not repeat — as real templates do; Nemotron-Nano-v2's (Holotron's) also
drops an earlier assistant turn's text up to its `</think>` and strips each turn's
text, so a history turn that repeats that empty block is rendered without it.
"""

from __future__ import annotations

import base64
import io
import math
import re
import threading
import zlib
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

FIRST_TEXT_ID = 1000
TEXT_IDS = 150_000  # ids FIRST_TEXT_ID .. FIRST_TEXT_ID + TEXT_IDS - 1 are text pieces


class ChatTokenizer(Protocol):
    """What a server's tokenizer and processor do to a chat request, as far as token ids go."""

    @property
    def end_ids(self) -> list[int]:
        """The ids a generated turn ends with (the end-of-turn token the model samples)."""
        ...

    def encode(self, text: str) -> list[int]:
        """Plain text (no template) to ids."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Ids back to text, special ids included."""
        ...

    def image_ids(self, image: bytes) -> list[int]:
        """One image's ids in the prompt: its placeholders expanded as the model's processor does."""
        ...

    def chat_ids(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = True) -> list[int]:
        """OpenAI-style chat messages (text parts, `image_url` data URLs) through the chat template."""
        ...


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template's shape: each turn is `turn_start` + the role's header + content + `turn_end` +
    `separator` (or the role's own `closes` text after its content); the generation prompt is
    `turn_start` + the assistant's header + `generation_prefix`. The model ends a reply with what the
    assistant's close holds before `turn_end` (Nemotron-H: a newline), then `turn_end`'s id."""

    name: str
    turn_start: str = "<|im_start|>"
    turn_end: str = "<|im_end|>"
    separator: str = "\n"  # after turn_end
    headers: Mapping[str, str] | None = None  # role -> header text (default "{role}\n")
    generation_prefix: str = ""  # what the generation prompt adds after the header (not rendered for history turns)
    starts: Mapping[str, str] | None = None  # role -> its turn's start, where not turn_start
    closes: Mapping[str, str] | None = None  # role -> the text after its content, where not turn_end + separator
    # an assistant turn of the history keeps only what follows this text's last occurrence (Nemotron-Nano-v2's
    # `</think>`: the thinking block and all before it dropped), "" to keep it whole
    history_after: str = ""
    strip: bool = False  # each turn's text stripped of leading and trailing whitespace (Nemotron-Nano-v2's)

    def header(self, role: str) -> str:
        return (self.headers or {}).get(role, f"{role}\n")

    def start(self, role: str) -> str:
        return (self.starts or {}).get(role, self.turn_start)

    def close(self, role: str) -> str:
        return (self.closes or {}).get(role, self.turn_end + self.separator)

    @property
    def before_end(self) -> str:
        """What a model trained on the template writes between its reply and its end-of-turn id."""
        return self.close("assistant").partition(self.turn_end)[0]


TEMPLATES: dict[str, ChatTemplate] = {
    # Qwen2.5-VL (Holo1.5): ChatML, nothing after the assistant's header
    "chatml": ChatTemplate("chatml"),
    # Qwen3-VL (Holo2) with thinking off: the generation prompt ends with an empty thinking block
    "qwen3": ChatTemplate("qwen3", generation_prefix="<think>\n\n</think>\n\n"),
    # Nemotron-Nano-v2 (Holotron) with reasoning off: `<SPECIAL_10>System\n`, `<SPECIAL_11>User\n`, each turn's text
    # and a newline; an assistant's turn closes with `\n<SPECIAL_12>\n` (the model writes the newline, then its stop
    # id); the generation prompt ends with `<think></think>`
    "nemotron": ChatTemplate(
        "nemotron", turn_start="<SPECIAL_11>", turn_end="<SPECIAL_12>",
        headers={"system": "System\n", "user": "User\n", "assistant": "Assistant\n"}, generation_prefix="<think></think>",
        starts={"system": "<SPECIAL_10>"}, closes={"system": "\n", "user": "\n", "tool": "\n", "assistant": "\n<SPECIAL_12>\n"},
        history_after="</think>", strip=True,  # an earlier assistant turn: its text after `</think>`, stripped
    ),
}
# The template of each shipped profile's family, as far as token boundaries go.
PROFILE_TEMPLATES = {"holo1.5": "chatml", "holo2": "qwen3", "holotron": "nemotron", "openai": "chatml"}

_SPECIALS = ("<|im_start|>", "<|im_end|>", "<SPECIAL_11>", "<SPECIAL_12>", "<|vision_start|>", "<|vision_end|>",
             "<|image_pad|>", "<think>", "</think>", "<|endoftext|>", "<SPECIAL_10>")
_PIECES = re.compile(
    "|".join(re.escape(s) for s in _SPECIALS)
    # Qwen2's pre-tokenizer rule, with words cut at six letters (about four characters a token)
    + r"|[^\r\nA-Za-z\d]?[A-Za-z]{1,6}|\d| ?[^\sA-Za-z\d]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

_SPECIAL = re.compile("(" + "|".join(re.escape(s) for s in _SPECIALS) + ")")


class StandInTokenizer:
    """A deterministic `ChatTokenizer` (see the module docstring); `template` sets the turn shapes."""

    def __init__(self, template: ChatTemplate | str = "chatml", *, patch: int = 28, max_image_ids: int = 16_384) -> None:
        self.template = TEMPLATES[template] if isinstance(template, str) else template
        self.special = {text: n + 1 for n, text in enumerate(_SPECIALS)}
        self._names = {v: k for k, v in self.special.items()}
        self._pieces: dict[int, str] = {}
        self._lock = threading.Lock()
        self.patch = patch
        self.max_image_ids = max_image_ids

    @property
    def end_ids(self) -> list[int]:
        return [self.special[self.template.turn_end]]

    def encode(self, text: str) -> list[int]:
        ids = []
        learnt = {}
        # special tokens first (as a tokenizer's added tokens: text next to one never joins it), then the pieces
        pieces = (piece for part in _SPECIAL.split(text) if part
                  for piece in ([part] if part in self.special else _PIECES.findall(part)))
        for piece in pieces:
            special = self.special.get(piece)
            if special is not None:
                ids.append(special)
                continue
            token = FIRST_TEXT_ID + zlib.crc32(piece.encode("utf-8")) % TEXT_IDS
            ids.append(token)
            learnt[token] = piece
        with self._lock:
            self._pieces.update(learnt)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self._names.get(i) or self._pieces.get(i, f"<{i}>") for i in ids)

    def image_ids(self, image: bytes) -> list[int]:
        from PIL import Image

        with Image.open(io.BytesIO(image)) as opened:  # reads the header only
            width, height = opened.size
        count = min(self.max_image_ids, max(1, math.ceil(width / self.patch) * math.ceil(height / self.patch)))
        return [self.special["<|vision_start|>"], *[self.special["<|image_pad|>"]] * count, self.special["<|vision_end|>"]]

    def _content_ids(self, content: Any, close: str = "") -> list[int]:
        """A turn's content and the `close` after it, as a template's text is tokenised: whole (the close's
        first characters may join the content's last piece, as `}\\n` does)."""
        if isinstance(content, str):
            return self.encode(content + close)
        ids: list[int] = []
        parts = list(content or [])
        for n, part in enumerate(parts):
            if part.get("type") == "text":
                ids += self.encode(part.get("text", "") + (close if n == len(parts) - 1 else ""))
            elif part.get("type") == "image_url":
                url = (part.get("image_url") or {}).get("url") or ""
                ids += self.image_ids(base64.b64decode(url.split(",", 1)[1])) if url.startswith("data:") else []
        return ids if parts and parts[-1].get("type") == "text" else ids + self.encode(close)

    def _shown(self, role: str, content: Any) -> Any:
        """A turn's content as the template writes it: an assistant turn of the history less all up to
        `history_after` (Nemotron-Nano-v2's `</think>`), the text stripped where the template strips it."""
        t = self.template
        if role == "assistant" and isinstance(content, list) and all(p.get("type") == "text" for p in content):
            content = "".join(p.get("text", "") for p in content)
        if isinstance(content, str):
            if role == "assistant" and t.history_after:
                content = content.rpartition(t.history_after)[2]
            return content.strip() if t.strip else content
        if not (t.strip and content):
            return content
        parts = [dict(part) for part in content]
        if parts[0].get("type") == "text":
            parts[0]["text"] = parts[0].get("text", "").lstrip()
        if parts[-1].get("type") == "text":
            parts[-1]["text"] = parts[-1].get("text", "").rstrip()
        return parts

    def chat_ids(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = True) -> list[int]:
        t = self.template
        ids: list[int] = []
        for message in messages:
            role = message.get("role", "user")
            content = self._shown(role, message.get("content"))
            ids += [*self.encode(t.start(role) + t.header(role)), *self._content_ids(content, t.close(role))]
        if add_generation_prompt:
            ids += self.encode(t.turn_start + t.header("assistant") + t.generation_prefix)
        return ids

    def reply_ids(self, content: str) -> list[int]:
        """The ids a model trained on the template generates for `content`: what the assistant's close holds
        before the end-of-turn id (a newline for Nemotron-H), then that id."""
        return self.encode(content + self.template.before_end) + self.end_ids
