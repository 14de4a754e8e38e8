"""Image references: send a screenshot's bytes to a vLLM server once, then name it.

An agent's requests repeat its screenshots: the `blocks` layout resends the
whole history every step, and role continuation resends the policy's images in
the localizer's request. vLLM (documented from 0.13; read in 0.25.1) accepts a `uuid` beside each
image part, keys its multimodal processor cache with it, and accepts a part
with the image left out (`"image_url": null`) when the uuid is in that cache.
So with `image_refs` on, surfer sends each image part with its content hash as
the uuid, and leaves the bytes out of parts whose image this server already
took in an earlier request that succeeded. The API server then skips the
base64 and JPEG decoding, hashing and processing of every repeated screenshot
(about 7 ms of its one process's CPU per 1280×800 screenshot), and the request
body shrinks from megabytes to the new screenshot.

A server that no longer holds an image (its cache evicted it, or it restarted)
answers HTTP 400 "Cache miss for image ... data is not provided"; the call
then forgets that request's images and sends them again in full, once. The
record also halves the number of images it trusts the server to hold, and
grows it back by one per request that succeeds, so that a server whose
cache is smaller than its load (`surfer serve` sizes it) is not sent a
request twice every time.

Off by default: other OpenAI-compatible servers reject or ignore the field,
and the gain is unmeasured on a GPU (docs/benchmarks/gpu-sessions.md).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from .backend import ImagePart

KNOWN_LIMIT = 65_536  # images remembered per server (a few MB of hashes); the server's own cache is smaller
LEAST_TRUSTED = 64  # a miss never lowers the limit below this many images


def image_uuid(part: ImagePart) -> str:
    """The uuid vLLM keys the image with: its bytes' SHA-256 (the same screenshot is the same item)."""
    return part.digest or hashlib.sha256(part.data).hexdigest()


def is_cache_miss(message: str) -> bool:
    """vLLM's answer to an image left out that it does not hold."""
    text = message.lower()
    return "cache miss" in text and "not provided" in text


class ImageRefs:
    """The images one server took in requests that succeeded (most recent last)."""

    def __init__(self, limit: int = KNOWN_LIMIT) -> None:
        self.limit = limit
        self._known: OrderedDict[str, None] = OrderedDict()

    def held(self, uuid: str) -> bool:
        return uuid in self._known

    def took(self, uuids: list[str]) -> None:
        """A request holding these images succeeded: the server has them now."""
        self.limit = min(KNOWN_LIMIT, self.limit + 1)
        for uuid in uuids:
            self._known[uuid] = None
            self._known.move_to_end(uuid)
        while len(self._known) > self.limit:
            self._known.popitem(last=False)

    def missed(self, uuids: list[str]) -> None:
        """The server did not hold one of these: forget them, and trust it with half as many images."""
        for uuid in uuids:
            self._known.pop(uuid, None)
        self.limit = max(LEAST_TRUSTED, min(self.limit, len(self._known)) // 2)
        while len(self._known) > self.limit:
            self._known.popitem(last=False)

    def clear(self) -> None:
        self._known.clear()


_SERVERS: dict[str, ImageRefs] = {}


def refs_for(base_url: str) -> ImageRefs:
    """One record per server, shared by every backend of this process that talks to it."""
    return _SERVERS.setdefault(base_url.rstrip("/"), ImageRefs())


def server_emptied(root: str) -> None:
    """The server at `root` (its URL without /v1) emptied its caches (`surfer bench gpu` between runs)."""
    for base_url, refs in _SERVERS.items():
        if base_url.startswith(root.rstrip("/")):
            refs.clear()
