"""Nemotron-Nano-VL (Holotron-12B) for SGLang: its processor, with each image's tokens at that image's own
`<image>` placeholder and a prompt's token ids kept as sent (see the package docstring). Imported by SGLang,
never by surfer."""

from __future__ import annotations

import logging
from typing import Any

from sglang.srt.managers.schedule_batch import Modality
from sglang.srt.models.nano_nemotron_vl import NemotronH_Nano_VL_V2
from sglang.srt.multimodal.processors.nano_nemotron_vl import NanoNemotronVLImageProcessor

from surfer.models.sglang_processors import expand_images, image_offsets

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
        return out
