"""SGLang multimodal processors surfer ships for the models it serves, loaded by
SGLang itself: `surfer serve --engine sglang` sets
`SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE=surfer.models.sglang_processors` for a
profile whose `Serving.sglang_processors` names this package, and SGLang
(>= 0.5.15; tokenizer_manager.init_tokenizer_and_processor) registers each
processor here over its own for the same architecture. Nothing in surfer
imports the modules below this package (they import SGLang); what they compute
lives here, importable and tested without SGLang.

`nemotron_vl`: Nemotron-Nano-VL (Holotron-12B). SGLang 0.5.15's processor
(multimodal/processors/nano_nemotron_vl.py) puts the tokens of all of a
request's images at its first `<image>` placeholder and leaves the others as
stray image tokens (`prompt.replace(..., "".join(rendered_images), 1)`), so
consecutive requests of a session differ from their first screenshot on and
the prefix cache finds little more than the system prompt; and it takes no
token ids with images (`prompt = input_text` then `prompt.replace`: HTTP 500).
Surfer's processor expands each placeholder to its own image's tokens, in
order, and keeps every other id as sent — tokens in for Holotron. SGLang's
processor also hands the engine all of a request's images as one item, so one
hash names them all and the prefix cache's key of every image token changes
as soon as a request holds one more screenshot (measured on an H200: a
request extending the last one with a new screenshot found 0 tokens cached,
with a text turn 309 of 337); surfer's gives each image its own item, its own
hash, as SGLang's cache expects.

`image_cache`: each image's item gets a digest of its data as its hash, so SGLang does not hash the pixels
again, and where asked (SURFER_SGLANG_IMAGE_CACHE_GIB) each tokenizer worker keeps the screenshots it
processed; pure, like this module.
"""

from __future__ import annotations

from typing import Sequence


def image_runs(processed: Sequence[int], image_id: int, start_id: int, end_id: int) -> list[list[int]]:
    """Each image's ids as a processor wrote them: `start_id`, its `image_id`s, `end_id`, in order."""
    runs, at = [], 0
    while at < len(processed):
        if processed[at] == start_id and at + 1 < len(processed) and processed[at + 1] == image_id:
            end = at + 1
            while end < len(processed) and processed[end] == image_id:
                end += 1
            runs.append(list(processed[at:end + 1 if end < len(processed) and processed[end] == end_id else end]))
            at = end
        else:
            at += 1
    return runs


def expand_images(ids: Sequence[int], processed: Sequence[int], image_id: int, start_id: int, end_id: int) -> list[int] | None:
    """`ids` with its i-th `image_id` placeholder replaced by the i-th image's run in `processed` (whatever
    position the processor put it at), every other id kept; a placeholder already between `start_id` and
    `end_id` keeps them once. None when the placeholders and the images do not pair up."""
    return place_runs(ids, image_runs(processed, image_id, start_id, end_id), image_id, start_id, end_id)


def place_runs(ids: Sequence[int], runs: Sequence[Sequence[int]], image_id: int, start_id: int, end_id: int) -> list[int] | None:
    """`ids` with its i-th `image_id` placeholder replaced by `runs[i]` (an image's `start_id`, `image_id`s,
    `end_id`), every other id kept; a placeholder already between `start_id` and `end_id` keeps them once.
    None when the placeholders and the runs do not pair up."""
    if sum(1 for i in ids if i == image_id) != len(runs) or not runs:
        return None
    out: list[int] = []
    taken = iter(runs)
    for n, token in enumerate(ids):
        if token != image_id:
            out.append(token)
            continue
        run = list(next(taken))
        if n and ids[n - 1] == start_id:
            run = run[1:]
        if n + 1 < len(ids) and ids[n + 1] == end_id and run[-1] == end_id:
            run = run[:-1]
        out.extend(run)
    return out


def image_offsets(ids: Sequence[int], image_id: int, start_id: int) -> list[tuple[int, int]]:
    """(first, last) index of each run of `image_id` that follows `start_id`: where each image's features go."""
    offsets, at = [], 0
    while at < len(ids):
        if ids[at] == image_id and at and ids[at - 1] == start_id:
            end = at
            while end + 1 < len(ids) and ids[end + 1] == image_id:
                end += 1
            offsets.append((at, end))
            at = end + 1
        else:
            at += 1
    return offsets


def tile_ranges(offsets: Sequence[tuple[int, int]], tokens_per_tile: int) -> list[tuple[int, int]] | None:
    """Each image's [start, end) rows in a request's stacked tiles, from where its tokens are ((first, last)
    index of each image's run, in order; `tokens_per_tile` tokens a tile). None when a run is not whole tiles."""
    ranges, at = [], 0
    for first, last in offsets:
        tiles, rest = divmod(last - first + 1, tokens_per_tile)
        if rest or not tiles:
            return None
        ranges.append((at, at + tiles))
        at += tiles
    return ranges
