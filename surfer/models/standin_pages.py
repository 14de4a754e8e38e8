"""What the stand-in server (surfer/models/standin.py) shows of the engine it plays:
its /metrics page in vLLM's or SGLang's names, and the engine's own account of
its settings (vLLM: the `vllm:cache_config_info` gauge's labels; SGLang: the
`/server_info` document), so that what reads a real server is tested on both.
With several data-parallel ranks, vLLM's series come once per engine (label
`engine="K"`, the counts on engine 0) and SGLang's /server_info says `dp_size`."""

from __future__ import annotations

import json
from typing import Any

ENGINES = ("vllm", "sglang")


def metrics_page(engine: str, model: str, counts: dict[str, float], settings: dict[str, Any] | None, ranks: int = 1) -> str:
    """`counts`: kv_usage, running, waiting, preemptions, prompt, cached, generated, cache_queries, mm_queries, mm_hits;
    `ranks`: the data-parallel ranks (vLLM: a series per engine)."""
    if engine == "sglang":
        gauge = f'model_name="{model}",engine_type="unified",tp_rank="0",pp_rank="0"'
        counter = f'model_name="{model}",engine_type="unified"'
        lines = [
            f"sglang:num_running_reqs{{{gauge}}} {float(counts['running'])}",
            f"sglang:num_queue_reqs{{{gauge}}} {float(counts['waiting'])}",
            f"sglang:token_usage{{{gauge}}} {float(counts['kv_usage'])}",
            f"sglang:cache_hit_rate{{{gauge}}} 0.0",  # the last batch's only: never to be used as a rate
            f"sglang:num_retracted_requests_total{{{counter}}} {float(counts['preemptions'])}",
            f"sglang:prompt_tokens_total{{{counter}}} {float(counts['prompt'])}",
            f'sglang:cached_tokens_total{{{counter},cache_source="device"}} {float(counts["cached"])}',
            f"sglang:generation_tokens_total{{{counter}}} {float(counts['generated'])}",
        ]
        return "\n".join(lines) + "\n"
    values = {"kv_cache_usage_perc": counts["kv_usage"], "num_requests_running": counts["running"],
              "num_requests_waiting": counts["waiting"], "num_preemptions_total": counts["preemptions"],
              "prefix_cache_queries_total": counts["cache_queries"], "prefix_cache_hits_total": counts["cached"],
              "prompt_tokens_total": counts["prompt"], "generation_tokens_total": counts["generated"],
              "mm_cache_queries_total": counts["mm_queries"], "mm_cache_hits_total": counts["mm_hits"]}
    if ranks > 1:
        text = "".join(f'vllm:{name}{{engine="{k}",model_name="{model}"}} {float(value) if k == 0 else 0.0}\n'
                       for name, value in values.items() for k in range(ranks))
    else:
        text = "".join(f'vllm:{name}{{model_name="{model}"}} {float(value)}\n' for name, value in values.items())
    if settings:
        labels = ",".join(f'{key}="{value}"' for key, value in settings.items())
        text += f"vllm:cache_config_info{{{labels}}} 1.0\n"
    return text


def server_info(model: str, settings: dict[str, Any] | None, max_model_len: int | None, ranks: int = 1) -> str:
    """SGLang's `/server_info`: its server arguments, flat."""
    info = {"model_path": model, "served_model_name": model, "context_length": max_model_len, "version": "0.5.15",
            "dp_size": ranks, **(settings or {})}
    return json.dumps(info)
