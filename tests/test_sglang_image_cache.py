"""Holotron's SGLang processor processes each screenshot once per tokenizer worker and names it by its data
(surfer/models/sglang_processors/image_cache.py), with the output SGLang's processing gives."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import enum
import importlib
import sys
import types
from typing import Any

import pytest

from surfer.models.sglang_processors import expand_images, image_offsets, place_runs
from surfer.models.sglang_processors.image_cache import (
    CACHE_ENV, DEFAULT_CACHE_GIB, ProcessedImages, cache_bytes, content_hash, rendered_runs, source_key,
)

IMAGE, START, END = 7, 5, 6  # <image>, <img>, </img> (ids of a toy vocabulary)


def test_an_image_run_rendered_from_its_tiles_is_what_sglangs_processor_wrote() -> None:
    ids = [1, 2, IMAGE, 3, 4, IMAGE, 8]
    # SGLang 0.5.15: every image's tokens at the first placeholder (2 tiles, then 1; 4 tokens a tile)
    processed = [1, 2, START, *[IMAGE] * 8, END, START, *[IMAGE] * 4, END, 3, 4, IMAGE, 8]
    runs = rendered_runs([2, 1], 4, IMAGE, START, END)
    assert place_runs(ids, runs, IMAGE, START, END) == expand_images(ids, processed, IMAGE, START, END)
    bracketed = [1, START, IMAGE, END, 3, IMAGE]
    assert place_runs(bracketed, runs, IMAGE, START, END) == expand_images(bracketed, processed, IMAGE, START, END)
    assert place_runs(ids, runs[:1], IMAGE, START, END) is None  # two placeholders, one image


def test_the_cache_holds_the_most_recently_used_images_within_its_bytes() -> None:
    cache = ProcessedImages(100)
    for name in "abc":
        cache.put(name.encode(), name, 40)  # a and b fit; c pushes a out
    assert cache.get(b"a") is None and cache.get(b"b") == "b" and cache.held == 80
    cache.put(b"d", "d", 40)  # b was used after c: c goes
    assert cache.get(b"c") is None and cache.get(b"b") == "b" and cache.get(b"d") == "d"
    cache.put(b"big", "big", 101)  # larger than the bound: not kept, nothing pushed out
    assert cache.get(b"big") is None and len(cache) == 2
    cache.put(b"b", "b2", 10)  # the same key again: replaced, its bytes counted once
    assert cache.get(b"b") == "b2" and cache.held == 50
    assert (cache.hits, cache.misses) == (4, 3) and "2 images" in cache.stats()
    off = ProcessedImages(0)
    off.put(b"a", "a", 1)
    assert off.get(b"a") is None


def test_an_images_key_and_hash_follow_its_data_only() -> None:
    data = "data:image/png;base64," + "QUJD" * 1000
    again = "".join(["data:image/png;base64,", "QUJD" * 1000])  # equal, another object
    assert source_key(data) == source_key(again) and content_hash(source_key(data)) == content_hash(source_key(again))
    assert source_key(data) != source_key(data[:-1] + "E")
    assert source_key(b"QUJD") != source_key("QUJD")  # raw bytes and a base64 string are other images
    assert source_key(bytearray(b"QUJD")) == source_key(b"QUJD")
    assert source_key({"format": "processor_output"}) is None and source_key(None) is None
    assert 0 <= content_hash(source_key(data)) < 1 << 64


def test_the_cache_bound_comes_from_the_environment() -> None:
    assert cache_bytes({}) == int(DEFAULT_CACHE_GIB * (1 << 30))
    assert cache_bytes({CACHE_ENV: "0.5"}) == 1 << 29 and cache_bytes({CACHE_ENV: "0"}) == 0
    for bad in ("lots", "-1", "nan", "inf"):
        with pytest.raises(ValueError, match=f"{CACHE_ENV}=.*expected a number of GiB"):
            cache_bytes({CACHE_ENV: bad})


# SGLang 0.5.15's Nemotron-VL processor for images, as far as surfer's relies on it (SGLang does not run here):
# images loaded in the io pool, tiled and normalised on the event loop, every image's tokens at the first
# placeholder, one item holding all images' tiles.
class FakeTokenizer:
    """Ids from text: `<image>`, `<img>` and `</img>` are special tokens, every other character its code."""

    special = {"<image>": IMAGE, "<img>": START, "</img>": END}

    def __call__(self, text: str, add_special_tokens: bool = False, return_tensors: str | None = None) -> Any:
        import torch

        ids, at = [], 0
        while at < len(text):
            token = next((t for t in self.special if text.startswith(t, at)), None)
            ids.append(self.special[token] if token else 1000 + ord(text[at]))
            at += len(token) if token else 1
        return {"input_ids": torch.tensor([ids]) if return_tensors == "pt" else ids}

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        names = {v: k for k, v in self.special.items()}
        return "".join(names.get(i) or chr(i - 1000) for i in ids)


def fake_sglang(processed: list[str]) -> dict[str, types.ModuleType]:
    import torch

    class Modality(enum.Enum):
        IMAGE = 1
        VIDEO = 2
        AUDIO = 3

    @dataclasses.dataclass
    class MultimodalDataItem:
        modality: Modality
        hash: int | None = None
        pad_value: int | None = None
        offsets: list | None = None
        feature: Any = None
        model_specific_data: dict = dataclasses.field(default_factory=dict)

    @dataclasses.dataclass
    class MultimodalProcessorOutput:
        mm_items: list
        input_ids: list | None = None
        im_token_id: int | None = None
        im_start_id: int | None = None
        im_end_id: int | None = None
        video_token_id: int | None = None

    class NemotronH_Nano_VL_V2:  # noqa: N801 (SGLang's name)
        pass

    def non_evs_items(*, image: Any, image_offsets: list, video: Any, video_offsets: list, input_ids_list: list) -> list:
        return [MultimodalDataItem(modality=Modality.IMAGE, feature=image, offsets=image_offsets)] if image is not None else []

    class Processor:
        num_image_token, dynamic_resolution = 4, False

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.tokenizer = FakeTokenizer()
            self.mm_tokens = types.SimpleNamespace(image_token_id=IMAGE)
            self.img_start_token_id, self.img_end_token_id = START, END
            self.evs = types.SimpleNamespace(static_size_data_items=lambda **kw: (non_evs_items, []))
            self.io_executor = concurrent.futures.ThreadPoolExecutor(2)

        @classmethod
        def _load_single_item(cls, data: str, modality: Any, frames: Any, rate: Any, discard_alpha: bool) -> str:
            return data.removeprefix("data:")

        def preprocess_image(self, image: str) -> Any:  # "<seed>x<tiles>": that many tiles of that seed's values
            processed.append(image)
            seed, tiles = (int(n) for n in image.split("x"))
            return torch.arange(tiles * 12, dtype=torch.float32).reshape(tiles, 3, 2, 2).add(seed).to(torch.bfloat16)

        async def process_mm_data_async(self, image_data: list, audio_data: Any, input_text: str, request_obj: Any,
                                        **kwargs: Any) -> Any:
            loaded = [self.io_executor.submit(self._load_single_item, d, Modality.IMAGE, None, None, True) for d in image_data]
            tiles = [self.preprocess_image(await asyncio.wrap_future(f)) for f in loaded]
            rendered = "".join(f"<img>{'<image>' * self.num_image_token * t.shape[0]}</img>" for t in tiles)
            ids = self.tokenizer(input_text.replace("<image>", rendered, 1))["input_ids"]
            offsets = [o for o in image_offsets(ids, IMAGE, START)]
            return MultimodalProcessorOutput(mm_items=non_evs_items(image=torch.cat(tiles), image_offsets=offsets, video=None,
                                                                    video_offsets=[], input_ids_list=ids),
                                             input_ids=ids, im_token_id=IMAGE, im_start_id=START, im_end_id=END)

    modules = {}
    for name, members in {
        "sglang": {}, "sglang.srt": {}, "sglang.srt.managers": {}, "sglang.srt.models": {},
        "sglang.srt.multimodal": {}, "sglang.srt.multimodal.processors": {},
        "sglang.srt.managers.schedule_batch": {"Modality": Modality, "MultimodalDataItem": MultimodalDataItem,
                                               "MultimodalProcessorOutput": MultimodalProcessorOutput},
        "sglang.srt.models.nano_nemotron_vl": {"NemotronH_Nano_VL_V2": NemotronH_Nano_VL_V2},
        "sglang.srt.multimodal.processors.nano_nemotron_vl": {"NanoNemotronVLImageProcessor": Processor},
    }.items():
        module = types.ModuleType(name)
        module.__dict__.update(members)
        modules[name] = module
    return modules


@pytest.fixture
def holotron_processor(monkeypatch):  # type: ignore[no-untyped-def]
    """(a new worker's processor, the images it processed) with SGLang's side faked as above."""
    pytest.importorskip("torch")
    processed: list[str] = []
    for name, module in fake_sglang(processed).items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delitem(sys.modules, "surfer.models.sglang_processors.nemotron_vl", raising=False)
    nemotron_vl = importlib.import_module("surfer.models.sglang_processors.nemotron_vl")
    yield (lambda: nemotron_vl.SurferNanoNemotronVLProcessor()), processed
    sys.modules.pop("surfer.models.sglang_processors.nemotron_vl", None)


def _request(images: int) -> tuple[list[int], list[str]]:
    ids = FakeTokenizer()("System.")["input_ids"]
    for n in range(images):
        ids += FakeTokenizer()(f"User<image>Step {n}.Assistant{{}}")["input_ids"]
    return ids, [f"data:{100 * n}x{1 + n % 3}" for n in range(images)]


def test_a_workers_processor_processes_only_the_new_screenshot_with_sglangs_output(holotron_processor, monkeypatch) -> None:
    import torch

    new_worker, processed = holotron_processor
    monkeypatch.setenv(CACHE_ENV, "1")
    worker = new_worker()
    request = types.SimpleNamespace(video_data=None)
    for step in range(1, 5):  # a conversation: step k carries k screenshots
        ids, images = _request(step)
        before = len(processed)
        cached = asyncio.run(worker.process_mm_data_async(list(images), None, list(ids), request))
        assert processed[before:] == [images[-1].removeprefix("data:")]  # only the new one
        uncached = asyncio.run(worker.uncached_output(list(ids), FakeTokenizer().decode(ids), list(images), None, request))
        assert cached.input_ids == uncached.input_ids
        assert [i.offsets for i in cached.mm_items] == [i.offsets for i in uncached.mm_items]
        assert len(cached.mm_items) == step and all(torch.equal(a.feature, b.feature) and a.feature.dtype == b.feature.dtype
                                                    for a, b in zip(cached.mm_items, uncached.mm_items))
        assert [i.hash for i in cached.mm_items] == [content_hash(source_key(d)) for d in images]
        assert all(i.hash is None for i in uncached.mm_items)  # SGLang hashes those tensors itself
    # another worker names the same screenshots the same (the prefix cache's key), and a new one otherwise
    other = asyncio.run(new_worker().process_mm_data_async(images, None, ids, request))
    assert [i.hash for i in other.mm_items] == [i.hash for i in cached.mm_items]
    assert len(set(i.hash for i in other.mm_items)) == len(images)
    # the default keeps nothing: every screenshot processed again, the same output
    monkeypatch.delenv(CACHE_ENV)
    before = len(processed)
    again = asyncio.run(new_worker().process_mm_data_async(images, None, ids, request))
    assert len(processed) - before == len(images) and again.input_ids == cached.input_ids
    assert [i.hash for i in again.mm_items] == [i.hash for i in cached.mm_items]


def test_a_request_the_cache_cannot_key_is_processed_as_sglang_does(holotron_processor, caplog) -> None:
    new_worker, processed = holotron_processor
    worker, request = new_worker(), types.SimpleNamespace(video_data=None)
    ids, images = _request(2)
    out = asyncio.run(worker.process_mm_data_async(images[:1], None, ids, request))  # two placeholders, one image
    assert out.input_ids.count(IMAGE) == 4 + 1 and all(i.hash is None for i in out.mm_items)
    assert "2 image placeholder(s) for 1 image(s)" in caplog.text
    assert len(worker.processed) == 0


def test_serve_says_what_the_screenshot_cache_holds_and_refuses_a_bad_bound(monkeypatch) -> None:
    from surfer.apps.serve.sglang import SglangCapabilities, build_command
    from surfer.core.errors import ConfigError
    from surfer.models.profiles import get_profile

    caps = SglangCapabilities.from_table("0.5.15")
    holotron = get_profile("holotron")
    monkeypatch.delenv(CACHE_ENV, raising=False)
    plan = build_command("Hcompany/Holotron-12B", holotron, caps)
    assert CACHE_ENV not in plan.env and DEFAULT_CACHE_GIB == 0  # the processor's default: no cache
    assert not any("tokenizer worker(s) keeps" in n for n in plan.notes)
    monkeypatch.setenv(CACHE_ENV, "2")
    plan = build_command("Hcompany/Holotron-12B", holotron, caps)
    assert any("6 tokenizer worker(s) keeps up to 2 GiB" in n and "12 GiB of host memory" in n for n in plan.notes)
    monkeypatch.setenv(CACHE_ENV, "0.5")
    plan = build_command("Hcompany/Holotron-12B", holotron, caps, extra_args=("--tokenizer-worker-num=4",))
    assert plan.env[CACHE_ENV] == "0.5" and any("4 tokenizer worker(s) keeps up to 0.5 GiB" in n for n in plan.notes)
    assert CACHE_ENV not in build_command("Hcompany/Holo2-8B", get_profile("holo2"), caps).env  # Qwen-VL: SGLang's own
    monkeypatch.setenv(CACHE_ENV, "lots")
    with pytest.raises(ConfigError, match=f"{CACHE_ENV}='lots': expected a number of GiB"):
        build_command("Hcompany/Holotron-12B", holotron, caps)
