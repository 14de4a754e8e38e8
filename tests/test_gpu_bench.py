"""`surfer bench gpu` on CPU: the dummy-weight model directories as far as
transformers can check them, and the benchmark's whole path (replay batches,
the bare load generator, the table and JSON) against the stand-in server."""

from __future__ import annotations

import json
import threading

from typer.testing import CliRunner

from surfer.apps.cli import app
from surfer.bench.gpu.serving import log_facts
from surfer.models.metrics import parse_metrics


def test_make_model_writes_loadable_directories_of_both_shapes(tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    for shape in ("holotron", "holo2"):
        result = CliRunner().invoke(app, ["bench", "gpu", "make-model", shape, str(tmp_path / shape)])
        assert result.exit_code == 0, result.output
    holotron = AutoConfig.from_pretrained(tmp_path / "holotron", trust_remote_code=True)
    assert holotron.architectures == ["NemotronH_Nano_VL_V2"]
    text = holotron.text_config
    assert (text.hidden_size, text.num_hidden_layers, text.mamba_num_heads, text.ssm_state_size) == (5120, 62, 128, 128)
    assert [text.hybrid_override_pattern.count(c) for c in "M-*"] == [28, 28, 6]
    assert holotron.vision_config.args["model"] == "vit_huge_patch16_224" and holotron.projector_hidden_size == 20480
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "holotron", trust_remote_code=True)
    for token in ("<img>", "</img>", "<image>"):
        assert len(tokenizer.encode(token, add_special_tokens=False)) == 1
    assert tokenizer.convert_tokens_to_ids("<image>") == holotron.img_context_token_id
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Find the price."}]}]
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt == "<SPECIAL_11>User\n<image>\nFind the price.\n<SPECIAL_11>Assistant\n<think></think>"

    holo2 = AutoConfig.from_pretrained(tmp_path / "holo2")
    assert holo2.architectures == ["Qwen3VLForConditionalGeneration"]
    assert (holo2.text_config.hidden_size, holo2.text_config.num_hidden_layers, holo2.vision_config.depth) == (4096, 36, 27)
    qwen = AutoTokenizer.from_pretrained(tmp_path / "holo2")
    assert qwen.convert_tokens_to_ids("<|image_pad|>") == holo2.image_token_id
    prompt = qwen.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, thinking=False)
    assert "<|vision_start|><|image_pad|><|vision_end|>Find the price." in prompt and prompt.endswith("</think>\n\n")
    assert json.loads((tmp_path / "holo2" / "preprocessor_config.json").read_text())["patch_size"] == 16

    again = CliRunner().invoke(app, ["bench", "gpu", "make-model", "holo2", str(tmp_path / "holo2")])
    assert again.exit_code == 2 and "not empty" in again.output
    wrong = CliRunner().invoke(app, ["bench", "gpu", "make-model", "llama", str(tmp_path / "x")])
    assert wrong.exit_code == 2 and "unknown model shape" in wrong.output


def test_metrics_and_log_facts_are_read_from_vllm_text():
    page = (
        '# HELP vllm:num_requests_running x\nvllm:num_requests_running{model_name="m"} 12.0\n'
        'vllm:prefix_cache_queries_total{model_name="m"} 1000.0\nvllm:prefix_cache_hits_total{model_name="m"} 250.0\n'
        'vllm:kv_cache_usage_perc{model_name="m",engine="0"} 0.5\nother_metric 3\n'
    )
    assert parse_metrics(page) == {"vllm:num_requests_running": 12.0, "vllm:prefix_cache_queries": 1000.0,
                                   "vllm:prefix_cache_hits": 250.0, "vllm:kv_cache_usage_perc": 0.5}
    log = "INFO Model loading took 23.61 GiB memory\nINFO GPU KV cache size: 1,234,560 tokens\n"
    assert log_facts(log) == {"weights_gib": 23.61, "kv_cache_tokens": 1234560.0}


def test_gpu_bench_runs_levels_and_the_bare_replay_against_the_standin(standin, tmp_path):
    lock = threading.Lock()
    bodies: list[str] = []

    def model(request):  # type: ignore[no-untyped-def]
        with lock:
            bodies.append(json.dumps(request.body, sort_keys=True))
        if request.role == "localizer":
            return {"x": 500, "y": 500}
        return {"thought": "click", "notes": "", "action": {"type": "click", "target": "the middle"}}

    server = standin(model)
    out = tmp_path / "gpu.json"
    result = CliRunner().invoke(app, [
        "bench", "gpu", "run", "--base-url", server.base_url, "--model", f"holotron={server.model}",
        "--levels", "1,3", "--window", "20", "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    (entry,) = data["models"]
    assert [row["concurrency"] for row in entry["levels"]] == [1, 3]
    for row in entry["levels"]:
        surfer, bare = row["surfer"], row["bare"]
        sessions = max(4, 2 * row["concurrency"])
        assert surfer["sessions_finished"] == sessions and surfer["statuses"] == {"limit": sessions}
        assert surfer["steps"] == surfer["steps_per_session"] * sessions and surfer["steps_per_s"] > 0
        assert surfer["model_calls"] == 2 * surfer["steps"]  # policy + localizer per step
        assert bare["model_calls"] == surfer["model_calls"] and bare["sessions"] == sessions
        assert row["surfer_vs_bare"]["calls_per_s"] > 0
        assert row["surfer_server"] is None  # the stand-in has no /metrics
    # the bare generator sent exactly the bodies surfer sent (wire format, images included)
    half = len(bodies) // 2
    level1 = entry["levels"][0]["surfer"]["model_calls"]
    assert sorted(bodies[:level1]) == sorted(bodies[level1:2 * level1])
    assert half == sum(2 * row["surfer"]["model_calls"] for row in entry["levels"]) // 2
    assert "| holotron | 1 |" in result.output and "| holotron | 3 |" in result.output


def test_auto_only_runs_just_the_auto_controller(standin, tmp_path):
    server = standin(lambda request: {"x": 500, "y": 500} if request.role == "localizer" else
                     {"thought": "click", "notes": "", "action": {"type": "click", "target": "the middle"}},
                     kv_capacity=20000)
    out = tmp_path / "gpu.json"
    result = CliRunner().invoke(app, [
        "bench", "gpu", "run", "--base-url", server.base_url, "--model", f"holo2={server.model}",
        "--levels", "1,4", "--window", "6", "--auto-only", "--auto-interval", "0.5", "--no-bare", "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(out.read_text())["models"][0]["levels"]
    assert row["concurrency"] == "auto" and "bare" not in row
    control = row["surfer"]["concurrency_control"]
    assert control["mode"] == "auto" and control["start"] == 1 and control["decisions"]
    assert all(1 <= d["limit"] <= 4 for d in control["decisions"])
