"""In-process backends. transformers: a tiny randomly initialised hybrid
Mamba-2/attention `nemotron_h` model and a tokenizer built here (no hub
downloads) are saved, loaded through `TransformersBackend` from disk, and
generate on CPU; their nonsense, fed to the agent's roles, ends the run as a
model error with the raw output and parse errors recorded. vLLM: request
building, without vLLM installed."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from surfer.core.errors import ConfigError
from surfer.models.backend import ImagePart, Message, ModelRequest, TextPart
from surfer.models.transformers_backend import chat_messages, mamba_kernels, mamba_path
from surfer.models.vllm_backend import VLLMBackend, request_parts

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
REQUEST = ModelRequest(
    messages=(Message("system", (TextPart("You are a localizer."),)),
              Message("user", (ImagePart(b"\xff\xd8jpeg", "image/jpeg"), TextPart("Target: the OK button")))),
    schema_name="localizer", schema=SCHEMA, temperature=0.0, max_tokens=64,
    extra_body={"chat_template_kwargs": {"thinking": False}},
)


# -- vLLM: request building ---------------------------------------------------

def test_vllm_request_parts() -> None:
    parts = request_parts(REQUEST)
    assert parts["sampling"] == {"max_tokens": 64, "temperature": 0.0, "structured_outputs": {"json": SCHEMA}}
    assert parts["chat_template_kwargs"] == {"thinking": False}
    system, user = parts["messages"]
    assert system == {"role": "system", "content": "You are a localizer."}
    assert user["content"][0]["type"] == "image_url"
    assert user["content"][0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert user["content"][1] == {"type": "text", "text": "Target: the OK button"}


def test_vllm_backend_without_vllm_names_the_extra() -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match=r"surfer-agent\[vllm\]"):
            VLLMBackend("Hcompany/Holo2-8B")
    else:
        pytest.skip("vLLM is installed here")


# -- transformers ----------------------------------------------------------------

def test_text_only_messages_drop_images_and_carry_the_schema() -> None:
    messages, dropped = chat_messages(REQUEST, multimodal=False)
    assert dropped == 1
    assert messages[1] == {"role": "user", "content": "Target: the OK button"}
    assert "JSON schema" in messages[-1]["content"] and json.dumps(SCHEMA) in messages[-1]["content"]
    multimodal, none_dropped = chat_messages(REQUEST, multimodal=True)
    assert none_dropped == 0 and multimodal[1]["content"][0]["type"] == "image"


def test_kernel_report_says_which_path() -> None:
    kernels = mamba_kernels()
    assert set(kernels) == {"mamba_ssm", "causal_conv1d"}
    if not all(kernels.values()):
        assert mamba_path("cpu").startswith("pure-PyTorch fallback")
    assert "not CUDA" in mamba_path("cpu") or "not installed" in mamba_path("cpu")


def write_tiny_nemotron_h(directory: Path) -> Path:
    """A random hybrid Mamba-2/attention model (hidden 64, 4 heads / 2 KV heads,
    Mamba, attention and MLP layers) and a byte-level BPE tokenizer with a chat template."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import NemotronHConfig, NemotronHForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ['{"thought": "click", "action": {"type": "click"}}', "Localize an element on the GUI image", "system user assistant"]
    tok.train_from_iterator(corpus * 10, trainers.BpeTrainer(
        vocab_size=320, special_tokens=["<pad>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>")
    tokenizer.chat_template = (
        "{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] }}</s>\n{% endfor %}"
        "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
    )
    config = NemotronHConfig(
        vocab_size=384, hidden_size=64, intermediate_size=128, num_hidden_layers=4, hybrid_override_pattern="M*M-",
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, mamba_num_heads=4, mamba_head_dim=16,
        ssm_state_size=16, n_groups=1, chunk_size=16, max_position_embeddings=32768,
        pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )
    torch.manual_seed(0)
    NemotronHForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch  # noqa: F401 - the test extra installs torch==2.13.0 (CPU) and transformers
    import transformers  # noqa: F401
    return write_tiny_nemotron_h(tmp_path_factory.mktemp("tiny-nemotron-h"))


async def test_transformers_backend_loads_from_disk_and_generates(tiny_model: Path, caplog: pytest.LogCaptureFixture) -> None:
    from surfer.models.transformers_backend import TransformersBackend

    backend = TransformersBackend(str(tiny_model), max_new_tokens=12)
    with caplog.at_level(logging.INFO, logger="surfer.models.transformers"):
        completion = await backend.complete(REQUEST)
    assert backend.hybrid and not backend.multimodal and backend.device == "cpu"
    assert type(backend._model).__name__ == "NemotronHForCausalLM"
    assert completion.usage.prompt_tokens > 20 and 1 <= completion.usage.completion_tokens <= 12
    assert completion.structured == "prompt"
    assert backend.dropped_images == 1
    logged = caplog.text
    assert "Mamba path:" in logged and "NemotronHForCausalLM" in logged
    assert "text-only model: dropping the images" in logged


async def test_nonsense_from_a_real_model_is_a_model_error_not_a_crash(tiny_model: Path, demo_site, tmp_path: Path) -> None:
    from surfer.agent.config import AgentConfig
    from surfer.agent.loop import Agent
    from surfer.models.transformers_backend import TransformersBackend

    backend = TransformersBackend(str(tiny_model), max_new_tokens=8)
    config = AgentConfig(max_steps=2, output_retries=1, max_failed_steps=1, validate_answers=False)
    agent = Agent(config, backend=backend, profile="holotron")
    try:
        result = await agent.run("Register as a member", demo_site.url("index.html"), out_dir=tmp_path / "run")
    finally:
        await agent.aclose()
    assert result.status == "error" and result.error_kind == "model", result
    steps = [json.loads(line) for line in (tmp_path / "run" / "trajectory.jsonl").read_text().splitlines()]
    calls = steps[0]["calls"]["policy"]
    assert len(calls) == 2  # first try + one retry with feedback
    for call in calls:
        assert call["role"] == "policy"
        assert isinstance(call["completion"], str)  # the model's raw output is kept
        assert call["error"]  # with the reason it was rejected
    assert "output unusable" in steps[0]["error"]


async def test_transformers_backend_fills_tokens_with_the_logprobs_it_sampled_from(tiny_model: Path) -> None:
    import torch

    from surfer.models.transformers_backend import TransformersBackend

    backend = TransformersBackend(str(tiny_model), max_new_tokens=6)
    assert (await backend.complete(REQUEST)).tokens is None  # only when asked
    await backend.check_tokens()
    completion = await backend.complete(REQUEST)
    tokens = completion.tokens
    assert tokens is not None and len(tokens.completion_ids) == len(tokens.logprobs) == completion.usage.completion_tokens
    assert len(tokens.prompt_ids) == completion.usage.prompt_tokens and tokens.policy == backend.model_id
    # the logprob of each generated id is the model's own, position by position (greedy: temperature 0)
    ids = torch.tensor([list(tokens.prompt_ids) + list(tokens.completion_ids)])
    with torch.inference_mode():
        logits = backend._model(ids).logits[0].float()
    start = len(tokens.prompt_ids)
    expected = torch.log_softmax(logits[start - 1:-1], dim=-1).gather(1, ids[0, start:, None])[:, 0]
    assert torch.allclose(torch.tensor(tokens.logprobs), expected, atol=1e-3)
