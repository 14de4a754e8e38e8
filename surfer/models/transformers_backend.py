"""In-process transformers behind the `ModelBackend` interface (extra:
`transformers`; the Mamba CUDA kernels are the separate extra `kernels`).

    backend = TransformersBackend("path/or/hub-id", trust_remote_code=True)
    agent = Agent(backend=backend, profile="holotron")

Loads `AutoProcessor`/`AutoTokenizer` and `AutoModelForImageTextToText` (a
model with a vision tower) or `AutoModelForCausalLM` (hybrid `nemotron_h`
and other language models). Text-only models get the images dropped, with a
warning. transformers has no grammar-constrained decoding, so the role's
schema goes into the prompt and malformed output is left to the roles'
retry-with-feedback. For hybrid Mamba models, whether the mamba-ssm /
causal-conv1d kernels are importable decides the path; it is logged once.
Generation runs in a worker thread, one call at a time. With token capture on
(`check_tokens`, which `record_tokens` calls), each completion carries its
prompt and generated ids and each generated id's log-probability under the
distribution it was sampled from (the processed scores: temperature applied).
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import logging
import threading
import time
from typing import Any

from surfer.core.errors import ConfigError

from .backend import Completion, ImagePart, ModelBackend, ModelRequest, TextPart, Tokens, Usage, run_exclusive
from .http import _schema_in_prompt

log = logging.getLogger("surfer.models.transformers")
INSTALL = "the in-process transformers backend needs torch and transformers: pip install 'surfer-agent[transformers]'"
HYBRID_TYPES = frozenset({"nemotron_h", "mamba2", "mamba", "jamba", "bamba", "zamba2", "falcon_h1", "granitemoehybrid"})
_logged: set[str] = set()


def mamba_kernels() -> dict[str, bool]:
    """Which optional Mamba CUDA kernel packages are importable."""
    return {name: importlib.util.find_spec(name) is not None for name in ("mamba_ssm", "causal_conv1d")}


def mamba_path(device: str) -> str:
    kernels = mamba_kernels()
    if all(kernels.values()) and device.startswith("cuda"):
        return "CUDA kernels (mamba-ssm + causal-conv1d)"
    missing = [k for k, ok in kernels.items() if not ok]
    why = f"{', '.join(missing)} not installed" if missing else f"device {device} is not CUDA"
    return f"pure-PyTorch fallback ({why}; correct but much slower — pip install 'surfer-agent[kernels]' on a GPU)"


def chat_messages(request: ModelRequest, *, multimodal: bool) -> tuple[list[dict[str, Any]], int]:
    """Messages for the chat template, and how many images were dropped
    (text-only model). Images stay bytes here; `_open_images` decodes them."""
    out: list[dict[str, Any]] = []
    dropped = 0
    for message in request.messages:
        if multimodal:
            parts = [{"type": "image", "image": p.data} if isinstance(p, ImagePart) else {"type": "text", "text": p.text}
                     for p in message.content]
            out.append({"role": message.role, "content": parts})
        else:
            dropped += message.image_count
            out.append({"role": message.role, "content": "".join(p.text for p in message.content if isinstance(p, TextPart))})
    if request.schema is not None:
        out = _schema_in_prompt(out, request.schema)
    return out, dropped


def _open_images(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from PIL import Image

    for message in messages:
        if isinstance(message["content"], list):
            for part in message["content"]:
                if part.get("type") == "image" and isinstance(part["image"], bytes):
                    part["image"] = Image.open(io.BytesIO(part["image"])).convert("RGB")
    return messages


def _stop_when(stop: threading.Event) -> Any:
    """Stopping criteria that end generation once `stop` is set (a cancelled call)."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StopWhenSet(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            return torch.full((input_ids.shape[0],), stop.is_set(), dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([StopWhenSet()])


