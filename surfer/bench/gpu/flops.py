"""FLOPs per agent step against the FLOP/s the GPU achieved, per `surfer bench gpu run` row.

Why one model gives fewer agent steps/s than another on the same GPU: the work an agent step asks
for (LLM prefill of the prompt tokens not served from the prefix cache, decode of the reply, the
vision encoder on the step's new screenshot) times the steps/s measured is the FLOP/s the GPU
delivered; against the peak it says how far the serving is from compute-bound.

Counting: 2 FLOPs per multiply-add; weights of the matrices only (biases, norms, rotary, the
SSM's A/D/dt and activations are ignored, all under 1 %). Per token, an LLM costs
`2 × linear_params`, plus per attention layer `4 × q_dim × context` (scores Q·Kᵀ and values
A·V, 2 × q_dim × context each, whatever the KV heads), plus the Mamba-2 state term.
"""

from __future__ import annotations

import functools
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from surfer.core.errors import ConfigError

H100_BF16_DENSE_TFLOPS = 989.4  # H100 SXM dense BF16; the H200 has the same compute
VIT_SIZES = {"vit_huge_patch16_224": (32, 1280, 5120)}  # timm name: (layers, width, MLP width)


@dataclass(frozen=True)
class VisionCosts:
    """A ViT plus its projector, per image: `patches = image_tokens × patches_per_token`, and

    vision_flops = 2 × encoder_params × patches                  (patch embedding, QKV/out, MLP)
                 + 4 × layers × width × patches × span            (attention over `span` patches)
                 + 2 × projector_params × image_tokens            (projector / mergers)

    where span is `attention_span` (a tile) or, when None, all the image's patches (quadratic)."""

    encoder_params: int
    layers: int
    width: int
    patches_per_token: int
    attention_span: int | None
    projector_params: int

    def flops(self, image_tokens: int) -> float:
        patches = image_tokens * self.patches_per_token
        span = self.attention_span or patches
        return (2 * self.encoder_params * patches + 4 * self.layers * self.width * patches * span
                + 2 * self.projector_params * image_tokens)


@dataclass(frozen=True)
class ModelCosts:
    """What a forward pass costs, read from a config.json (see `model_costs`)."""

    name: str
    linear_params: int  # LLM weights every token goes through (embeddings and lm_head excluded)
    lm_head_params: int
    embedding_params: int
    attention_layers: int
    q_dim: int  # query heads × head_dim
    mamba_layers: int
    mamba_state_flops_per_token: float
    vision: VisionCosts

    def vision_flops(self, image_tokens: int) -> float:
        """Encoder + projector FLOPs for one image the LLM sees as `image_tokens` tokens."""
        return self.vision.flops(image_tokens)

    def vision_flops_per_image_token(self, image_tokens: int) -> float:
        return self.vision.flops(image_tokens) / image_tokens


def _vit_block(width: int, mlp: int) -> int:
    """QKV (3 w²) + output projection (w²) + a 2-matrix MLP."""
    return 4 * width * width + 2 * width * mlp


