"""`surfer bench gpu` on CPU: the dummy-weight model directories as far as
transformers can check them, and the benchmark's whole path (replay batches,
the bare load generator, the table and JSON) against the stand-in server."""

from __future__ import annotations

import json
import re
import threading

import pytest
from typer.testing import CliRunner

from surfer.apps.cli import app
from surfer.bench.gpu.emulate import ClickEverywhere
from surfer.bench.gpu.serving import log_facts
from surfer.models.metrics import parse_metrics

# Only the tests whose assertions read a controller that times steps, or compare figures of concurrent
# sessions, are `serial`; the others check counts and the command's path, which load does not change.


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
    # Nemotron-Nano-v2's shape: a system turn of its own, an assistant's turn closed by `\n<SPECIAL_12>\n` (the stop id
    # between two newlines), a user's by a newline alone; an earlier assistant turn without its thinking block...
    history = [{"role": "system", "content": "Be brief. "}, *messages, {"role": "assistant", "content": "<think></think>{}"},
               {"role": "user", "content": "Next?"}]
    assert tokenizer.apply_chat_template(history, tokenize=False, add_generation_prompt=True) == (
        "<SPECIAL_10>System\nBe brief.\n<SPECIAL_11>User\n<image>\nFind the price.\n<SPECIAL_11>Assistant\n{}"
        "\n<SPECIAL_12>\n<SPECIAL_11>User\nNext?\n<SPECIAL_11>Assistant\n<think></think>")
    # ...and a last one after the generation prompt (to be continued)
    assert tokenizer.apply_chat_template(history[:3], tokenize=False) == (
        "<SPECIAL_10>System\nBe brief.\n<SPECIAL_11>User\n<image>\nFind the price.\n<SPECIAL_11>Assistant\n"
        "<think></think><think></think>{}\n<SPECIAL_12>\n")
    assert tokenizer.eos_token == "<SPECIAL_12>"

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
                                   "vllm:prefix_cache_hits": 250.0, "vllm:kv_cache_usage_perc": 0.5, "engine:vllm": 1.0}
    log = "INFO Model loading took 23.61 GiB memory\nINFO GPU KV cache size: 1,234,560 tokens\n"
    assert log_facts(log) == {"weights_gib": 23.61, "kv_cache_tokens": 1234560.0}


def test_sglang_metrics_are_read_in_the_same_vocabulary():
    """SGLang 0.5.15's series (scheduler gauges per rank, tokenizer counters per cache source) are read
    into the names surfer reads from vLLM, and the engine is said; its last-batch hit-rate gauge is not used."""
    from surfer.models.metrics import cache_hit_rate, engine_of

    def page(prompt: float, cached: float) -> str:
        labels = 'model_name="m",engine_type="unified",tp_rank="0",pp_rank="0"'
        return (f"# HELP sglang:num_running_reqs x\nsglang:num_running_reqs{{{labels}}} 40.0\n"
                f"sglang:num_queue_reqs{{{labels}}} 3.0\nsglang:token_usage{{{labels}}} 0.42\n"
                f"sglang:cache_hit_rate{{{labels}}} 0.0\nsglang:mamba_usage{{{labels}}} 0.3\n"
                f'sglang:prompt_tokens_total{{model_name="m",engine_type="unified"}} {prompt}\n'
                f'sglang:cached_tokens_total{{model_name="m",engine_type="unified",cache_source="device"}} {cached}\n'
                f'sglang:generation_tokens_total{{model_name="m",engine_type="unified"}} 500.0\n'
                f'sglang:num_retracted_requests_total{{model_name="m"}} 2.0\n')

    first, last = parse_metrics(page(1000.0, 200.0)), parse_metrics(page(5000.0, 3400.0))
    assert engine_of(last) == "sglang" and engine_of(parse_metrics("vllm:num_requests_running 1\n")) == "vllm"
    assert engine_of(parse_metrics("other 1\n")) is None
    assert (last["vllm:num_requests_running"], last["vllm:num_requests_waiting"], last["vllm:kv_cache_usage_perc"]) == (40, 3, 0.42)
    assert last["vllm:prompt_tokens"] == 5000 and last["vllm:prompt_tokens_by_source:local_compute"] == 1600
    assert last["vllm:num_preemptions"] == 2 and last["sglang:mamba_usage"] == 0.3
    assert cache_hit_rate(first, last) == 0.8  # (3400 - 200) / (5000 - 1000): the counters, not the gauge


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
        "--levels", "1,3", "--window", "20", "--min-steps", "0", "--session-steps", "6", "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    (entry,) = data["models"]
    assert [row["concurrency"] for row in entry["levels"]] == [1, 3]
    for row in entry["levels"]:
        surfer, bare = row["surfer"], row["bare"]
        sessions = max(4, 2 * row["concurrency"])
        assert surfer["sessions_finished"] == sessions and surfer["statuses"] == {"limit": sessions}
        assert surfer["sessions_errored"] == 0 and surfer["session_error"] is None
        assert surfer["steps"] == surfer["steps_per_session"] * sessions and surfer["steps_per_s"] > 0
        assert surfer["model_calls"] == 2 * surfer["steps"]  # policy + localizer per step
        assert bare["model_calls"] == surfer["model_calls"] and bare["sessions"] == sessions
        assert row["surfer_vs_bare"]["calls_per_s"] > 0
        assert row["surfer_server"] is None  # the stand-in has no /metrics
        steady = surfer["steady"]  # after every session's first step; without --min-steps, to the end of the run
        assert steady["steps"] < surfer["steps"] and steady["counters"] == "no /metrics readings"
    # the bare generator sent exactly the bodies surfer sent (wire format, images included)
    half = len(bodies) // 2
    level1 = entry["levels"][0]["surfer"]["model_calls"]
    assert sorted(bodies[:level1]) == sorted(bodies[level1:2 * level1])
    assert half == sum(2 * row["surfer"]["model_calls"] for row in entry["levels"]) // 2
    assert "| holotron | 1 |" in result.output and "| holotron | 3 |" in result.output