class TransformersBackend(ModelBackend):
    def __init__(
        self, model: str, *, trust_remote_code: bool = False, device: str | None = None, dtype: str = "auto",
        max_new_tokens: int = 1024,
    ) -> None:
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError:
            raise ConfigError(INSTALL) from None
        self.model_id = model
        self.trust_remote_code = trust_remote_code
        self.device = device
        self.dtype = dtype
        self.max_new_tokens = max_new_tokens
        self.multimodal = False
        self.hybrid = False
        self.path = ""
        self.dropped_images = 0
        self._model: Any = None
        self._processor: Any = None
        self._lock = asyncio.Lock()
        self.record_tokens = False

    @property
    def label(self) -> str:
        return f"{self.model_id} (in-process transformers)"

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        from transformers import (
            AutoConfig,
            AutoModelForCausalLM,
            AutoModelForImageTextToText,
            AutoProcessor,
            AutoTokenizer,
        )

        remote = {"trust_remote_code": self.trust_remote_code}
        try:
            config = AutoConfig.from_pretrained(self.model_id, **remote)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load a model config from {self.model_id!r}: {exc}") from None
        self.device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.multimodal = getattr(config, "vision_config", None) is not None
        self.hybrid = config.model_type in HYBRID_TYPES or "nemotron_h" in str(getattr(config, "text_config", ""))
        if self.multimodal:
            self._processor = AutoProcessor.from_pretrained(self.model_id, **remote)
            model_class = AutoModelForImageTextToText
        else:
            self._processor = AutoTokenizer.from_pretrained(self.model_id, **remote)
            model_class = AutoModelForCausalLM
        self._model = model_class.from_pretrained(self.model_id, dtype=self.dtype, **remote).to(self.device).eval()
        self.path = mamba_path(self.device) if self.hybrid else "standard attention layers"
        key = f"{self.model_id}@{self.device}"
        if key not in _logged:
            _logged.add(key)
            log.info("loaded %s (%s, %s via %s) on %s; Mamba path: %s", self.model_id, config.model_type,
                     type(self._model).__name__, model_class.__name__, self.device, self.path)

    async def check(self) -> None:
        async with self._lock:
            await asyncio.to_thread(self._load)

    async def check_tokens(self) -> None:
        self.record_tokens = True

    def _generate(self, request: ModelRequest, stop: threading.Event | None = None) -> tuple[str, Usage, Tokens | None]:
        import torch

        self._load()
        messages, dropped = chat_messages(request, multimodal=self.multimodal)
        if dropped:
            if not self.dropped_images:
                log.warning("%s is a text-only model: dropping the images of its requests", self.model_id)
            self.dropped_images += dropped
        inputs = self._processor.apply_chat_template(
            _open_images(messages), add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt",
        ).to(self.device)
        limit = min(request.max_tokens or self.max_new_tokens, self.max_new_tokens)
        sample = bool(request.temperature)
        options: dict[str, Any] = {"max_new_tokens": limit, "do_sample": sample}
        if sample:
            options["temperature"] = request.temperature
        if stop is not None:
            options["stopping_criteria"] = _stop_when(stop)
        if self.record_tokens:
            options.update(return_dict_in_generate=True, output_scores=True)
        with torch.inference_mode():
            output = self._model.generate(**inputs, **options)
            sequences = output.sequences if self.record_tokens else output
            prompt_len = inputs["input_ids"].shape[-1]
            new_tokens = sequences[0][prompt_len:]
            tokens = None
            if self.record_tokens:
                scores = self._model.compute_transition_scores(sequences, output.scores, normalize_logits=True)[0]
                tokens = Tokens(
                    prompt_ids=tuple(inputs["input_ids"][0].tolist()), completion_ids=tuple(new_tokens.tolist()),
                    logprobs=tuple(float(x) for x in scores.tolist()),
                    finish_reason="length" if new_tokens.shape[-1] >= limit else "stop", policy=self.model_id,
                    sampling={k: v for k, v in options.items() if k in ("max_new_tokens", "do_sample", "temperature")},
                )
        tokenizer = getattr(self._processor, "tokenizer", self._processor)
        text = tokenizer.decode(new_tokens, skip_special_tokens=True)
        return text, Usage(int(prompt_len), int(new_tokens.shape[-1])), tokens

    async def complete(self, request: ModelRequest) -> Completion:
        started = time.perf_counter()
        stop = threading.Event()
        text, usage, tokens = await run_exclusive(self._lock, self._generate, request, stop, on_cancel=stop.set)
        return Completion(text=text, usage=usage, seconds=time.perf_counter() - started, model=self.model_id,
                          structured="prompt" if request.schema is not None else "none", tokens=tokens)
