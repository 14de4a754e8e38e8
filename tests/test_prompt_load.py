"""Shaping the load for the GPU, on CPU: prompt layouts send valid requests for
every profile (over real HTTP to the stand-in), `surfer bench prompts`
figures on a small recorded run, image budgets, and `--concurrency auto`
against a stand-in server that reports a KV capacity through /metrics."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
from typer.testing import CliRunner

from surfer.agent.config import AgentConfig, load_config
from surfer.agent.loop import Agent
from surfer.fleet.batch import Batch, BatchTask, make_batch
from surfer.apps.cli import app
from surfer.apps.options import DEMO_RECORDINGS
from surfer.core.coordinates import Size
from surfer.core.errors import ConfigError
from surfer.models.profiles import PROFILES
from surfer.tools.replay import ReplayEnvironment, load_recordings

RUN = DEMO_RECORDINGS / "demo-1280x800"


def _answer(request):  # type: ignore[no-untyped-def]
    if request.role == "localizer":
        return {"x": 500, "y": 500} if "click_absolute" not in request.text else {"action": "click_absolute", "x": 5, "y": 5}
    if request.role == "validator":
        return {"verdict": "accept", "reasons": "shown"}
    return {"thought": "go on", "notes": "", "action": {"type": "click", "target": "the middle"}}


@pytest.mark.parametrize("continuation", [False, True])
@pytest.mark.parametrize("layout", ["window", "blocks"])
def test_every_layout_gives_valid_requests_for_every_profile(standin, tmp_path, layout: str, continuation: bool) -> None:
    # a 12-screenshot recording (the demo's screens, twice and then some), so that blocks drop once
    frames = tmp_path / "frames"
    frames.mkdir()
    shots = sorted((RUN / "screenshots").glob("*.jpg"))
    for k in range(12):
        shutil.copy(shots[k % len(shots)], frames / f"{k:03d}.jpg")
    for name, profile in PROFILES.items():
        if name == "qwen3-vl":  # Holo2's images and templates with no reply prefix (as holo1.5's): covered
            continue
        server = standin(_answer)
        agent = Agent(base_url=server.base_url, model=server.model, profile=name, prompt_layout=layout,
                      environment=ReplayEnvironment(frames, variant=7), max_steps=20, role_continuation=continuation)
        assert agent.continuation == {"localizer": continuation, "validator": continuation}
        result = asyncio.run(agent.run("Register as a new member."))
        assert result.status == "limit", (name, result.reason)
        policy = [r for r in server.requests if r.role == "policy"]
        localizer = [r for r in server.requests if r.role == "localizer"]
        assert len(policy) == len(localizer) == 12
        window = profile.max_images
        previous = None
        for step, (p, loc) in enumerate(zip(policy, localizer), 1):
            messages = p.body["messages"]
            assert [m["role"] for m in messages] == ["system", "user"]
            assert len(p.image_urls) == (min(step, window) if layout == "window" else (step - 1) % (2 * window - 1) + 1)
            if continuation:  # the policy's request byte for byte, its reply, then the localizer's instruction
                assert loc.body["messages"][:2] == messages and loc.image_urls == p.image_urls
                assert [m["role"] for m in loc.body["messages"][2:]] == ["assistant", "user"]
                repeated = _text(loc.body["messages"][2])  # the reply after what the generation prompt added
                assert repeated.startswith(profile.reply_prefix)
                assert json.loads(repeated.removeprefix(profile.reply_prefix))["action"]["target"] == "the middle"
                assert _text(loc.body["messages"][3]).startswith("Now localize an element on the last screenshot")
            else:
                assert p.image_urls[-1] == loc.image_urls[0]  # the newest screenshot is the one the localizer gets
                assert loc.body["messages"][0]["content"][0]["type"] == "image_url"  # the localizer starts with it
            assert messages[1]["content"][-1]["text"].endswith("Decide the next action.")
            content = messages[1]["content"]
            if layout == "blocks" and previous is not None and len(p.image_urls) > 1:
                kept = previous[:-1]  # everything but the changing tail is the start of this request
                assert content[:len(kept)] == kept, (name, step)
            previous = content
        assert all(len(p.image_urls) <= (window if layout == "window" else 2 * window - 1) for p in policy)


@pytest.mark.parametrize("continuation", [False, True])
def test_the_conversation_layout_extends_each_request_with_its_reply(standin, tmp_path, continuation: bool) -> None:
    """Each policy request of a block is the last one byte for byte, the reply the server gave as the
    assistant's turn, and one user turn (what happened, the new screenshot, the page, the instruction);
    a new block starts a new conversation. What the run said between steps is in the next turn only."""
    frames = tmp_path / "frames"
    frames.mkdir()
    shots = sorted((RUN / "screenshots").glob("*.jpg"))
    for k in range(12):
        shutil.copy(shots[k % len(shots)], frames / f"{k:03d}.jpg")
    asked = []

    def answer(request):  # type: ignore[no-untyped-def]  # step 3 answers, and the validator says no
        if request.role == "policy":
            asked.append(request)
            if len(asked) == 3:
                return {"thought": "done", "notes": "", "action": {"type": "answer", "text": "42"}}
        if request.role == "validator":
            return {"verdict": "reject", "reasons": "the form is not sent"}
        return _answer(request)

    server = standin(answer)
    agent = Agent(base_url=server.base_url, model=server.model, profile="holotron", prompt_layout="conversation",
                  environment=ReplayEnvironment(frames, variant=3), max_steps=20, role_continuation=continuation)
    result = asyncio.run(agent.run("Register as a new member."))
    assert result.status == "limit", result.reason
    policy = [r for r in server.requests if r.role == "policy"]
    localizer = [r for r in server.requests if r.role in ("localizer", "validator")]
    assert len(policy) == 13  # 12 screens, the one the rejected answer was given on seen twice
    block = 2 * PROFILES["holotron"].max_images - 1
    previous = None
    for step, request in enumerate(policy, 1):
        messages = request.body["messages"]
        in_block = (step - 1) % block + 1
        assert len(request.image_urls) == in_block
        assert [m["role"] for m in messages] == ["system", *["user", "assistant"] * (in_block - 1), "user"]
        assert _text(messages[-1]).endswith("Decide the next action.") and f"Screenshot of step {step}:" in _text(messages[-1])
        if in_block > 1:
            assert messages[:len(previous)] == previous, step  # the last request, byte for byte
            reply = json.dumps(answer(policy[step - 2]) if step != 4 else
                               {"thought": "done", "notes": "", "action": {"type": "answer", "text": "42"}})
            # the reply the server gave, after the empty thinking block its generation prompt ended with
            assert messages[len(previous)] == {"role": "assistant", "content": "<think></think>" + reply}
            assert _text(messages[-1]).startswith(f"Step {step - 1}: " + ("answer" if step == 4 else "click"))
        else:
            assert "Task: Register as a new member." in _text(messages[1])
        previous = messages
        if continuation:  # the localizer continues this very request
            assert localizer[step - 1].body["messages"][:len(messages)] == messages
    turns = [_text(m) for m in policy[4].body["messages"] if m["role"] == "user"]  # step 5's: the whole first block
    told = [k for k, text in enumerate(turns) if "Note: The validator rejected the answer '42': the form is not sent" in text]
    assert told == [3]  # said once, in the turn after the rejection (step 4's), never again


def _text(message):  # type: ignore[no-untyped-def]
    content = message["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def test_prompt_layout_is_checked_in_config_and_profile() -> None:
    with pytest.raises(ConfigError, match="prompt_layout"):
        load_config(overrides={"prompt_layout": "sideways"})
    assert AgentConfig().prompt_layout is None and all(p.prompt_layout == "window" for p in PROFILES.values())


def test_bench_prompts_figures_on_a_recorded_run_are_pinned(tmp_path) -> None:
    out = tmp_path / "prompts.json"
    result = CliRunner().invoke(app, ["bench", "prompts", str(RUN), "--profile", "holo2", "--profile", "holotron",
                                      "--no-hybrid-align", "--json", str(out)])
    assert result.exit_code == 0, result.output
    rows = {(r["profile"], r["layout"], r["continuation"], r["role"]): r for r in json.loads(out.read_text())}
    # (the system prompt's `ask_user` of kind take_over added ~49 tokens a policy request)
    pinned = {  # prompt, reusable, uncached tokens per step; screenshots per request (estimated text, exact images)
        ("holo2", "window", False, "policy"): (3136.4, 531.2, 2605.2, 2.4),
        ("holo2", "blocks", False, "policy"): (3782.0, 2563.2, 1218.8, 3.0),
        ("holotron", "window", False, "policy"): (5037.2, 531.2, 4506.0, 2.4),
        ("holotron", "blocks", False, "policy"): (6158.0, 4147.2, 2010.8, 3.0),
        ("holotron", "window", False, "localizer"): (1492.6, 0.0, 1492.6, 1.0),
        # continuation: the policy's request is the localizer's prefix; its reply and instruction are what is left
        ("holotron", "window", True, "policy"): (5037.2, 531.2, 4506.0, 2.4),
        ("holotron", "window", True, "localizer"): (3908.8, 3795.2, 113.5, 2.25),  # the reply after its <think></think>
        ("holotron", "blocks", True, "all"): (12463.0, 10294.4, 2168.7, 3.0),
        ("holotron", "window", False, "all"): (7638.4, 889.6, 6748.8, 1.9),
        ("holo2", "blocks", True, "all"): (7712.1, 6336.0, 1376.0, 3.0),
        ("holo2", "window", False, "all"): (4628.8, 729.6, 3899.2, 1.9),
    }
    for key, figures in pinned.items():
        row = rows[key]
        assert row["steps"] == 5 and set(row) >= {"profile", "layout", "role", "steps", "prompt_tokens_per_step",
                                                  "reusable_tokens_per_step", "uncached_tokens_per_step",
                                                  "screenshots_per_request"}
        got = (row["prompt_tokens_per_step"], row["reusable_tokens_per_step"], row["uncached_tokens_per_step"],
               row["screenshots_per_request"])
        assert got == figures, key
    assert rows[("holotron", "window", False, "localizer")]["image_tokens_per_request"] == 1794  # 3×2 tiles + thumbnail
    assert "| vllm | holo2 | blocks | off | - | policy |" in result.output
    assert "window on vllm / blocks on vllm uncached" in result.output
    assert "holotron budget - all: window on vllm / blocks+continuation on vllm uncached = 3.11x" in result.output
    nested = tmp_path / "new" / "prompts.json"  # (a folder not made yet, as the other benchmarks' --out)
    only = CliRunner().invoke(app, ["bench", "prompts", str(RUN), "--profile", "holo2", "--continuation", "on",
                                    "--layout", "window", "--json", str(nested)])
    assert only.exit_code == 0 and {r["continuation"] for r in json.loads(nested.read_text())} == {True}
    wrong = CliRunner().invoke(app, ["bench", "prompts", str(RUN), "--continuation", "maybe"])
    assert wrong.exit_code == 2 and "on/off" in wrong.output
    typo = CliRunner().invoke(app, ["bench", "prompts", str(RUN), "--role", "localiser"])  # not an empty table
    assert typo.exit_code == 2 and "unknown role 'localiser'" in typo.output and "validator, all" in typo.output
    bad = CliRunner().invoke(app, ["bench", "prompts", str(tmp_path)])
    assert bad.exit_code == 2 and "no run directories" in bad.output



def test_bench_prompts_counts_a_hybrid_reuse_only_up_to_a_mamba_align_state(tmp_path) -> None:
    """vLLM's Mamba `align` mode keeps a state only where a prefill ends on a block boundary (1,312 tokens for
    Holotron-12B), so a hybrid reuses less than a transformer would of the same prefix (the GPU's figure)."""
    from surfer.bench.prompts import reusable_tokens

    earlier = [([("system", 1000.0), ("shot 1", 500.0)], [("reply", 40.0)])]  # 1,500 tokens: one state, at 1,312
    assert reusable_tokens([("system", 1000.0), ("shot 1", 500.0), ("shot 2", 100.0)], earlier, 1312) == 1312
    assert reusable_tokens([("system", 1000.0), ("other", 600.0)], earlier, 1312) == 0  # diverges before the state
    assert reusable_tokens([("system", 1000.0), ("other", 600.0)], earlier, None) == 992  # a transformer: 16-token blocks
    out = tmp_path / "prompts.json"
    result = CliRunner().invoke(app, ["bench", "prompts", str(RUN), "--profile", "holotron", "--profile", "holo2",
                                      "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "prefix reuse counted as: holotron on vllm: mamba align 1312, holo2 on vllm: 16-token blocks" in result.output
    rows = {(r["profile"], r["layout"], r["continuation"], r["role"]): r for r in json.loads(out.read_text())}
    figures = {key: (r["prompt_tokens_per_step"], r["reusable_tokens_per_step"], r["uncached_tokens_per_step"])
               for key, r in rows.items()}
    # the same requests as the pinned transformer-style counts above: the prompt is unchanged, the reuse is less
    assert figures[("holotron", "blocks", True, "all")] == (12463.0, 9184.0, 3279.1)  # 16-token blocks: 2,168.7 uncached
    assert figures[("holotron", "blocks", True, "localizer")] == (4300.9, 3673.6, 627.3)
    assert figures[("holo2", "blocks", True, "all")] == (7712.1, 6336.0, 1376.0)  # a transformer: unchanged
    assert rows[("holotron", "blocks", True, "all")]["prefix_reuse"] == "mamba align 1312"

def test_bench_prompts_counts_sglang_radix_reuse_to_the_token_and_a_hybrids_where_a_request_ended(tmp_path) -> None:
    """SGLang's radix cache matches to the token; for a hybrid its Mamba radix cache (no_buffer) resumes only
    where an earlier request ended — its prompt and the reply it generated — or at a prefill chunk's end."""
    from surfer.bench.prompts import SGLANG_CHUNK, reusable_tokens

    prompt, reply = [("system", 1000.0), ("shot 1", 500.0)], [("header", 4.0), ("reply", 40.0)]
    earlier = [(prompt, reply)]
    extends = [*prompt, *reply, ("shot 2", 300.0)]  # the conversation layout: the last request, its reply, a new turn
    rewrites = [*prompt[:1], ("shot 1", 500.0), ("tail", 20.0)]  # shares the prompt, not where it ended
    assert reusable_tokens(extends, earlier, None, "sglang", hybrid=True) == 1544
    assert reusable_tokens(rewrites, earlier, None, "sglang", hybrid=True) == 0  # no state inside the prompt
    assert reusable_tokens(rewrites, earlier, None, "sglang", hybrid=False) == 1500  # a transformer: every token
    long = [([("system", 10000.0)], [("reply", 10.0)])]
    assert reusable_tokens([("system", 10000.0), ("x", 5.0)], long, None, "sglang", hybrid=True) == SGLANG_CHUNK
    out = tmp_path / "prompts.json"
    result = CliRunner().invoke(app, ["bench", "prompts", str(RUN), "--profile", "holotron", "--engine", "vllm,sglang",
                                      "--role", "all", "--json", str(out)])
    assert result.exit_code == 0, result.output
    rows = {(r["engine"], r["layout"], r["continuation"]): r["uncached_tokens_per_step"]
            for r in json.loads(out.read_text()) if r["role"] == "all"}
    # requests that extend the last one where it ended are what the hybrid's radix cache reuses
    assert rows[("sglang", "conversation", True)] < rows[("vllm", "conversation", True)] < rows[("vllm", "window", False)]
    assert rows[("sglang", "blocks", True)] > rows[("vllm", "blocks", True)]  # a rewritten tail leaves no state to resume
    assert rows[("vllm", "window", False)] / rows[("sglang", "conversation", True)] >= 2.5
    bad = CliRunner().invoke(app, ["bench", "prompts", str(RUN), "--engine", "tgi"])
    assert bad.exit_code == 2 and "--engine takes vllm or sglang" in bad.output


def test_image_tokens_follow_each_family_and_a_budget_caps_them() -> None:
    screen = Size(1280, 800)
    expected = {"holotron": 7 * 256 + 2, "holo2": 40 * 25 + 2, "holo1.5": 45 * 28 + 2, "openai": 85 + 170 * 6}
    for name, tokens in expected.items():
        image = PROFILES[name].image
        assert image.image_tokens(image.target_size(screen)) == tokens, name
        for budget in (300, 800, 1000):
            sent = image.target_size(screen, budget)
            assert image.image_tokens(sent) <= budget, (name, budget, sent)
    assert PROFILES["holotron"].image.target_size(screen, 800) == Size(1024, 512)  # 2×1 tiles + thumbnail


def _recordings():  # type: ignore[no-untyped-def]
    return load_recordings(DEMO_RECORDINGS)


@pytest.mark.serial  # the controller reads steps per second
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_auto_concurrency_converges_against_a_server_with_a_kv_capacity(standin, tmp_path, engine: str) -> None:
    # about three policy requests fit in the cache; more sessions only queue and thrash (each engine's /metrics names)
    server = standin(_answer, kv_capacity=5000, delay=0.06, engine=engine)
    config = AgentConfig(base_url=server.base_url, model=server.model, profile="holo2", validate_answers=False)
    said: list[str] = []
    tasks = [BatchTask(id=f"t{k}", task="Register.") for k in range(10)]  # about 15 decisions, several of them cache short
    job = Batch(config, tasks, tmp_path / "out", concurrency="auto", replay=_recordings(), say=said.append,
                auto={"start": 2, "interval": 0.25, "maximum": 64})
    summary = asyncio.run(job.run())
    assert summary.statuses == {"limit": 10}
    assert said and "following" in said[0] and "/metrics" in said[0]
    decisions = summary.concurrency["decisions"]
    limits = [d["limit"] for d in decisions]
    assert len(decisions) >= 6
    assert max(limits) > 2  # it grew from the start ...
    assert any(d["reason"].startswith("cache short") for d in decisions)  # ... until the cache was short ...
    assert max(limits) < len(tasks) and all(limit >= 1 for limit in limits)  # ... and stayed near what fits, below every session at once
    assert summary.to_dict()["concurrency"]["mode"] == "auto"


def test_auto_concurrency_without_metrics_runs_a_fixed_concurrency_and_says_so(standin, tmp_path) -> None:
    server = standin(_answer)  # no kv_capacity: no /metrics, like a server that is not vLLM
    config = AgentConfig(base_url=server.base_url, model=server.model, profile="holo2", validate_answers=False)
    said: list[str] = []
    job = Batch(config, [BatchTask(id=f"t{k}", task="Register.") for k in range(3)], tmp_path / "out",
                concurrency="auto", replay=_recordings(), say=said.append, auto={"fallback": 2})
    summary = asyncio.run(job.run())
    assert summary.statuses == {"limit": 3} and job.concurrency == 2
    assert said == [f"--concurrency auto: no vLLM or SGLang /metrics at {server.base_url.removesuffix('/v1')}/metrics; "
                    "running a fixed concurrency of 2 sessions"]
    with pytest.raises(ConfigError, match="number of sessions or 'auto'"):
        Batch(config, [], tmp_path / "x", concurrency="lots")
    with pytest.raises(ConfigError, match="auto runs on one machine"):
        make_batch(config, [], tmp_path / "y", ray_address="auto", concurrency="auto")


def test_gpu_bench_compares_layouts_and_auto_concurrency_in_one_command(standin, tmp_path) -> None:
    # not `serial`: what is checked is which runs the command made and what it read, not the controller's figures
    server = standin(_answer, kv_capacity=20000, delay=0.01)
    out = tmp_path / "gpu.json"
    result = CliRunner().invoke(app, [
        "bench", "gpu", "run", "--base-url", server.base_url, "--model", f"holo2={server.model}", "--levels", "2",
        "--layouts", "window,blocks", "--auto", "--auto-interval", "0.3", "--no-bare", "--window", "20",
        "--session-steps", "8", "--min-steps", "2", "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(out.read_text())["models"]
    runs = [(row["layout"], row["concurrency"]) for row in entry["levels"]]
    assert runs == [("window", 2), ("window", "auto"), ("blocks", 2), ("blocks", "auto")]
    for row in entry["levels"]:
        assert row["surfer"]["steps"] > 0 and row["surfer_server"]["samples"] >= 2  # the stand-in's /metrics was read
    auto = entry["levels"][1]["surfer"]["concurrency_control"]
    assert auto["mode"] == "auto" and auto["metrics"].endswith("/metrics")
    gains = json.loads(out.read_text())["layout_gains"]["holo2"]
    assert set(gains) == {"blocks/window c=2", "blocks/window c=auto",
                          "window auto/best fixed", "blocks auto/best fixed"}
    assert "| holo2 | blocks | auto |" in result.output


def test_bench_prompts_counts_text_with_a_tokenizer_when_given(tmp_path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "Step": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()  # one token per word or punctuation mark
    (tmp_path / "tok").mkdir()
    tokenizer.save(str(tmp_path / "tok" / "tokenizer.json"))
    rows = {}
    for name, extra in (("estimate", []), ("tokenizer", ["--tokenizer", f"holo2={tmp_path / 'tok'}"])):
        out = tmp_path / f"rows-{name}.json"
        result = CliRunner().invoke(app, ["bench", "prompts", str(RUN), "--profile", "holo2", "--layout", "window",
                                          "--json", str(out), *extra])
        assert result.exit_code == 0, result.output
        rows[name] = {r["role"]: r for r in json.loads(out.read_text())}
    assert rows["tokenizer"]["policy"]["text"].startswith("tokenizer ")
    assert rows["estimate"]["policy"]["text"].startswith("estimate")
    # same images, different text counts
    assert rows["tokenizer"]["policy"]["image_tokens_per_request"] == rows["estimate"]["policy"]["image_tokens_per_request"]
    assert rows["tokenizer"]["policy"]["prompt_tokens_per_step"] != rows["estimate"]["policy"]["prompt_tokens_per_step"]
    missing = CliRunner().invoke(app, ["bench", "prompts", str(RUN), "--tokenizer", f"holo2={RUN}"])
    assert missing.exit_code == 2 and "tokenizer.json does not exist" in missing.output
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "tokenizer.json").write_text("[]")
    broken = CliRunner().invoke(app, ["bench", "prompts", str(RUN), "--tokenizer", f"holo2={tmp_path / 'bad'}"])
    assert broken.exit_code == 2 and "is not a tokenizer" in broken.output


def test_image_refs_send_the_same_images_in_smaller_requests(standin, tmp_path) -> None:
    """An agent with `image_refs` (blocks layout, role continuation): the server reads the same images in the
    same requests as without, most of them named by uuid instead of sent again."""
    frames = tmp_path / "frames"
    frames.mkdir()
    shots = sorted((RUN / "screenshots").glob("*.jpg"))
    for k in range(8):
        shutil.copy(shots[k % len(shots)], frames / f"{k:03d}.jpg")
    seen, sizes, named = {}, {}, {}
    for refs in (False, True):
        server = standin(_answer)
        agent = Agent(base_url=server.base_url, model=server.model, profile="holotron", prompt_layout="blocks",
                      environment=ReplayEnvironment(frames, variant=3), max_steps=8, image_refs=refs)
        result = asyncio.run(agent.run("Register as a new member."))
        assert result.status == "limit", result.reason
        seen[refs] = [(r.role, r.images) for r in server.requests]
        sizes[refs] = sum(len(json.dumps(r.body)) for r in server.requests)
        named[refs] = sum(p.get("image_url", {}) is None for r in server.requests for m in r.body["messages"]
                          if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image_url")
    assert seen[True] == seen[False] and all(images and all(images) for _, images in seen[True])
    assert named[False] == 0 and named[True] > len(seen[True])  # every request after the first names earlier screenshots
    assert sizes[True] < sizes[False] / 2