def test_sessions_ended_by_server_errors_are_counted_and_their_run_flagged() -> None:
    # With random weights and float16 SSM state, vLLM answered HTTP 500 (NaN logits the grammar rejected) to
    # 28 % of requests; those sessions ended and the run's load fell unseen. The bench now says so.
    from surfer.agent.events import Finished
    from surfer.agent.result import RunResult
    from surfer.bench.gpu.bench import error_warnings, table
    from surfer.bench.gpu.levels import LevelTally

    tally = LevelTally()
    tally(Finished(RunResult(status="limit", task="t")))
    tally(Finished(RunResult(status="error", task="t", reason="model server answered HTTP 500: grammar rejected")))
    assert tally.session_errors == ["model server answered HTTP 500: grammar rejected"]
    row = {"concurrency": 40, "name": "d8-c40", "surfer": {
        "steps_per_s": 1.0, "prompt_tokens_per_s": 1, "completion_tokens_per_s": 1, "step_p50": 1, "step_p95": 1,
        "call_p50": 1, "call_p95": 1, "unusable_outputs": 0, "sessions_finished": 2,
        "sessions_errored": len(tally.session_errors), "session_error": tally.session_errors[0]}}
    results = {"variants": ["d8-c40"], "models": [{"name": "holotron", "levels": [row]}]}
    assert "| holotron | d8-c40 | 40 | 1.00 |" in table(results) and "| 0 | 1 | - | - |" in table(results)
    (line,) = error_warnings(results)
    assert line.startswith("warning: holotron d8-c40 c=40: 1 of 2 sessions ended in an error, which changed the load")
    assert "HTTP 500" in line
    row["surfer"]["sessions_errored"] = 0
    assert error_warnings(results) == []


