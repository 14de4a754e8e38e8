"""Dummy-weight model directories of the two shapes `surfer bench gpu` serves.

    surfer bench gpu make-model holotron DIR     # NemotronH_Nano_VL_V2 (Holotron-12B's architecture)
    surfer bench gpu make-model holo2 DIR        # Qwen3VLForConditionalGeneration (Holo2-8B's)

Each directory has the public configuration's sizes, a tokenizer built here
(byte-level BPE trained on surfer's own prompts and demo pages, plus the
family's special and image tokens) with a chat template, and what the
family's processor reads. vLLM serves it with `--load-format dummy`: random
weights, exact for speed and memory, meaningless for answers.

Random weights sample tokens almost uniformly, so a JSON string would rarely
close; the vocabulary therefore holds `CLOSERS` tokens that end a string
(`word"`), about one in thirty, which keeps replies to policy-sized lengths
under structured outputs. Serve with `disable_any_whitespace` (the benchmark
does) so that whitespace between JSON tokens cannot run on either.

Holotron's VL configuration is remote code in its model repository (not in
transformers or vLLM); the directory carries its own small
`configuration.py` with the fields vLLM's `nano_nemotron_vl.py` reads.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from surfer.core.errors import ConfigError

SHAPES = ("holotron", "holo2")
BPE_VOCAB = 4800
CLOSERS = 60  # tokens `word"` (see the module docstring)

# Nemotron-Nano-12B-v2 language backbone: 62 layers, 28 Mamba-2 (M), 28 MLP (-), 6 attention (*).
NEMOTRON_PATTERN = "M-M-M-M*-" * 6 + "M-M-M-M-"
NEMOTRON_SPECIAL = ["<unk>", "<s>", "</s>", "<SPECIAL_10>", "<SPECIAL_11>", "<SPECIAL_12>",
                    "<img>", "</img>", "<image>", "<video>", "<think>", "</think>"]
QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                "<|image_pad|>", "<|video_pad|>", "<think>", "</think>"]

# The shape of Nemotron-Nano-v2's chat template (NVIDIA's, as Holotron serves it with reasoning off): a turn is
# `<SPECIAL_11>Role\n` + its text, stripped, + `\n`; an assistant's turn closes with `\n<SPECIAL_12>\n` (the stop id
# between two newlines: the model writes the first, the template the second); the generation prompt ends with an
# empty thinking block that an earlier assistant turn leaves out: its text up to `</think>` is dropped. A
# conversation's last assistant turn is written after the generation prompt (to be continued). An image is
# `<image>` and a newline.
NEMOTRON_TEMPLATE = (
    "{%- set last = namespace(text='') -%}"
    "{%- if messages and messages[-1]['role'] == 'assistant' and messages[-1]['content'] is string -%}"
    "{%- set last.text = messages[-1]['content'].strip() -%}{%- set messages = messages[:-1] -%}{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message['content'] is string -%}{%- set content = message['content'] -%}"
    "{%- else -%}{%- set ns = namespace(text='') -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' -%}{%- set ns.text = ns.text + part['text'] -%}"
    "{%- else -%}{%- set ns.text = ns.text + '<image>\\n' -%}{%- endif -%}"
    "{%- endfor -%}{%- set content = ns.text -%}{%- endif -%}"
    "{%- if message['role'] == 'system' -%}{{ '<SPECIAL_10>System\\n' + content.strip() + '\\n' }}"
    "{%- elif message['role'] == 'user' -%}{{ '<SPECIAL_11>User\\n' + content.strip() + '\\n' }}"
    "{%- else -%}{%- if '</think>' in content -%}{%- set content = content.split('</think>')[-1] -%}{%- endif -%}"
    "{{ '<SPECIAL_11>Assistant\\n' + content.strip() + '\\n<SPECIAL_12>\\n' }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt or last.text -%}{{ '<SPECIAL_11>Assistant\\n<think></think>' + last.text }}{%- endif -%}"
    "{%- if last.text and not add_generation_prompt -%}{{ '\\n<SPECIAL_12>\\n' }}{%- endif -%}"
)
QWEN_TEMPLATE = (
    "{%- for message in messages -%}<|im_start|>{{ message['role'] + '\\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' -%}{{ part['text'] }}"
    "{%- else -%}<|vision_start|><|image_pad|><|vision_end|>{%- endif -%}"
    "{%- endfor -%}{%- endif -%}<|im_end|>{{ '\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant{{ '\\n' }}"
    "{%- if thinking is defined and not thinking -%}<think>{{ '\\n\\n' }}</think>{{ '\\n\\n' }}{%- endif -%}{%- endif -%}"
)

# Remote-code configuration for the Nemotron VL wrapper (what vLLM's nano_nemotron_vl.py reads).
NEMOTRON_CONFIGURATION_PY = '''"""NemotronH_Nano_VL_V2 configuration written by `surfer bench gpu make-model` (dummy weights)."""
from transformers import PretrainedConfig
from transformers.models.nemotron_h import NemotronHConfig


class NemotronH_Nano_VL_V2_Config(PretrainedConfig):
    model_type = "NemotronH_Nano_VL_V2"
    defaults = {
        "force_image_size": 512, "patch_size": 16, "downsample_ratio": 0.5, "template": "nemotron_h_nano",
        "ps_version": "v2", "image_tag_type": "internvl", "projector_hidden_size": 20480, "vit_hidden_size": 1280,
        "use_thumbnail": True, "norm_mean": [0.48145466, 0.4578275, 0.40821073],
        "norm_std": [0.26862954, 0.26130258, 0.27577711],
    }

    def __init__(self, vision_config=None, llm_config=None, **kwargs):
        values = {key: kwargs.pop(key, default) for key, default in self.defaults.items()}
        super().__init__(**kwargs)
        self.vision_config = PretrainedConfig(**(vision_config or {}))
        self.llm_config = llm_config if isinstance(llm_config, NemotronHConfig) else NemotronHConfig(**(llm_config or {}))
        self.text_config = self.llm_config
        for key, value in values.items():
            setattr(self, key, value)

    def to_dict(self):
        out = super().to_dict()
        out["llm_config"] = self.llm_config.to_dict()
        out["vision_config"] = self.vision_config.to_dict()
        out.pop("text_config", None)
        return out
'''


def _corpus() -> Iterator[str]:
    """Text like what surfer sends: its prompt templates, the demo pages, recorded trajectories."""
    surfer = Path(__file__).resolve().parents[2]
    demo = surfer / "apps" / "demo"
    sources = [*sorted((surfer / "prompts").glob("*.md")), *sorted((demo / "demo_site").glob("*.html")),
               *sorted((demo / "demo_runs").glob("*/trajectory.jsonl"))]
    for path in sources:
        text = path.read_text(encoding="utf-8")
        yield from (line for line in text.splitlines() if line.strip())


def build_tokenizer(special: list[str], *, eos: str, bos: str | None, unk: str | None, pad: str,
                    chat_template: str, tokenizer_class: str, out: Path) -> dict[str, int]:
    """Train a byte-level BPE on `_corpus()`, add the special tokens (first ids) and the
    string-closing tokens, save tokenizer.json + tokenizer_config.json; return the special ids."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    lines = list(_corpus())
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(lines, trainer)
    words = Counter(w.lower() for line in lines for w in re.findall(r"[A-Za-z]{3,12}", line))
    closers = [f"{w}\"" for w, _ in words.most_common(CLOSERS)]
    tokenizer.add_tokens([AddedToken(c, normalized=False, special=False) for c in closers])
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"))
    ids = {token: tokenizer.token_to_id(token) for token in special}
    # transformers keeps only the added tokens listed here, so the closers are listed too
    added = {str(tokenizer.token_to_id(t)): {"content": t, "lstrip": False, "rstrip": False, "normalized": False,
                                              "single_word": False, "special": t in ids} for t in [*special, *closers]}
    config = {
        "tokenizer_class": tokenizer_class, "model_max_length": 131072, "clean_up_tokenization_spaces": False,
        "eos_token": eos, "pad_token": pad, "bos_token": bos, "unk_token": unk, "add_bos_token": False,
        "add_eos_token": False, "added_tokens_decoder": added, "chat_template": chat_template,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (out / "special_tokens_map.json").write_text(json.dumps(
        {k: v for k, v in {"eos_token": eos, "bos_token": bos, "unk_token": unk, "pad_token": pad}.items() if v}, indent=2))
    return ids


def _write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def make_holotron(out: Path) -> dict[str, Any]:
    """NVIDIA Nemotron-Nano-12B-v2-VL's public sizes (Holotron-12B is post-trained from it)."""
    ids = build_tokenizer(NEMOTRON_SPECIAL, eos="<SPECIAL_12>", bos="<s>", unk="<unk>", pad="</s>",
                          chat_template=NEMOTRON_TEMPLATE, tokenizer_class="PreTrainedTokenizerFast", out=out)
    (out / "configuration.py").write_text(NEMOTRON_CONFIGURATION_PY)
    llm = {
        "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
        "vocab_size": 131072, "hidden_size": 5120, "intermediate_size": 20480, "num_hidden_layers": 62,
        "hybrid_override_pattern": NEMOTRON_PATTERN, "num_attention_heads": 40, "num_key_value_heads": 8,
        "head_dim": 128, "mamba_num_heads": 128, "mamba_head_dim": 80, "ssm_state_size": 128, "n_groups": 8,
        "conv_kernel": 4, "chunk_size": 128, "mamba_hidden_act": "silu", "mlp_hidden_act": "relu2",
        "layer_norm_epsilon": 1e-5, "use_bias": False, "use_conv_bias": True, "mlp_bias": False,
        "attention_bias": False, "residual_in_fp32": False, "rescale_prenorm_residual": True,
        "max_position_embeddings": 131072, "tie_word_embeddings": False, "dtype": "bfloat16",
        "bos_token_id": ids["<s>"], "eos_token_id": ids["<SPECIAL_12>"], "pad_token_id": ids["</s>"],
    }
    config = {
        "architectures": ["NemotronH_Nano_VL_V2"], "model_type": "NemotronH_Nano_VL_V2",
        "auto_map": {"AutoConfig": "configuration.NemotronH_Nano_VL_V2_Config"},
        "force_image_size": 512, "patch_size": 16, "downsample_ratio": 0.5, "template": "nemotron_h_nano",
        "ps_version": "v2", "image_tag_type": "internvl", "projector_hidden_size": 20480, "vit_hidden_size": 1280,
        "use_thumbnail": True, "norm_mean": [0.48145466, 0.4578275, 0.40821073],
        "norm_std": [0.26862954, 0.26130258, 0.27577711], "img_context_token_id": ids["<image>"],
        "img_context_token": "<image>", "img_start_token": "<img>", "img_end_token": "</img>",
        "max_sequence_length": 131072, "dtype": "bfloat16", "eos_token_id": ids["<SPECIAL_12>"],
        # RADIO v2.5-H: ViT-H/16 (1280 wide, 32 layers, 16 heads), CPE up to 2048 px, per-teacher CLS + registers
        "vision_config": {
            "model_type": "radio", "patch_size": 16, "preferred_resolution": [512, 512], "max_resolution": 2048,
            "args": {"model": "vit_huge_patch16_224", "cpe_max_size": 2048, "register_multiple": 8,
                     "cls_token_per_teacher": True,
                     "teachers": [{"name": "clip"}, {"name": "siglip"}, {"name": "dino_v2"}, {"name": "sam"}]},
        },
        "llm_config": llm,
    }
    _write(out / "config.json", config)
    _write(out / "generation_config.json", {"eos_token_id": ids["<SPECIAL_12>"], "bos_token_id": ids["<s>"]})
    return config


def make_holo2(out: Path) -> dict[str, Any]:
    """Qwen3-VL-8B-Instruct's public sizes (Holo2-8B is post-trained from it)."""
    ids = build_tokenizer(QWEN_SPECIAL, eos="<|im_end|>", bos=None, unk=None, pad="<|endoftext|>",
                          chat_template=QWEN_TEMPLATE, tokenizer_class="Qwen2Tokenizer", out=out)
    text = {
        "model_type": "qwen3_vl_text", "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 12288,
        "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "hidden_act": "silu", "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "attention_bias": False,
        "attention_dropout": 0.0, "initializer_range": 0.02, "use_cache": True, "tie_word_embeddings": False,
        "rope_theta": 5000000, "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20],
                                                "mrope_interleaved": True},
        "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"], "dtype": "bfloat16",
    }
    vision = {
        "model_type": "qwen3_vl", "depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16,
        "in_channels": 3, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
        "out_hidden_size": 4096, "num_position_embeddings": 2304, "deepstack_visual_indexes": [8, 16, 24],
        "hidden_act": "gelu_pytorch_tanh", "initializer_range": 0.02,
    }
    config = {
        "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
        "text_config": text, "vision_config": vision, "tie_word_embeddings": False, "dtype": "bfloat16",
        "image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"], "vision_end_token_id": ids["<|vision_end|>"],
    }
    _write(out / "config.json", config)
    _write(out / "generation_config.json", {"eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
                                            "pad_token_id": ids["<|endoftext|>"]})
    image = {
        "image_processor_type": "Qwen2VLImageProcessorFast", "processor_class": "Qwen3VLProcessor",
        "do_resize": True, "do_rescale": True, "do_normalize": True, "do_convert_rgb": True,
        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "patch_size": 16, "merge_size": 2,
        "temporal_patch_size": 2, "size": {"shortest_edge": 65536, "longest_edge": 16777216},
    }
    _write(out / "preprocessor_config.json", image)
    _write(out / "video_preprocessor_config.json", {
        **{k: v for k, v in image.items() if k != "image_processor_type"},
        "video_processor_type": "Qwen3VLVideoProcessor", "size": {"shortest_edge": 4096, "longest_edge": 25165824},
        "fps": 2, "min_frames": 4, "max_frames": 768,
    })
    _write(out / "processor_config.json", {"processor_class": "Qwen3VLProcessor"})
    return config


def make_model(shape: str, out: str | Path) -> dict[str, Any]:
    """Write the model directory of `shape` ('holotron' or 'holo2') into `out` (created; must be empty)."""
    target = Path(out)
    if shape not in SHAPES:
        raise ConfigError(f"unknown model shape {shape!r}; choose one of: {', '.join(SHAPES)}")
    if target.exists() and any(target.iterdir()):
        raise ConfigError(f"{target} is not empty; give a new directory")
    target.mkdir(parents=True, exist_ok=True)
    return make_holotron(target) if shape == "holotron" else make_holo2(target)
