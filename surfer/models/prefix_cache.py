"""The stand-in server's prefix cache (surfer.models.standin), kept the way vLLM
keeps one: a request's prompt is cut into blocks (64 characters of text, or one
image), each hashed together with everything before it, and the leading blocks
found in the cache are hits. With a capacity in tokens, the least recently used
blocks are evicted first, so more sessions than it holds find nothing of their
history, as on a GPU in the long-history regime."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any


class PrefixCache:
    """Chained block hashes -> tokens, least recently used first (`capacity` tokens; None: unbounded)."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity
        self._blocks: OrderedDict[bytes, int] = OrderedDict()
        self.tokens = 0

    def take(self, body: dict[str, Any]) -> int:
        """The tokens of `body`'s prompt found cached (whole leading blocks); then keep all of its blocks."""
        hits, found, chain = 0, True, b""
        blocks: list[tuple[bytes, int]] = []
        for piece, tokens in prompt_blocks(body):
            chain = hashlib.sha1(chain + piece).digest()
            blocks.append((chain, tokens))
            found = found and chain in self._blocks
            hits += tokens if found else 0
        for chain, tokens in blocks:
            if chain in self._blocks:
                self._blocks.move_to_end(chain)
            else:
                self._blocks[chain] = tokens
                self.tokens += tokens
        while self.capacity is not None and self.tokens > self.capacity and self._blocks:
            self.tokens -= self._blocks.popitem(last=False)[1]
        return hits

    def clear(self) -> None:
        self._blocks.clear()
        self.tokens = 0


def prompt_blocks(body: dict[str, Any]) -> list[tuple[bytes, int]]:
    """A request's prompt as cache blocks (bytes, tokens): each message's role, its text in
    64-character blocks (16 tokens), each image one block of 256 tokens."""
    blocks: list[tuple[bytes, int]] = []
    text = ""

    def flush(final: bool) -> None:
        nonlocal text
        while len(text) >= 64 or (final and text):
            blocks.append((text[:64].encode(), len(text[:64]) // 4))
            text = text[64:]

    for message in body.get("messages", []):
        text += f"<{message.get('role')}>"
        content = message.get("content")
        for part in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
            if part.get("type") == "text":
                text += part.get("text", "")
            elif part.get("type") == "image_url":
                flush(True)
                key = part.get("uuid") or (part.get("image_url") or {}).get("url") or ""  # vLLM hashes by uuid when given
                blocks.append((b"image:" + hashlib.sha1(key.encode()).digest(), 256))
        flush(False)
    flush(True)  # a partial last block may hit here, where vLLM would compute it again: a small overcount
    return blocks