def test_auto_only_runs_just_the_auto_controller(standin, tmp_path):
    server = standin(lambda request: {"x": 500, "y": 500} if request.role == "localizer" else
                     {"thought": "click", "notes": "", "action": {"type": "click", "target": "the middle"}},
                     kv_capacity=20000)
    out = tmp_path / "gpu.json"
    result = CliRunner().invoke(app, [
        "bench", "gpu", "run", "--base-url", server.base_url, "--model", f"holo2={server.model}",
        "--levels", "1,4", "--window", "3", "--auto-only", "--auto-interval", "0.5", "--no-bare", "--session-steps", "12",
        "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(out.read_text())["models"][0]["levels"]
    assert row["concurrency"] == "auto" and "bare" not in row
    control = row["surfer"]["concurrency_control"]
    assert control["mode"] == "auto" and control["start"] == 1 and control["decisions"]
    assert all(1 <= d["limit"] <= 4 for d in control["decisions"])


def test_metrics_keep_prompt_tokens_by_source() -> None:
    page = ('vllm:prompt_tokens_by_source_total{engine="0",source="local_compute"} 700.0\n'
            'vllm:prompt_tokens_by_source_total{engine="0",source="local_cache_hit"} 300.0\n'
            'vllm:prompt_tokens_total{engine="0"} 1000.0\n')
    values = parse_metrics(page)
    assert values["vllm:prompt_tokens_by_source:local_compute"] == 700.0 and values["vllm:prompt_tokens"] == 1000.0
    from surfer.bench.gpu.steady import counter_figures

    first = {"vllm:prompt_tokens": 0.0, "vllm:prefix_cache_hits": 0.0, "vllm:prefix_cache_queries": 0.0}
    last = {"vllm:prompt_tokens": 1000.0, "vllm:prefix_cache_hits": 600.0, "vllm:prefix_cache_queries": 1000.0}
    figures = counter_figures(first, last, steps=4)
    assert figures["computed_prompt_tokens_per_step"] == 100.0 and figures["prefix_cache_hit_rate"] == 0.6
    assert figures["preemptions"] is None and figures["generation_tokens_per_step"] is None  # absent counters
    by_source = counter_figures({**first, "vllm:prompt_tokens_by_source:local_compute": 0.0},
                                {**last, "vllm:prompt_tokens_by_source:local_compute": 500.0}, steps=4)
    assert by_source["computed_prompt_tokens_per_step"] == 125.0 and by_source["computed_from"].startswith("prompt_tokens_by_source")


def test_whole_window_server_summary_has_both_cache_hit_rates() -> None:
    """The prefix cache and the multimodal processor cache (whose misses starved the engine 8 deep)."""
    from surfer.models.metrics import MetricsSampler

    sampler = MetricsSampler("http://127.0.0.1:1")
    sampler.samples = [
        parse_metrics('vllm:prefix_cache_queries_total 100.0\nvllm:prefix_cache_hits_total 50.0\n'
                      'vllm:mm_cache_queries_total 10.0\nvllm:mm_cache_hits_total 1.0\nvllm:kv_cache_usage_perc 0.2\n'),
        parse_metrics('vllm:prefix_cache_queries_total 1100.0\nvllm:prefix_cache_hits_total 850.0\n'
                      'vllm:mm_cache_queries_total 50.0\nvllm:mm_cache_hits_total 37.0\nvllm:kv_cache_usage_perc 0.6\n'),
    ]
    summary = sampler.summary()
    assert summary["prefix_cache_hit_rate"] == 0.8 and summary["mm_cache_hit_rate"] == 0.9
    assert summary["kv_cache_usage"] == {"mean": 0.4, "max": 0.6}
    sampler.samples = [parse_metrics('vllm:prefix_cache_queries_total 5.0\n')] * 2
    assert sampler.summary()["mm_cache_hit_rate"] is None  # a server without the counter (or no queries)


def test_steady_window_opens_after_every_first_step_and_closes_after_min_steps() -> None:
    from surfer.bench.gpu.steady import SteadyWindow

    window = SteadyWindow(cohort_size=2, min_steps=2, start=0.0)
    for session in ("a", "b"):
        window.session_started(session)
    window.step_finished("a", 1.0, now=1.0)
    window.step_finished("a", 1.0, now=2.0)  # ramp: b has not finished its first step yet
    assert window.t0 is None
    window.step_finished("b", 3.0, now=3.0)
    assert window.t0 == 3.0 and window.opened.is_set()
    window.step_finished("a", 1.0, now=4.0)
    window.step_finished("b", 1.0, now=5.0)
    window.step_finished("a", 1.0, now=6.0)
    assert window.t1 is None  # b has one step in the window
    window.session_ended("c", now=6.5)  # a session that is not in the window changes nothing
    window.step_finished("b", 2.0, now=7.0)
    assert window.t1 == 7.0 and window.closed.is_set()
    summary = window.summary(stopped=9.0)
    assert summary["steps"] == 4 and summary["seconds"] == 4.0 and summary["steps_per_s"] == 1.0
    assert summary["complete"] and summary["min_steps_per_session"] == 2 and summary["ramp_seconds"] == 3.0



def test_no_steady_window_when_the_time_limit_ends_every_session_before_it_opens() -> None:
    """Seen on the GPU: at 128 sessions no window opened within the time limit; the sessions cut at the limit
    must not open an empty window that reads as complete."""
    from surfer.bench.gpu.steady import SteadyWindow

    window = SteadyWindow(cohort_size=2, min_steps=2, start=0.0)
    for session in ("a", "b"):
        window.session_started(session)
    window.step_finished("a", 5.0, now=5.0)  # b never finishes its first step
    for session in ("a", "b"):
        window.session_ended(session, now=150.0)
    assert window.t0 is None and not window.opened.is_set() and not window.closed.is_set()
    assert window.summary(stopped=150.0) is None


def test_the_steady_window_ends_when_a_session_ends_with_none_left_to_replace_it() -> None:
    """Seen on the GPU: sessions of 12 steps, 7 answered before the run, ran out one by one inside the window;
    counting on until every session had its steps measured the tail (3 requests running of 32), not the load."""
    from surfer.bench.gpu.bench import steady_table
    from surfer.bench.gpu.steady import SteadyWindow

    window = SteadyWindow(cohort_size=3, min_steps=3, start=0.0, sessions_total=3)
    for session in ("a", "b", "c"):
        window.session_started(session)
    for at, session in enumerate(("a", "b", "c"), start=1):
        window.step_finished(session, 1.0, now=float(at))
    assert window.t0 == 3.0
    window.step_finished("a", 1.0, now=4.0)
    window.step_finished("b", 1.0, now=5.0)
    window.session_ended("a", now=6.0)  # a ran out of steps: two sessions run from now on
    window.step_finished("c", 1.0, now=7.0)  # after the window: not counted
    assert window.t1 == 6.0 and window.closed.is_set()
    summary = window.summary(stopped=8.0)
    assert summary["steps"] == 2 and summary["seconds"] == 3.0
    assert not summary["complete"] and summary["closed_by"] == "a session ended"
    result = {"models": [{"name": "m", "levels": [{"name": "v", "concurrency": 3, "surfer": {"steady": summary}}]}]}
    assert "| no (a session ended) |" in steady_table(result)

    # with sessions left to start, one that ends is replaced: the window goes on
    replaced = SteadyWindow(cohort_size=2, min_steps=1, start=0.0, sessions_total=3)
    for session in ("a", "b"):
        replaced.session_started(session)
        replaced.step_finished(session, 1.0, now=1.0)
    replaced.session_ended("a", now=2.0)
    replaced.session_started("c")
    assert replaced.t1 is None
    replaced.step_finished("b", 1.0, now=3.0)
    assert replaced.t1 == 3.0 and replaced.summary(stopped=4.0)["complete"]


def test_no_steady_window_opens_after_a_session_ran_out_of_steps_during_the_ramp() -> None:
    from surfer.bench.gpu.bench import steady_table
    from surfer.bench.gpu.steady import SteadyWindow

    window = SteadyWindow(cohort_size=2, min_steps=1, start=0.0, sessions_total=2)
    for session in ("a", "b"):
        window.session_started(session)
    window.step_finished("a", 1.0, now=1.0)
    window.session_ended("a", now=2.0)  # a did all its steps while b's first step was still running
    window.step_finished("b", 5.0, now=5.0)
    assert window.t0 is None and not window.opened.is_set() and window.summary(stopped=9.0) is None
    missing = window.missing(stopped=9.0)
    assert "raise --session-steps" in missing
    result = {"models": [{"name": "m", "levels": [{"name": "v", "concurrency": 2, "surfer": {"steady": None,
                                                                                               "steady_missing": missing}}]}]}
    assert f"no steady window ({missing})" in steady_table(result)
    # sessions cut by the time limit end after it: that is not a session running out of steps
    cut = SteadyWindow(cohort_size=2, min_steps=1, start=0.0, sessions_total=2)
    for session in ("a", "b"):
        cut.session_started(session)
        cut.session_ended(session, now=150.2)
    assert cut.missing(stopped=150.0) == "a session never finished its first step"


def test_variants_parse_inline_matrices_and_files(tmp_path) -> None:
    import pytest

    from surfer.bench.gpu.variants import Variant, parse_variants, runs
    from surfer.core.errors import ConfigError

    inline = parse_variants("layout=window,continuation=off; layout=blocks|window continuation=on memory_images=8|32 sessions=64")
    assert inline[0] == Variant(layout="window", continuation=False)
    assert [(v.layout, v.memory_images) for v in inline[1:]] == [("blocks", 8), ("blocks", 32), ("window", 8), ("window", 32)]
    assert all(v.continuation and v.concurrency == 64 for v in inline[1:])
    assert [v.concurrency for v in runs(inline[:2], [16, 128], auto=True, auto_only=False)] == [16, 128, "auto", 64]
    (tmp_path / "v.json").write_text(json.dumps({"variants": [{"name": "today", "layout": "window", "continuation": False}],
                                                 "matrix": {"layout": ["blocks"], "image_budget": [None, 1024]}}))
    from_json = parse_variants(str(tmp_path / "v.json"))
    assert [v.label() for v in from_json] == ["today", "blocks", "blocks+budget1024"]
    (tmp_path / "v.toml").write_text('[[variants]]\nlayout = "window"\n\n[matrix]\nlayout = ["blocks"]\nblock_images = [8, 32]\n')
    from_toml = parse_variants(str(tmp_path / "v.toml"))
    assert [v.block_images for v in from_toml] == [None, 8, 32]
    from surfer.models.profiles import get_profile

    assert from_toml[2].max_images(get_profile("holotron")) == 32 and from_toml[0].max_images(get_profile("holotron")) == 3
    resolved = Variant(layout="blocks").resolved(get_profile("holotron"))
    assert resolved["continuation"] is True and resolved["max_images"] == 5
    (recorded,) = parse_variants("layout=conversation,tokens_in=on,record=on")
    assert recorded.record_tokens and recorded.label() == "conversation+ids+record"
    assert recorded.config_update()["record_tokens"] is True and recorded.resolved(get_profile("holo2"))["record_tokens"] is True
    assert Variant().config_update()["record_tokens"] is False
    for bad, message in (("layout=sideways", "prompt_layout"), ("colour=red", "unknown key"), ("memory_images=64", "memory_images"),
                         ("continuation=maybe", "on/off"), ("image_refs=maybe", "image_refs takes on/off"), ("record=maybe", "record_tokens takes on/off"), ("layout=window; layout=window", "the same"), ("layout", "key=value")):
        with pytest.raises(ConfigError, match=message):
            parse_variants(bad)


@pytest.mark.serial  # prefix-cache figures of concurrent sessions in a steady window
def test_variants_compare_client_settings_in_one_server_with_a_steady_window(standin, tmp_path) -> None:
    server = standin(ClickEverywhere(), kv_capacity=10**7, delay=0.005)
    out = tmp_path / "gpu.json"
    result = CliRunner().invoke(app, [
        "bench", "gpu", "run", "--base-url", server.base_url, "--model", f"holotron={server.model}", "--levels", "3",
        "--variants", "layout=window,continuation=off; layout=blocks,continuation=on; layout=blocks,continuation=on,block_images=8,sessions=2;"
        "layout=blocks,continuation=on,image_refs=on",
        # the run stops when the steady window closes (about 5 steps in): longer sessions would only cost screenshots read
        "--min-steps", "3", "--window", "60", "--no-bare", "--session-steps", "8", "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    rows = data["models"][0]["levels"]
    assert [(r["name"], r["concurrency"]) for r in rows] == [
        ("window+nocont", 3), ("blocks+cont", 3), ("blocks+cont+block8", 2), ("blocks+cont+refs", 3)]
    assert rows[2]["variant"]["max_images"] == 8 and rows[1]["variant"]["continuation"] is True
    for row in rows:
        steady = row["surfer"]["steady"]
        assert steady["complete"] and steady["min_steps_per_session"] >= 3 and steady["steps_per_s"] > 0
        assert steady["seconds"] < 60 and row["surfer"]["seconds"] < 60  # the run stopped when the window closed
        assert steady["computed_prompt_tokens_per_step"] > 0 and steady["kv_cache_usage"] is not None
        assert steady["computed_from"] == "prompt_tokens - prefix_cache_hits" and steady["preemptions"] == 0
    # image refs: most images named by uuid, taken from the (stand-in's) processor cache; none without them
    assert rows[3]["variant"]["image_refs"] is True and rows[3]["surfer_server"]["mm_cache_hit_rate"] > 0.5
    assert rows[1]["surfer_server"]["mm_cache_hit_rate"] is None
    computed = [r["surfer"]["steady"]["computed_prompt_tokens_per_step"] for r in rows]
    assert computed[1] < computed[0] / 2  # blocks + continuation: the server computes far less per agent step
    gains = data["variant_gains"]["holotron"]
    assert list(gains) == ["blocks+cont/window+nocont c=3", "blocks+cont+refs/window+nocont c=3"] and gains["blocks+cont/window+nocont c=3"]["steady_steps_per_s"]
    assert "| holotron | blocks+cont | 3 |" in result.output and "steady steps/s" in result.output


def test_lengthened_replays_play_long_sessions_without_repeating_an_image() -> None:
    from surfer.apps.options import DEMO_RECORDINGS
    from surfer.tools.replay import lengthened, load_recording, read_screenshots

    recording = load_recording(DEMO_RECORDINGS / "demo-1280x800")
    long = lengthened(recording, 12)
    assert len(long.frames) == 12 and long.frames[5].path == recording.frames[0].path and long.frames[5].loop == 1
    shots = read_screenshots(long, variant=3)
    assert len({s.data for s in shots}) == 12  # every pass marked differently
    assert [s.data for s in shots[:5]] == [s.data for s in read_screenshots(recording, variant=3)]
    assert lengthened(recording, 3) is recording


def test_warm_steps_start_sessions_deep_without_calling_the_server(standin, tmp_path) -> None:
    lock = threading.Lock()
    policy_images: list[int] = []

    def model(request):  # type: ignore[no-untyped-def]
        if request.role == "localizer":
            return {"x": 500, "y": 500}
        content = request.body["messages"][-1]["content"]
        with lock:
            policy_images.append(sum(1 for part in content if part.get("type") == "image_url"))
        return {"thought": "click", "notes": "", "action": {"type": "click", "target": "the middle"}}

    server = standin(model, kv_capacity=10**7, delay=0.05)
    out = tmp_path / "gpu.json"
    base = ["bench", "gpu", "run", "--base-url", server.base_url, "--model", f"holo2={server.model}", "--levels", "2",
            "--min-steps", "2", "--window", "60", "--no-bare", "--out", str(out)]
    variants = "layout=blocks,continuation=on,block_images=24,warm_steps=6"
    result = CliRunner().invoke(app, [*base, "--variants", variants, "--session-steps", "20"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(out.read_text())["models"][0]["levels"]
    assert row["name"] == "blocks+cont+block24+warm6" and row["variant"]["warm_steps"] == 6
    surfer = row["surfer"]
    # the server saw no warm-up step: its first policy requests already held 7 screenshots (6 warm + the current)
    assert policy_images[0] == 7 and min(policy_images) == 7 and policy_images.count(7) == 2  # one first request each
    # calls and steps counted are the server's only (the 2 x 6 warm-up steps and their 24 calls are not)
    assert 2 <= surfer["steps"] <= len(policy_images) and surfer["model_calls"] <= 2 * len(policy_images)
    steady = surfer["steady"]
    assert steady["complete"] and steady["min_steps_per_session"] >= 2
    # sessions too short for the warm-up and the measured steps: a clear error before anything is served
    result = CliRunner().invoke(app, [*base, "--variants", variants, "--session-steps", "8"])
    assert result.exit_code == 2 and "raise --session-steps to 9" in result.output


def test_a_record_tokens_variant_asks_every_call_for_its_ids_and_logprobs(standin, tmp_path) -> None:
    """What capture costs the server is measured as a variant beside the same requests without it."""
    lock = threading.Lock()
    asked: list[bool] = []

    def model(request):  # type: ignore[no-untyped-def]
        with lock:
            asked.append(bool(request.body.get("logprobs")) and bool(request.body.get("return_token_ids")))
        if request.role == "localizer":
            return {"x": 500, "y": 500}
        return {"thought": "click", "notes": "", "action": {"type": "click", "target": "the middle"}}

    server = standin(model, kv_capacity=10**7)
    out = tmp_path / "gpu.json"
    result = CliRunner().invoke(app, [
        "bench", "gpu", "run", "--base-url", server.base_url, "--model", f"holo2={server.model}", "--levels", "2",
        "--variants", "layout=window; layout=window,record=on", "--min-steps", "2", "--window", "30",
        "--session-steps", "4", "--no-bare", "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())["models"][0]["levels"]
    assert [r["name"] for r in rows] == ["window", "window+record"] and rows[1]["variant"]["record_tokens"] is True
    # the reference's calls asked for nothing, every call of the recording variant asked for both (in order: the
    # reference's calls, those still in flight when its window closed too, reached the server before the next run)
    first = asked.index(True)
    assert first >= rows[0]["surfer"]["model_calls"] > 0 and not any(asked[:first]) and all(asked[first:])
    assert len(asked) - first >= rows[1]["surfer"]["model_calls"] > 0


def test_no_ending_keeps_every_session_to_its_length(standin, tmp_path) -> None:
    """A model that answers as soon as the schema lets it (as random weights under the grammar often do)."""
    lock = threading.Lock()
    offered: list[bool] = []

    def model(request):  # type: ignore[no-untyped-def]
        if request.role == "localizer":
            return {"x": 500, "y": 500}
        if request.role == "validator":
            return {"verdict": "accept", "reasons": "fine"}
        kinds = {m["properties"]["type"].get("const") for m in request.body["response_format"]["json_schema"]["schema"]
                 ["properties"]["action"]["anyOf"]}
        with lock:
            offered.append("answer" in kinds or "ask_user" in kinds or "fail" in kinds)
        if "answer" in kinds:
            return {"thought": "done", "notes": "", "action": {"type": "answer", "text": "42"}}
        return {"thought": "click", "notes": "", "action": {"type": "click", "target": "the middle"}}

    server = standin(model, kv_capacity=10**7)
    runs = {}
    for flag in ([], ["--no-ending"]):
        out = tmp_path / f"gpu{len(flag)}.json"
        result = CliRunner().invoke(app, [
            "bench", "gpu", "run", "--base-url", server.base_url, "--model", f"holo2={server.model}", "--levels", "2",
            "--window", "60", "--min-steps", "2", "--session-steps", "4", "--no-bare", "--out", str(out), *flag])
        assert result.exit_code == 0, result.output
        runs[bool(flag)] = json.loads(out.read_text())
    ended = runs[False]["models"][0]["levels"][0]["surfer"]
    assert ended["steps_per_session"] == 1 and "limit" not in ended["statuses"]  # every session answered at once
    kept = runs[True]["models"][0]["levels"][0]["surfer"]
    # no session ended before its length (the ones still running when the steady window closed are cancelled)
    assert runs[True]["no_ending"] is True and set(kept["statuses"]) <= {"limit"}
    assert kept["steady"]["complete"] and kept["steps"] >= 2 * 3  # each of the 2 sessions: its first step and 2 more
    assert offered[0] and not any(offered[-kept["steps"]:])  # the reference was offered answer; this run never was
    from surfer.agent.roles import FinalDecision
    from surfer.bench.gpu.backends import ENDING_ACTIONS, without_actions
    from surfer.models.schema import portable_schema

    final = portable_schema(FinalDecision.model_json_schema())  # the last step's: nothing but ending actions
    assert without_actions(final, ENDING_ACTIONS) == final


def test_bare_replay_of_an_image_refs_run_sends_whole_images(standin, tmp_path) -> None:
    """The bare generator replays what surfer sent after the server's caches were emptied, without surfer's
    resend on a cache miss: the recorded bodies carry every image in full (here the server holds 4 images, so
    uuid-only parts would miss)."""
    server = standin(ClickEverywhere(), kv_capacity=10**7, image_cache=4)
    out = tmp_path / "gpu.json"
    result = CliRunner().invoke(app, [
        "bench", "gpu", "run", "--base-url", server.base_url, "--model", f"holotron={server.model}", "--levels", "2",
        "--variants", "layout=blocks,continuation=on,image_refs=on", "--min-steps", "2", "--window", "30",
        "--session-steps", "8", "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(out.read_text())["models"][0]["levels"]
    assert row["surfer_server"]["mm_cache_hit_rate"] > 0  # surfer's own run named images by uuid
    # every recorded body answered (calls still in flight when the window closed are recorded too)
    assert row["bare"]["model_calls"] >= row["surfer"]["model_calls"] > 0


@pytest.mark.serial  # the auto controller reads steps per second and the cache over time
def test_auto_finds_the_level_the_prefix_cache_holds_in_deep_sessions(standin, tmp_path) -> None:
    """The seeds' regime in small: sessions 7 screenshots deep, a prefix cache (LRU) that keeps about four
    sessions' histories, prefills that take turns on one "GPU". Fixed at 8 sessions the cache keeps none of
    them; auto must grow, see the hit rate collapse, park sessions between steps so that the lower limit
    takes effect while they are long, and stay below the level that overflowed."""
    server = standin(ClickEverywhere(), kv_capacity=10**7, prefix_capacity=20000, token_seconds=0.0001)
    out = tmp_path / "gpu.json"
    result = CliRunner().invoke(app, [
        "bench", "gpu", "run", "--base-url", server.base_url, "--model", f"holo2={server.model}", "--levels", "2,12",
        "--auto-only", "--auto-interval", "0.5", "--window", "8", "--no-bare", "--session-steps", "20", "--out", str(out),
        "--variants", "layout=blocks,continuation=on,block_images=32,warm_steps=6",
    ])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(out.read_text())["models"][0]["levels"]
    decisions = row["surfer"]["concurrency_control"]["decisions"]
    reasons = [d["reason"] for d in decisions]
    collapse = next(k for k, reason in enumerate(reasons) if reason.startswith("cache short (prefix hit"))
    overflowed = decisions[collapse - 1]["limit"]  # the level the increase before it reached
    assert decisions[collapse]["limit"] < overflowed
    parked = [int(m.group(1)) for reason in reasons[collapse:] if (m := re.search(r"(\d+) parked", reason))]
    assert max(parked, default=0) > 0  # the sessions above the lower limit parked between steps
    assert max(d["limit"] for d in decisions[collapse:]) < overflowed  # and it never went back there


@pytest.mark.serial  # fixed levels and auto timed side by side
def test_bench_gpu_emulate_runs_fixed_levels_and_auto_against_a_stand_in_in_a_child_process(tmp_path) -> None:
    out = tmp_path / "emulated.json"
    result = CliRunner().invoke(app, [
        "bench", "gpu", "emulate", "--levels", "1,2", "--window", "2", "--session-steps", "10", "--auto-interval", "0.5",
        "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["stand_in"]["prefix_capacity"] == 20000
    comparison = data["auto_vs_best_fixed"]
    assert [row["concurrency"] for row in comparison["rows"]] == [1, 2, "auto"]
    assert all(row["steps_per_s"] > 0 for row in comparison["rows"])
    assert comparison["best_fixed"]["concurrency"] in (1, 2) and comparison["ratio"] > 0
    assert "auto / best fixed:" in result.output
    bad = CliRunner().invoke(app, ["bench", "gpu", "emulate", "--variant", "layout=nowhere", "--out", str(out)])
    assert bad.exit_code == 2 and "error:" in bad.output
    # refused before anything starts, naming the flag given (not a ZeroDivisionError, not "--concurrency")
    for flags, said in ((["--window", "0"], "--window must be more than 0"), (["--auto-interval", "0"], "--auto-interval"),
                        (["--levels", "0,2"], "--levels must list positive integers")):
        refused = CliRunner().invoke(app, ["bench", "gpu", "emulate", *flags, "--out", str(out)])
        assert refused.exit_code == 2 and said in refused.output and "Traceback" not in refused.output, refused.output


def test_gpu_bench_reads_an_sglang_server_and_flushes_its_cache_between_runs(standin, tmp_path):
    """Against a server that answers as SGLang does (its /metrics names, /flush_cache), the bench says which
    engine it measured, empties the radix cache before each run and reads the engine's counters in the window."""
    def model(request):  # type: ignore[no-untyped-def]
        if request.role == "localizer":
            return {"x": 500, "y": 500}
        return {"thought": "click", "notes": "", "action": {"type": "click", "target": "the middle"}}

    server = standin(model, engine="sglang", kv_capacity=10**7)
    flushes: list[int] = []
    clear = server.prefix_cache.clear
    server.prefix_cache.clear = lambda: (flushes.append(len(server.requests)), clear())  # type: ignore[method-assign]
    out = tmp_path / "gpu.json"
    result = CliRunner().invoke(app, [
        "bench", "gpu", "run", "--base-url", server.base_url, "--model", f"holotron={server.model}", "--levels", "2",
        # (the run ends when its steady window closes: the window is only an upper bound, roomy for a loaded runner;
        # two steps a session in it: with one, a loaded runner's window could hold steps whose calls all came
        # before its first /metrics reading, and no computed token)
        "--window", "60", "--min-steps", "2", "--no-bare", "--out", str(out), "--session-steps", "6",
        "--variants", "layout=window,continuation=off;layout=conversation,continuation=on",
    ])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(out.read_text())["models"]
    assert entry["engine"] == "sglang"
    assert len(flushes) == 2 and flushes[0] == 0 < flushes[1]  # before each run: the second after the first's requests
    for row in entry["levels"]:
        assert row["caches_reset"] is True
        counters = row["surfer"]["steady"]
        assert counters["computed_prompt_tokens_per_step"] > 0 and counters["prefix_cache_hit_rate"] is not None
    window, conversation = (row["surfer"]["steady"]["prefix_cache_hit_rate"] for row in entry["levels"])
    assert conversation > window  # each request extends the last: the stand-in's prefix cache reuses it


@pytest.mark.parametrize("placement, spread", [("session", False), ("round-robin-per-request", True)])
def test_gpu_bench_over_several_servers_places_sessions_or_spreads_requests(standin, tmp_path, placement, spread):
    def model(request):  # type: ignore[no-untyped-def]
        if request.role == "localizer":
            return {"x": 500, "y": 500}
        return {"thought": "click", "notes": "", "action": {"type": "click", "target": "the middle"}}

    a, b = standin(model, kv_capacity=100_000), standin(model, kv_capacity=100_000)
    out = tmp_path / "gpu.json"
    result = CliRunner().invoke(app, [
        "bench", "gpu", "run", "--base-url", a.base_url, "--base-url", b.base_url, "--placement", placement,
        "--model", f"holotron={a.model}", "--levels", "2", "--window", "20", "--min-steps", "0", "--session-steps", "6", "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["servers"] == [a.base_url, b.base_url] and data["placement"] == placement
    row = data["models"][0]["levels"][0]
    assert row["surfer"]["sessions_errored"] == 0 and row["bare"]["model_calls"] == row["surfer"]["model_calls"]
    assert row["surfer_server"]["samples"] >= 2  # both servers' /metrics, read together
    sessions: dict[str, set[int]] = {}
    for number, server in enumerate((a, b)):
        for request in server.requests:
            sessions.setdefault(request.session or "", set()).add(number)
    surfer_sessions = {k: v for k, v in sessions.items() if k}  # the bare generator names none
    assert len(surfer_sessions) == 4 and any(len(v) == 2 for v in surfer_sessions.values()) == spread
    assert {n for v in surfer_sessions.values() for n in v} == {0, 1}
    bad = CliRunner().invoke(app, ["bench", "gpu", "run", "--base-url", a.base_url, "--placement", "random",
                                   "--model", f"holotron={a.model}"])
    assert bad.exit_code == 2 and "--placement must be one of session, round-robin-per-request" in bad.output
