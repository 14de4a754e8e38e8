"""Nemotron-Nano-VL (Holotron-12B) for SGLang: its processor, with each image's tokens at that image's own
`<image>` placeholder and a prompt's token ids kept as sent (see the package docstring). Imported by SGLang,
never by surfer."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from sglang.srt.managers.schedule_batch import Modality
from sglang.srt.models.nano_nemotron_vl import NemotronH_Nano_VL_V2
from sglang.srt.multimodal.processors.nano_nemotron_vl import NanoNemotronVLImageProcessor

from surfer.models.sglang_processors import expand_images, image_offsets, tile_ranges

logger = logging.getLogger(__name__)


class SurferNanoNemotronVLProcessor(NanoNemotronVLImageProcessor):
    models = [NemotronH_Nano_VL_V2]

    async def process_mm_data_async(self, image_data: Any, audio_data: Any, input_text: Any, request_obj: Any, **kwargs: Any) -> Any:
        if not image_data or getattr(request_obj, "video_data", None) or audio_data or self.dynamic_resolution:
            return await super().process_mm_data_async(image_data, audio_data, input_text, request_obj, **kwargs)
        if isinstance(input_text, list):  # token ids: the processor reads text, the ids are kept
            ids = [int(i) for i in input_text]
            text = self.tokenizer.decode(ids, skip_special_tokens=False)
        else:
            text = input_text
            ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
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
