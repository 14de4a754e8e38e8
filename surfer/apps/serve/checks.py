"""What a running model server says of how it was started, against what a
profile needs (`surfer doctor`): which engine it is (its /metrics names), and
the serving settings `surfer serve` would have given it — read from SGLang's
`/server_info` (its server arguments) or vLLM's `vllm:cache_config_info`
gauge (its cache configuration) and `/v1/models` (the context length)."""

from __future__ import annotations

import re
from typing import Any

from .sglang import MEASURED_FLAGS as SGLANG_FLAGS

ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
POOL_RATIO = "--mamba-full-memory-ratio"
MAMBA_STRATEGIES = ("no_buffer", "extra_buffer", "extra_buffer_lazy")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def info_labels(text: str, name: str) -> dict[str, str]:
    """The labels of an info gauge (`name{key="value",...} 1.0`) in a Prometheus page."""
    for line in text.splitlines():
        if line.startswith(name + "{"):
            return dict(_LABEL.findall(line[len(name):]))
    return {}


def sglang_findings(info: dict[str, Any], profile: Any, max_model_len: int | None) -> list[str]:
    """What an SGLang server started with `info` (its /server_info) lacks for `profile`."""
    missing = []
    if not info.get("enable_cache_report"):
        missing.append("--enable-cache-report is off: responses do not say how many prompt tokens were cached")
    if profile.serving.hybrid:
        strategy = info.get("mamba_radix_cache_strategy") or info.get("mamba_scheduler_strategy")
        if strategy not in MAMBA_STRATEGIES:
            missing.append(f"the Mamba radix cache strategy is {strategy!r}: pass --mamba-radix-cache-strategy no_buffer "
                           "(SGLang picks none for Holotron's VL architecture)")
        elif strategy == "no_buffer" and not info.get("disable_overlap_schedule"):
            missing.append("no_buffer with the overlap scheduler on: pass --disable-overlap-schedule")
        ratio, served_with = info.get("mamba_full_memory_ratio"), SGLANG_FLAGS.get(profile.name, {}).get(POOL_RATIO)
        if ratio is not None and served_with and float(ratio) < float(served_with):
            missing.append(f"the Mamba state pool is sized at {POOL_RATIO} {ratio}: SGLang runs at most a third of its "
                           f"states at once (on an 80 GB card about 45 {profile.name} requests at 0.9) and queues the "
                           f"rest; pass {POOL_RATIO} {served_with}")
        dtype = str(info.get("mamba_ssm_dtype") or "")
        if dtype and dtype != "float32":
            missing.append(f"the SSM state is {dtype}: float32 is the accuracy-safe setting (--mamba-ssm-dtype float32)")
    if int(info.get("tokenizer_worker_num") or 1) < 2:
        missing.append("one tokenizer worker prepares every request's screenshots: pass --tokenizer-worker-num 6")
    if max_model_len and info.get("context_length") and int(info["context_length"]) < max_model_len:
        missing.append(f"the context is {info['context_length']} tokens, {profile.name} is served with {max_model_len}")
    return missing


def vllm_findings(cache: dict[str, str], profile: Any, served_len: int | None, max_model_len: int | None) -> list[str]:
    """What a vLLM server with cache configuration `cache` (its vllm:cache_config_info labels) lacks for `profile`."""
    missing = []
    if cache and cache.get("enable_prefix_caching", "True") != "True":
        missing.append("prefix caching is off: pass --enable-prefix-caching")
    dtype = cache.get("mamba_ssm_cache_dtype", "")
    if profile.serving.hybrid and dtype not in ("", "auto", "float32"):
        missing.append(f"the SSM state is {dtype}: float32 is the accuracy-safe setting (--mamba-ssm-cache-dtype float32)")
    if max_model_len and served_len and served_len < max_model_len:
        missing.append(f"the context is {served_len} tokens, {profile.name} is served with {max_model_len}")
    return missing


async def read_serving(base_url: str, model: str | None) -> tuple[str | None, dict[str, Any], int | None]:
    """(engine, its settings, the served context length): SGLang's server arguments, or vLLM's cache
    configuration; (None, {}, None) for a server without /metrics."""
    from surfer.models.json_http import http_library, proxied_client
    from surfer.models.metrics import engine_of, parse_metrics

    root = base_url.rstrip("/").removesuffix("/v1")
    async with proxied_client(http_library().AsyncClient, root + "/metrics", timeout=10) as client:
        try:
            page = await client.get(root + "/metrics")
        except Exception:  # noqa: BLE001 - no /metrics: an engine surfer cannot tell
            return None, {}, None
        text = page.text if page.status_code == 200 else ""
        engine = engine_of(parse_metrics(text))
        served_len = None
        try:
            listed = (await client.get(base_url.rstrip("/") + "/models")).json().get("data") or []
            served_len = next((m.get("max_model_len") for m in listed if m.get("id") == model), None)
        except Exception:  # noqa: BLE001 - the endpoint check says what is wrong with /models
            pass
        if engine == "sglang":
            for path in ("/server_info", "/get_server_info"):
                try:
                    answer = await client.get(root + path)
                except Exception:  # noqa: BLE001
                    continue
                if answer.status_code == 200:
                    return engine, answer.json(), served_len
            return engine, {}, served_len
        return engine, info_labels(text, "vllm:cache_config_info"), served_len
