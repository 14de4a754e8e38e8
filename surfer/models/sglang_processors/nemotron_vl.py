"""Nemotron-Nano-VL (Holotron-12B) for SGLang: its processor, with each image's tokens at that image's own
`<image>` placeholder and a prompt's token ids kept as sent (see the package docstring), its screenshots processed
in the worker's thread pool and each hashed from its data, and kept per worker where asked (image_cache.py).
Imported by SGLang, never by surfer."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import os
from typing import Any

from sglang.srt.managers.schedule_batch import Modality, MultimodalProcessorOutput
from sglang.srt.models.nano_nemotron_vl import NemotronH_Nano_VL_V2
from sglang.srt.multimodal.processors.nano_nemotron_vl import NanoNemotronVLImageProcessor

from surfer.models.sglang_processors import expand_images, image_offsets, place_runs, tile_ranges
from surfer.models.sglang_processors.image_cache import (
    CACHE_ENV, DEFAULT_CACHE_GIB, ProcessedImages, cache_bytes, content_hash, rendered_runs, source_key,
)

logger = logging.getLogger(__name__)
STATS_EVERY = 500  # requests with images between two log lines of the cache's figures


class SurferNanoNemotronVLProcessor(NanoNemotronVLImageProcessor):
    models = [NemotronH_Nano_VL_V2]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        try:
            limit = cache_bytes(os.environ)
        except ValueError as exc:
            logger.warning("surfer: %s; using %s GiB", exc, DEFAULT_CACHE_GIB)
            limit = int(DEFAULT_CACHE_GIB * (1 << 30))
        self.processed = ProcessedImages(limit)
        self.requests = 0
        if limit:
            logger.info("surfer: processed screenshots kept up to %.1f GiB in this tokenizer worker (%s)",
                        limit / (1 << 30), CACHE_ENV)

    async def process_mm_data_async(self, image_data: Any, audio_data: Any, input_text: Any, request_obj: Any, **kwargs: Any) -> Any:
        if not image_data or getattr(request_obj, "video_data", None) or audio_data or self.dynamic_resolution:
            return await super().process_mm_data_async(image_data, audio_data, input_text, request_obj, **kwargs)
        if isinstance(input_text, list):  # token ids: kept (SGLang's processing below reads their text)
            ids = [int(i) for i in input_text]
        else:
            ids = list(self.tokenizer(input_text, add_special_tokens=False)["input_ids"])
        keys = [source_key(data) for data in image_data]
        if None not in keys and ids.count(self.mm_tokens.image_token_id) == len(image_data):
            return await self.cached_output(ids, image_data, keys)
        text = self.tokenizer.decode(ids, skip_special_tokens=False) if isinstance(input_text, list) else input_text
        return await self.uncached_output(ids, text, image_data, audio_data, request_obj, **kwargs)

    async def cached_output(self, ids: list[int], image_data: list[Any], keys: list[bytes]) -> Any:
        """The output `uncached_output` gives for `ids` and `image_data`, with each image's tiles from this
        worker's cache (processed, off the event loop, on a miss) and its item's hash from its data."""
        loop = asyncio.get_running_loop()
        found = {key: self.processed.get(key) for key in keys}
        missing = {key: data for key, data in zip(keys, image_data) if found[key] is None}
        done = await asyncio.gather(*(loop.run_in_executor(self.io_executor, self.process_one, data)
                                      for data in missing.values()))
        for key, tiles in zip(missing, done):
            found[key] = tiles
            self.processed.put(key, tiles, tiles.numel() * tiles.element_size())
        features = [found[key] for key in keys]
        self.requests += 1
        if self.processed.limit and self.requests % STATS_EVERY == 0:
            logger.info("surfer: processed screenshots in worker %d: %s", os.getpid(), self.processed.stats())
        image_id, start, end = self.mm_tokens.image_token_id, self.img_start_token_id, self.img_end_token_id
        runs = rendered_runs([f.shape[0] for f in features], self.num_image_token, image_id, start, end)
        expanded = place_runs(ids, runs, image_id, start, end)
        assert expanded is not None  # the placeholders were counted
        offsets = image_offsets(expanded, image_id, start)
        side = int(math.sqrt(self.num_image_token))
        create, _ = self.evs.static_size_data_items(frames_per_video=[], num_images=1, rows=side, cols=side)
        items = []
        for tiles, offset, key in zip(features, offsets, keys):
            [item] = create(image=tiles, image_offsets=[offset], video=None, video_offsets=[], input_ids_list=expanded)
            item.hash = content_hash(key)  # SGLang hashes no tensor: the prefix cache's key is the data's
            items.append(item)
        return MultimodalProcessorOutput(input_ids=expanded, mm_items=items, im_start_id=start, im_end_id=end,
                                         im_token_id=image_id, video_token_id=image_id)

    def process_one(self, data: Any) -> Any:
        """One image's tiles, as SGLang's processor makes them (loaded in RGB, tiled, normalised)."""
        return self.preprocess_image(self._load_single_item(data, Modality.IMAGE, None, None, True))

    async def uncached_output(self, ids: list[int], text: str, image_data: Any, audio_data: Any, request_obj: Any,
                              **kwargs: Any) -> Any:
        """SGLang's processing of every image of the request, each image's tokens put at its placeholder."""
        out = await super().process_mm_data_async(image_data, audio_data, text, request_obj, **kwargs)
        image_id = self.mm_tokens.image_token_id
        expanded = expand_images(ids, list(out.input_ids), image_id, self.img_start_token_id, self.img_end_token_id)
        if expanded is None:
            logger.warning("surfer: %d image placeholder(s) for %d image(s); the request is processed as SGLang does",
                           ids.count(image_id), len(image_data))
            return out
        offsets = image_offsets(expanded, image_id, self.img_start_token_id)
        taken = 0
        for item in out.mm_items:
            if item.modality == Modality.IMAGE and item.offsets:
                item.offsets = offsets[taken:taken + len(item.offsets)]
                taken += len(item.offsets)
        out.input_ids = expanded
        out.mm_items = one_item_per_image(out.mm_items, self.num_image_token)
        return out


def one_item_per_image(items: list[Any], tokens_per_tile: int) -> list[Any]:
    """`items` with an image item that holds several images split into one item each (its tiles, its offset):
    each image then gets its own hash and pad value, so a request that adds a screenshot keeps the cache key
    of the ones before it."""
    out: list[Any] = []
    for item in items:
        offsets = item.offsets or []
        ranges = tile_ranges(offsets, tokens_per_tile) if item.modality == Modality.IMAGE and len(offsets) > 1 else None
        if ranges is None or item.feature is None or ranges[-1][1] != item.feature.shape[0]:
            out.append(item)
            continue
        grids = item.__dict__.get("thw_grids")  # (EVS items: one grid per image)
        for k, ((start, end), offset) in enumerate(zip(ranges, offsets)):
            more = {"thw_grids": [grids[k]]} if grids is not None and len(grids) == len(offsets) else {}
            out.append(dataclasses.replace(item, feature=item.feature[start:end], offsets=[offset], hash=None,
                                           pad_value=None, model_specific_data=dict(item.model_specific_data), **more))
    return out