def _nemotron_vl(config: dict[str, Any]) -> ModelCosts:
    """NemotronH_Nano_VL_V2 (Holotron). Per `hybrid_override_pattern` character:
    M  Mamba-2: in_proj hidden × (2·d_inner + 2·groups·d_state + heads), out_proj d_inner × hidden,
       depthwise conv (d_inner + 2·groups·d_state) × conv_kernel; d_inner = mamba heads × head_dim.
       State term ≈ 2 × 3 × d_inner × d_state FLOPs per token (state decay + B·x update + C·h read-out).
    -  MLP, relu²: 2 × hidden × intermediate.     *  attention: hidden × (2·q_dim + 2·kv_dim).
    Vision: RADIO ViT over 512-px tiles of 1024 patches (per-tile attention; its ~8 CLS/register
    tokens ignored), pixel shuffle by `downsample_ratio` (4 patches per token), projector
    vit_hidden·4 → projector_hidden → hidden."""
    llm = config["llm_config"]
    hidden, pattern = llm["hidden_size"], llm["hybrid_override_pattern"]
    heads, head_dim = llm["num_attention_heads"], llm.get("head_dim") or hidden // llm["num_attention_heads"]
    q_dim, kv_dim = heads * head_dim, llm["num_key_value_heads"] * head_dim
    d_inner, d_state, groups = llm["mamba_num_heads"] * llm["mamba_head_dim"], llm["ssm_state_size"], llm["n_groups"]
    conv_dim = d_inner + 2 * groups * d_state
    mamba = hidden * (conv_dim + d_inner + llm["mamba_num_heads"]) + d_inner * hidden + conv_dim * llm["conv_kernel"]
    per_kind = {"M": mamba, "-": 2 * hidden * llm["intermediate_size"], "*": hidden * (2 * q_dim + 2 * kv_dim)}
    unknown = set(pattern) - set(per_kind)
    if unknown:
        raise ConfigError(f"hybrid_override_pattern has unknown layer kinds {sorted(unknown)}; known: M, -, *")
    vit = config["vision_config"]["args"]["model"]
    if vit not in VIT_SIZES:
        raise ConfigError(f"unknown vision tower {vit!r}; known: {', '.join(VIT_SIZES)}")
    layers, width, mlp = VIT_SIZES[vit]
    patch, shuffle = config["patch_size"], round(1 / config["downsample_ratio"] ** 2)
    vision = VisionCosts(
        encoder_params=layers * _vit_block(width, mlp) + 3 * patch * patch * width,
        layers=layers, width=width, patches_per_token=shuffle,
        attention_span=(config["force_image_size"] // patch) ** 2,
        projector_params=(config["vit_hidden_size"] * shuffle + hidden) * config["projector_hidden_size"],
    )
    vocab = llm["vocab_size"] * hidden
    return ModelCosts(
        name="holotron", linear_params=sum(per_kind[c] for c in pattern), lm_head_params=vocab,
        embedding_params=vocab, attention_layers=pattern.count("*"), q_dim=q_dim,
        mamba_layers=pattern.count("M"), mamba_state_flops_per_token=pattern.count("M") * 2 * 3 * d_inner * d_state,
        vision=vision,
    )


def _qwen3_vl(config: dict[str, Any]) -> ModelCosts:
    """Qwen3VLForConditionalGeneration (Holo2). Text layer: attention hidden × (2·q_dim + 2·kv_dim),
    SwiGLU MLP 3 × hidden × intermediate. Vision: patch embedding (channels × temporal × patch²
    × hidden), `depth` ViT blocks with a 2-matrix GELU MLP and attention over the whole image's
    patches, then 1 + len(deepstack_visual_indexes) mergers over merge² patches per token, each
    (hidden·merge²)² + hidden·merge² × out_hidden."""
    text, vis = config["text_config"], config["vision_config"]
    hidden, head_dim = text["hidden_size"], text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
    q_dim, kv_dim = text["num_attention_heads"] * head_dim, text["num_key_value_heads"] * head_dim
    layer = hidden * (2 * q_dim + 2 * kv_dim) + 3 * hidden * text["intermediate_size"]
    width, merge = vis["hidden_size"], vis["spatial_merge_size"] ** 2
    merged = width * merge
    vision = VisionCosts(
        encoder_params=vis["depth"] * _vit_block(width, vis["intermediate_size"])
        + vis["in_channels"] * vis["temporal_patch_size"] * vis["patch_size"] ** 2 * width,
        layers=vis["depth"], width=width, patches_per_token=merge, attention_span=None,
        projector_params=(1 + len(vis.get("deepstack_visual_indexes", [])))
        * (merged * merged + merged * vis["out_hidden_size"]),
    )
    vocab = text["vocab_size"] * hidden
    return ModelCosts(
        name="holo2", linear_params=text["num_hidden_layers"] * layer, lm_head_params=vocab, embedding_params=vocab,
        attention_layers=text["num_hidden_layers"], q_dim=q_dim, mamba_layers=0, mamba_state_flops_per_token=0.0,
        vision=vision,
    )


READERS = {"NemotronH_Nano_VL_V2": _nemotron_vl, "Qwen3VLForConditionalGeneration": _qwen3_vl,
           "qwen3_vl": _qwen3_vl}


def model_costs(config: dict[str, Any]) -> ModelCosts:
    """Read a Holotron (NemotronH_Nano_VL_V2) or Holo2 (Qwen3VLForConditionalGeneration) config.json."""
    for key in [*(config.get("architectures") or []), config.get("model_type")]:
        if key in READERS:
            return READERS[key](config)
    raise ConfigError(f"no FLOPs model for architectures={config.get('architectures')!r} "
                      f"model_type={config.get('model_type')!r}; known: NemotronH_Nano_VL_V2, "
                      "Qwen3VLForConditionalGeneration")


@functools.lru_cache(maxsize=None)
def costs_for_shape(shape: str) -> ModelCosts:
    """`model_costs` of the config `surfer bench gpu make-model SHAPE` writes (built in a temporary
    directory: the config carries token ids of the tokenizer it trains)."""
    from surfer.bench.gpu.models import make_model

    with tempfile.TemporaryDirectory() as tmp:
        make_model(shape, Path(tmp) / shape)
        return model_costs(json.loads((Path(tmp) / shape / "config.json").read_text()))


def prefill_flops_per_token(costs: ModelCosts, context: float) -> float:
    """2 × linear_params + 4 × attention_layers × q_dim × context + the Mamba state term."""
    attention = 4 * costs.attention_layers * costs.q_dim * context
    return 2 * costs.linear_params + attention + costs.mamba_state_flops_per_token


def decode_flops_per_token(costs: ModelCosts, context: float) -> float:
    """The prefill cost plus 2 × lm_head_params (logits over the vocabulary)."""
    return prefill_flops_per_token(costs, context) + 2 * costs.lm_head_params


def screenshot_tokens(shape: str, row: dict[str, Any]) -> int:
    """Vision tokens per screenshot: the row's image budget, else a 1280×800 screenshot as the profile
    sends it, less the 2 markers around an image (they do not go through the vision encoder)."""
    budget = (row.get("variant") or {}).get("image_tokens_per_image")
    if budget:
        return int(budget)
    from surfer.core.coordinates import Size
    from surfer.models.profiles import get_profile

    image = get_profile(shape).image
    return image.image_tokens(image.target_size(Size(1280, 800))) - 2


def step_flops(costs: ModelCosts, row: dict[str, Any], image_tokens: int,
               peak_tflops: float = H100_BF16_DENSE_TFLOPS) -> dict[str, Any] | None:
    """TFLOP per agent step of one benchmark row; None when the row has no steps/s.

    Token counts per step from the steady window when it has them, else from the whole window:
    computed = prompt_tokens_per_s × (1 − server prefix-cache hit rate) / steps_per_s and
    generated = completion_tokens_per_s / steps_per_s. Attention context: the row's prompt tokens
    per call. Vision: the encoder runs once per step on its one new screenshot (a lower bound
    where an image is encoded again, e.g. after an encoder-cache miss)."""
    whole, steady = row["surfer"], row["surfer"].get("steady") or {}
    if steady.get("steps_per_s") and steady.get("computed_prompt_tokens_per_step") is not None:
        source, rate = "steady", steady["steps_per_s"]
        computed, generated = steady["computed_prompt_tokens_per_step"], steady.get("generation_tokens_per_step") or 0.0
    elif whole.get("steps_per_s"):
        source, rate = "whole window", whole["steps_per_s"]
        hit = (row.get("surfer_server") or {}).get("prefix_cache_hit_rate") or 0.0
        computed = whole["prompt_tokens_per_s"] * (1 - hit) / rate
        generated = whole["completion_tokens_per_s"] / rate
    else:
        return None
    context = whole.get("prompt_tokens_per_call") or 0.0
    prefill = computed * prefill_flops_per_token(costs, context) / 1e12
    decode = generated * decode_flops_per_token(costs, context) / 1e12
    vision = costs.vision_flops(image_tokens) / 1e12
    total = prefill + decode + vision
    return {"from": source, "steps_per_s": rate, "computed_tokens_per_step": computed,
            "generated_tokens_per_step": generated, "context_tokens": context, "image_tokens": image_tokens,
            "prefill": prefill, "decode": decode, "vision": vision, "total": total,
            "achieved_tflops": total * rate, "peak_share": total * rate / peak_tflops}


def flops_table(paths: list[Path], peak: float = H100_BF16_DENSE_TFLOPS) -> tuple[list[dict[str, Any]], str]:
    """One dict per row (with steps/s) of every `surfer bench gpu run` JSON file, and a markdown table."""
    if not peak > 0:
        raise ValueError(f"--peak must be the GPU's TFLOP/s, more than 0 (got {peak:g})")
    rows: list[dict[str, Any]] = []
    for path in paths:
        results = json.loads(Path(path).read_text())
        if not isinstance(results, dict) or not isinstance(results.get("models"), list):
            raise ValueError(f"{path} is not a `surfer bench gpu run` result (it has no \"models\" list)")
        for model in results["models"]:
            costs = costs_for_shape(model["name"])
            for row in model["levels"]:
                figures = step_flops(costs, row, screenshot_tokens(model["name"], row), peak)
                if figures:
                    rows.append({"file": str(path), "model": model["name"],
                                 "variant": (row.get("variant") or {}).get("name", row["name"]),
                                 "concurrency": row["concurrency"], **figures})
    lines = ["| model | variant | c | from | computed tok/step | gen tok/step"
             " | TFLOP/step (LLM prefill + decode + vision) | steps/s | achieved TFLOP/s | share of peak |",
             "|" + "---|" * 10]
    lines += [f"| {r['model']} | {r['variant']} | {r['concurrency']} | {r['from']}"
              f" | {r['computed_tokens_per_step']:,.0f} | {r['generated_tokens_per_step']:,.0f}"
              f" | {r['total']:.1f} ({r['prefill']:.1f} + {r['decode']:.1f} + {r['vision']:.1f})"
              f" | {r['steps_per_s']:.2f} | {r['achieved_tflops']:.0f} | {r['peak_share']:.1%} |" for r in rows]
    return rows, "\n".join(lines)
