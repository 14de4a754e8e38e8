#!/usr/bin/env python3
"""On a GPU machine with vLLM (scripts/gpu_device.sh unpack): does an adapter loaded into a running vLLM
in the middle of a batch serve the sessions started after it, while the sessions that started before
keep theirs? Random weights, random adapters: what is checked is the serving path, not answers.

    python3 scripts/gpu_adapters.py adapter /tmp/models/holo2 /tmp/adapters/step-1 --seed 1
    python3 -m surfer serve /tmp/models/holo2 --profile holo2 --lora -- --load-format dummy &
    python3 scripts/gpu_adapters.py check http://127.0.0.1:8000/v1 /tmp/models/holo2 /tmp/adapters $OUT/adapters.json

`adapter` writes a PEFT-format LoRA (rank 8 on every language layer's q_proj and v_proj, random
values) for a model directory of `surfer bench gpu make-model` (Qwen3-VL's names). `check` loads
step-1, runs a replayed batch of 2 x SESSIONS sessions on it, loads step-2 once the first wave has
finished (timed), switches, and reads every run's calls: each session one adapter, the second wave
on step-2, vLLM answering with the adapter's name. JSON out."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def make_adapter(model_dir: Path, out: Path, rank: int = 8, seed: int = 1) -> Path:
    import numpy as np
    from safetensors.numpy import save_file

    config = json.loads((model_dir / "config.json").read_text())
    text = config.get("text_config", config)
    hidden, layers = text["hidden_size"], text["num_hidden_layers"]
    head_dim = text.get("head_dim") or hidden // text["num_attention_heads"]
    outs = {"q_proj": text["num_attention_heads"] * head_dim, "v_proj": text["num_key_value_heads"] * head_dim}
    rng = np.random.default_rng(seed)
    tensors = {}
    for layer in range(layers):
        for module, width in outs.items():
            key = f"base_model.model.model.language_model.layers.{layer}.self_attn.{module}"
            tensors[f"{key}.lora_A.weight"] = (rng.standard_normal((rank, hidden)) * 0.01).astype(np.float16)
            tensors[f"{key}.lora_B.weight"] = (rng.standard_normal((width, rank)) * 0.01).astype(np.float16)
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    (out / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 2 * rank, "lora_dropout": 0.0,
        "bias": "none", "target_modules": sorted(outs), "base_model_name_or_path": str(model_dir)}, indent=1))
    return out


async def check(base_url: str, model_dir: Path, adapters: Path, out: Path, sessions: int, steps: int) -> dict:
    import surfer
    from surfer import policy
    from surfer.agent.config import AgentConfig
    from surfer.apps.options import DEMO_RECORDINGS
    from surfer.tools.replay import load_recordings

    for n in (1, 2):
        if not (adapters / f"step-{n}" / "adapter_config.json").exists():
            make_adapter(model_dir, adapters / f"step-{n}", seed=n)
    config = AgentConfig(base_url=base_url, model=str(model_dir), profile="holo2", max_steps=steps, max_seconds=300)
    report: dict = {"base_url": base_url, "model": str(model_dir), "sessions_per_wave": sessions, "max_steps": steps}
    started = time.perf_counter()
    await policy.load(config, "step-1", str(adapters / "step-1"))
    report["load_step_1_s"] = round(time.perf_counter() - started, 2)
    switch = policy.PolicySwitch("step-1@1")
    tasks = [{"id": f"s{k}", "task": "Register Ada"} for k in range(2 * sessions)]
    records, switched_after = [], None
    rundir = out.parent / "adapters-runs"
    began = time.perf_counter()
    async for record in surfer.rollouts(config, tasks, out_dir=rundir, concurrency=sessions, policy=switch,
                                        replay=load_recordings(DEMO_RECORDINGS)):
        records.append(record)
        if len(records) == sessions // 2 and switched_after is None:  # mid-batch: half the first wave is done
            started = time.perf_counter()
            await policy.load(config, "step-2", str(adapters / "step-2"))
            report["load_step_2_mid_batch_s"] = round(time.perf_counter() - started, 2)
            await switch.to("step-2@2")
            switched_after = len(records)
            report["running_at_switch"] = switch.running()
    report["batch_s"] = round(time.perf_counter() - began, 1)
    sessions_report = []
    for record in records:
        models, versions, calls = set(), set(), 0
        for line in (rundir / record["run_dir"] / "trajectory.jsonl").read_text().splitlines():
            for role_calls in json.loads(line)["calls"].values():
                for call in role_calls:
                    calls += 1
                    models.add(call["model"])
                    versions.add(call.get("policy_version"))
        sessions_report.append({"id": record["id"], "policy": record.get("policy"), "status": record["status"],
                                "calls": calls, "models": sorted(models), "versions": sorted(map(str, versions))})
    report["sessions"] = sessions_report
    report["by_policy"] = {p: sum(s["policy"] == p for s in sessions_report) for p in ("step-1@1", "step-2@2")}
    report["one_adapter_per_session"] = all(len(s["models"]) <= 1 for s in sessions_report)
    report["calls_match_policy"] = all(s["models"] == [s["policy"].split("@")[0]] for s in sessions_report if s["calls"])
    await switch.drained("step-1")
    await policy.unload(config, "step-1")
    report["served_after"] = [{"models": s.models, "adapters": s.adapters} for s in await policy.adapters(config)]
    out.write_text(json.dumps(report, indent=1))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("adapter")
    one.add_argument("model_dir", type=Path)
    one.add_argument("out", type=Path)
    one.add_argument("--rank", type=int, default=8)
    one.add_argument("--seed", type=int, default=1)
    run = sub.add_parser("check")
    run.add_argument("base_url")
    run.add_argument("model_dir", type=Path)
    run.add_argument("adapters", type=Path)
    run.add_argument("out", type=Path)
    run.add_argument("--sessions", type=int, default=16)
    run.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    if args.command == "adapter":
        print(make_adapter(args.model_dir, args.out, args.rank, args.seed))
        return
    report = asyncio.run(check(args.base_url, args.model_dir, args.adapters, args.out, args.sessions, args.steps))
    print(json.dumps({k: v for k, v in report.items() if k != "sessions"}, indent=1))


if __name__ == "__main__":
    main()
