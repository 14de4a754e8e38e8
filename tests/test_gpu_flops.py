"""FLOPs per agent step (surfer/bench/gpu/flops.py): parameter counts of the two shapes, the
per-token formulas, one benchmark row by hand on both paths, and the table of the recorded runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from surfer.bench.gpu.flops import (
    ModelCosts, VisionCosts, costs_for_shape, decode_flops_per_token, flops_table, model_costs,
    prefill_flops_per_token, screenshot_tokens, step_flops,
)
from surfer.core.errors import ConfigError

IMAGES = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu-images-h100"

# Round numbers so that the expected figures below can be checked by hand.
TOY = ModelCosts(
    name="toy", linear_params=10**9, lm_head_params=10**8, embedding_params=10**8, attention_layers=2, q_dim=1000,
    mamba_layers=1, mamba_state_flops_per_token=1e6,
    vision=VisionCosts(encoder_params=10**8, layers=2, width=100, patches_per_token=4, attention_span=None,
                       projector_params=10**7),
)


def test_parameter_counts_match_the_public_models():
    holotron, holo2 = costs_for_shape("holotron"), costs_for_shape("holo2")
    assert holotron.linear_params == pytest.approx(11.0e9, rel=0.03)
    total = holotron.linear_params + holotron.embedding_params + holotron.lm_head_params
    assert total == pytest.approx(12.3e9, rel=0.03)
    assert (holotron.attention_layers, holotron.mamba_layers, holotron.q_dim) == (6, 28, 5120)
    assert holotron.vision.encoder_params == pytest.approx(0.63e9, rel=0.03)  # RADIO ViT-H/16
    assert holotron.vision.projector_params == 2 * 5120 * 20480
    # 28 layers × 2 × 3 × d_inner (128 × 80) × d_state (128)
    assert holotron.mamba_state_flops_per_token == 28 * 6 * 10240 * 128

    assert holo2.linear_params == pytest.approx(6.9e9, rel=0.03)
    assert (holo2.attention_layers, holo2.mamba_layers, holo2.q_dim) == (36, 0, 4096)
    assert holo2.vision.encoder_params == pytest.approx(0.41e9, rel=0.03)
    assert holo2.vision.projector_params == 4 * (4608 * 4608 + 4608 * 4096)  # merger + 3 deepstack mergers


def test_vision_cost_per_token_is_flat_for_tiles_and_grows_with_a_whole_image_attention():
    holotron, holo2 = costs_for_shape("holotron"), costs_for_shape("holo2")
    assert holotron.vision_flops_per_image_token(256) == pytest.approx(holotron.vision_flops_per_image_token(1792))
    assert holo2.vision_flops_per_image_token(1000) > holo2.vision_flops_per_image_token(258)
    # one 512-px tile: 1024 patches, 256 tokens
    vit, projector = holotron.vision.encoder_params, holotron.vision.projector_params
    tile = 2 * vit * 1024 + 4 * 32 * 1280 * 1024**2 + 2 * projector * 256
    assert holotron.vision_flops(256) == pytest.approx(tile)


def test_prefill_flops_grow_with_context_and_decode_adds_the_lm_head():
    for costs in (costs_for_shape("holotron"), costs_for_shape("holo2"), TOY):
        short, long = prefill_flops_per_token(costs, 1000), prefill_flops_per_token(costs, 8000)
        assert long > short > prefill_flops_per_token(costs, 0)
        assert decode_flops_per_token(costs, 1000) - prefill_flops_per_token(costs, 1000) == 2 * costs.lm_head_params
    assert prefill_flops_per_token(TOY, 4000) == 2e9 + 4 * 2 * 1000 * 4000 + 1e6


def _row(steady: dict | None, hit: float | None = 0.75, budget: int | None = None) -> dict:
    return {
        "name": "v", "variant": {"name": "v", "image_tokens_per_image": budget}, "concurrency": 4,
        "surfer": {"steps_per_s": 0.5, "prompt_tokens_per_s": 4000.0, "completion_tokens_per_s": 40.0,
                   "prompt_tokens_per_call": 4000.0, "steady": steady},
        "surfer_server": None if hit is None else {"prefix_cache_hit_rate": hit},
    }


def test_step_flops_from_the_steady_window_by_hand():
    row = _row({"steps_per_s": 2.0, "computed_prompt_tokens_per_step": 1000.0, "generation_tokens_per_step": 50.0})
    got = step_flops(TOY, row, image_tokens=100)
    prefill = 1000 * (2e9 + 4 * 2 * 1000 * 4000 + 1e6) / 1e12  # 2.033
    decode = 50 * (2e9 + 4 * 2 * 1000 * 4000 + 1e6 + 2e8) / 1e12  # 0.11165
    vision = (2e8 * 400 + 4 * 2 * 100 * 400 * 400 + 2e7 * 100) / 1e12  # 400 patches, whole-image attention
    total = prefill + decode + vision
    assert got["from"] == "steady"
    assert (got["computed_tokens_per_step"], got["generated_tokens_per_step"], got["steps_per_s"]) == (1000, 50, 2.0)
    assert got["prefill"] == pytest.approx(prefill) and got["prefill"] == pytest.approx(2.033)
    assert got["decode"] == pytest.approx(decode) and got["vision"] == pytest.approx(0.082128)
    assert got["total"] == pytest.approx(total) and got["total"] == pytest.approx(2.226778)
    assert got["achieved_tflops"] == pytest.approx(2 * total)
    assert got["peak_share"] == pytest.approx(2 * total / 989.4)
    assert step_flops(TOY, row, 100, peak_tflops=100.0)["peak_share"] == pytest.approx(2 * total / 100)


def test_step_flops_from_the_whole_window_by_hand():
    # no usable steady figures (the recorded Holotron runs have steps_per_s None or 0.0)
    for steady in (None, {"steps_per_s": None}, {"steps_per_s": 0.0, "computed_prompt_tokens_per_step": None}):
        got = step_flops(TOY, _row(steady), image_tokens=100)
        assert got["from"] == "whole window"
        assert got["computed_tokens_per_step"] == pytest.approx(4000 * 0.25 / 0.5)  # 2,000
        assert got["generated_tokens_per_step"] == pytest.approx(40 / 0.5)  # 80
        assert got["prefill"] == pytest.approx(2000 * 2.033e9 / 1e12)
        assert got["decode"] == pytest.approx(80 * 2.233e9 / 1e12)
        assert got["achieved_tflops"] == pytest.approx(got["total"] * 0.5)
    assert step_flops(TOY, _row(None, hit=None), 100)["computed_tokens_per_step"] == pytest.approx(8000)
    empty = _row(None)
    empty["surfer"]["steps_per_s"] = None
    assert step_flops(TOY, empty, 100) is None


def test_screenshot_tokens_take_the_image_budget_else_the_full_resolution():
    assert screenshot_tokens("holotron", _row(None)) == 1792
    assert screenshot_tokens("holo2", _row(None)) == 1000
    assert screenshot_tokens("holo2", _row(None, budget=258)) == 258


def test_flops_table_of_the_recorded_image_runs():
    paths = [IMAGES / "holotron.json", IMAGES / "holo2.json"]
    rows, table = flops_table(paths)
    levels = sum(len(m["levels"]) for p in paths for m in json.loads(p.read_text())["models"])
    assert len(rows) == levels == 8
    assert table.count("\n") == 1 + levels and table.startswith("| model | variant | c | from |")
    by = {(r["model"], r["variant"]): r for r in rows}
    assert by["holotron", "blocks+cont"]["total"] > by["holo2", "blocks+cont"]["total"]
    for r in rows:
        assert r["total"] == pytest.approx(r["prefill"] + r["decode"] + r["vision"])
        assert 0 < r["peak_share"] < 1


def test_unknown_architecture_is_a_config_error():
    with pytest.raises(ConfigError, match=r"no FLOPs model for architectures=\['LlamaForCausalLM'\].*known:"):
        model_costs({"architectures": ["LlamaForCausalLM"], "model_type": "llama"})
    with pytest.raises(ConfigError, match="unknown model shape"):
        costs_for_shape("gpt2")


def test_the_flops_command_refuses_a_bad_peak_and_other_json_and_writes_into_a_new_folder(tmp_path: Path):
    from typer.testing import CliRunner

    from surfer.apps.cli import app

    run = str(IMAGES / "holotron.json")
    negative = CliRunner().invoke(app, ["bench", "gpu", "flops", run, "--peak", "-1"])  # not shares of -37,000 %
    assert negative.exit_code == 2 and "--peak must be" in negative.output
    other = tmp_path / "tokens.json"
    other.write_text(json.dumps({"benchmark": "tokens", "runs": 4}))  # another benchmark's JSON, not a KeyError's 'models'
    wrong = CliRunner().invoke(app, ["bench", "gpu", "flops", str(other)])
    assert wrong.exit_code == 2 and "is not a `surfer bench gpu run` result" in wrong.output
    out = tmp_path / "new" / "flops.json"
    written = CliRunner().invoke(app, ["bench", "gpu", "flops", run, "--json", str(out)])
    assert written.exit_code == 0, written.output
    assert len(json.loads(out.read_text())) == 4 and f"rows: {out}" in written.output
