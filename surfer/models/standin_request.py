"""What the stand-in server reads of a chat completions request: its role, text and images
(standin.py; the SGLang /generate routes rebuild one too)."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ChatRequest:
    body: dict[str, Any]
    role: str
    text: str
    image_urls: list[str] = field(default_factory=list)
    image_uuids: list[tuple[str, bool]] = field(default_factory=list)  # (uuid, the server held it before)
    session: str | None = None  # the X-Surfer-Session header: the run (or batch task) that sent it
    rank: str | None = None  # the X-Data-Parallel-Rank header: the engine copy it asked for (data_parallel.py)

    @property
    def last_text(self) -> str:
        """The text of the last message: the question asked now (with role continuation a
        localizer's or validator's request carries the policy's whole turn before it)."""
        messages = self.body.get("messages") or [{}]
        content = messages[-1].get("content")
        if isinstance(content, str):
            return content
        return "\n".join(part["text"] for part in content or [] if part.get("type") == "text")

    @property
    def images(self) -> list[bytes]:
        """The request's images, decoded on first use (most answers never look)."""
        if not hasattr(self, "_images"):
            self._images = [
                base64.b64decode(url.split(",", 1)[1]) if url.startswith("data:") else b"" for url in self.image_urls
            ]
        return self._images

    @property
    def schema(self) -> dict[str, Any] | None:
        fmt = self.body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            return fmt["json_schema"].get("schema")
        return (self.body.get("structured_outputs") or {}).get("json")

    def image_size(self, index: int = -1) -> tuple[int, int]:
        from PIL import Image

        with Image.open(io.BytesIO(self.images[index])) as image:
            return image.size


def _infer_role(body: dict[str, Any], text: str) -> str:
    fmt = body.get("response_format") or {}
    name = (fmt.get("json_schema") or {}).get("name")
    if name:
        return name
    lowered = text.lower()
    if "localize an element" in lowered:
        return "localizer"
    if "you are the validator" in lowered:
        return "validator"
    return "policy"


class ImageNotHeld(Exception):
    """An image part sent as a uuid alone that the server does not hold (vLLM answers HTTP 400)."""


def parse_chat_request(body: dict[str, Any], held: dict[str, str] | None = None) -> ChatRequest:
    """The request's text and image URLs. With `held` (the server's images by uuid, as vLLM's
    processor cache keeps them): a part with a uuid and its data is kept there, one with the
    uuid alone is read from there, and ImageNotHeld names one that is not."""
    texts: list[str] = []
    image_urls: list[str] = []
    uuids: list[tuple[str, bool]] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content or []:
            if part.get("type") == "text":
                texts.append(part["text"])
            elif part.get("type") == "image_url":
                url, uuid = (part.get("image_url") or {}).get("url"), part.get("uuid")
                if held is not None and uuid is not None:
                    uuids.append((uuid, uuid in held))
                    if url is not None:
                        held[uuid] = url
                    elif uuid in held:
                        url = held[uuid]
                    else:
                        raise ImageNotHeld(f"Cache miss for image at index {len(image_urls)} but data is not provided.")
                image_urls.append(url or "")
    text = "\n".join(texts)
    return ChatRequest(body, _infer_role(body, text), text, image_urls, uuids)
