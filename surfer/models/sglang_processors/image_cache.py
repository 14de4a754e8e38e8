"""Each screenshot processed once per SGLang tokenizer worker: what Holotron's processor (nemotron_vl.py)
keeps between requests, importable without SGLang.

With the `conversation` layout every request of a session carries all its screenshots so far, and SGLang
0.5.15 decodes, tiles and normalises each of them again on every request, then hashes the pixel tensors
again in the scheduler (the prefix cache's key of an image's tokens). An image's processed tiles depend only
on its data (the exact base64 string, URL or bytes sent) and the model's fixed settings, so the processor can
keep them in a `ProcessedImages` cache keyed by a digest of that data, bounded by bytes, least recently
used out first; a request with k screenshots processes only the ones its worker has not seen. The same
digest gives each image item its `hash`: SGLang then skips hashing the tensor, and the prefix cache's key
stays a function of the image's content (the same data, the same hash, in every worker and request).

    cache = ProcessedImages(cache_bytes(os.environ))
    key = source_key(image_data[0])          # None: data the cache does not key (then processed as SGLang does)
    tiles = cache.get(key)                   # None on a miss; then process it and cache.put(key, tiles, nbytes)
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

CACHE_ENV = "SURFER_SGLANG_IMAGE_CACHE_GIB"
# Off unless asked: measured on an H200 (64 sessions, `conversation`, at most 5 screenshots a request), the
# processed-screenshot cache moved steps/s by less than run-to-run noise (7.75 against 7.58 at one tile, 2.88
# against 3.17 at full size), while 2 GiB a worker costs 12 GiB of host memory over 6 workers. What made the
# processor 4x faster (1.81 -> 7.58 steps/s at one tile) is the rest of nemotron_vl.py's path: screenshots
# processed in the worker's thread pool, ids kept as sent, each image hashed from its data (not separated).
DEFAULT_CACHE_GIB = 0.0


def cache_bytes(environ: Mapping[str, str]) -> int:
    """The cache's bound in bytes per tokenizer worker: `SURFER_SGLANG_IMAGE_CACHE_GIB` (GiB, 0 turns the
    cache off), else `DEFAULT_CACHE_GIB`. ValueError with a one-line message for a value that is not a
    number of GiB >= 0."""
    raw = environ.get(CACHE_ENV, "").strip()
    if not raw:
        return int(DEFAULT_CACHE_GIB * (1 << 30))
    try:
        gib = float(raw)
    except ValueError:
        gib = -1.0
    if not gib >= 0 or gib == float("inf"):
        raise ValueError(f"{CACHE_ENV}={raw!r}: expected a number of GiB >= 0 (0 turns the cache off)")
    return int(gib * (1 << 30))


def source_key(data: Any) -> bytes | None:
    """A digest of an image as sent (a base64 or data URL or path string, or raw bytes): equal for equal
    data, and a string and bytes never share one. None for anything else (preprocessed items, dicts)."""
    if isinstance(data, str):
        digest = hashlib.sha256(b"str\0")
        digest.update(data.encode("utf-8", "surrogatepass"))
    elif isinstance(data, (bytes, bytearray, memoryview)):
        digest = hashlib.sha256(b"bytes\0")
        digest.update(data)
    else:
        return None
    return digest.digest()


def content_hash(key: bytes) -> int:
    """The image item's `hash` from its `source_key`: 64 bits, as SGLang's own tensor hash is."""
    return int.from_bytes(key[:8], "big", signed=False)


class ProcessedImages:
    """Processed images by `source_key`, least recently used out first, holding at most `limit` bytes
    (an image larger than the limit is not kept). Used from one event loop: no locking."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[bytes, tuple[Any, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: bytes) -> Any | None:
        found = self._items.get(key)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        self._items.move_to_end(key)
        return found[0]

    def put(self, key: bytes, value: Any, nbytes: int) -> None:
        if key in self._items:
            self.held -= self._items.pop(key)[1]
        if nbytes > self.limit:
            return
        while self._items and self.held + nbytes > self.limit:
            self.held -= self._items.popitem(last=False)[1][1]
        self._items[key] = (value, nbytes)
        self.held += nbytes

    def stats(self) -> str:
        return (f"{len(self._items)} images, {self.held / (1 << 20):.0f} of {self.limit / (1 << 20):.0f} MiB, "
                f"{self.hits} hits, {self.misses} misses")


def rendered_runs(tiles: Sequence[int], tokens_per_tile: int, image_id: int, start_id: int, end_id: int) -> list[list[int]]:
    """Each image's ids as Nemotron-VL's processor renders them: `start_id`, `tokens_per_tile` `image_id`s a
    tile, `end_id` (`tiles`: each image's tile count, thumbnail included)."""
    return [[start_id, *[image_id] * (tokens_per_tile * n), end_id] for n in tiles]
