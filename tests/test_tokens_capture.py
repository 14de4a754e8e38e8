"""Token capture (record_tokens): every model call token for token, as a vLLM server
returns it, in the run's tokens.jsonl; stored against the call it extends and read
back exactly; the chaining check; the trajectory view; a server without the token
fields refused at the start."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import re
from pathlib import Path

import pytest

from surfer.agent.config import AgentConfig, BrowserSettings
from surfer.agent.formats import TokensLine, TrajectoryLine
from surfer.agent.loop import Agent
from surfer.agent.tokens_record import (
    TOKENS_FILE, TokenLog, chain_report, pack, read_calls, shared_prefix, trajectory_views, unpack,
)
from surfer.apps.demo.oracle import DEMO_TASK, DemoOracle, frame_mapper
from surfer.core.errors import ConfigError
from surfer.models.adapters import PolicyRef
from surfer.models.affinity import model_session
from surfer.models.backend import Message, ModelRequest, Tokens
from surfer.models.endpoint import Endpoint
from surfer.models.http import OpenAICompatibleBackend
from surfer.models.standin_tokenizer import StandInTokenizer
from test_batch import VIEWPORT, centres  # noqa: F401 - fixture


def _config(server, profile: str = "holotron", **settings) -> AgentConfig:  # type: ignore[no-untyped-def]
    return AgentConfig(base_url=server.base_url, model=server.model, profile=profile, max_steps=10,
                       browser=BrowserSettings(viewport=VIEWPORT), record_tokens=True, **settings)


class ConversationOracle(DemoOracle):
    """The demo's oracle reading a conversation: the page it is on now is the last one named."""

    def policy(self, request):  # type: ignore[no-untyped-def]
        pages = re.findall(r"(\S+)\n(?:Decide the next action|Give your final answer)", request.text)
        now = dataclasses.replace(request, text=f"History: {request.text}\nCurrent page: {pages[-1] if pages else ''}")
        return super().policy(now)


@pytest.fixture
def oracle(standin, centres):  # type: ignore[no-untyped-def]
    def make(**options):  # type: ignore[no-untyped-def]
        return standin(ConversationOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0)), **options)
    return make


@pytest.fixture
def run(shared_browser, demo_site):  # type: ignore[no-untyped-def]
    """run(config, run_dir, profile=None): the demo task in a context of the shared Chromium."""
    from surfer.tools.browser import BrowserEnvironment

    async def go(config: AgentConfig, run_dir: Path, profile=None):  # type: ignore[no-untyped-def]
        env = BrowserEnvironment(browser=shared_browser, viewport=config.browser.viewport)
        agent = Agent(config, profile=profile, environment=env)
        try:
            return await agent.run(DEMO_TASK, demo_site.url("index.html"), out_dir=run_dir)
        finally:
            await agent.aclose()
            await env.close()
    return go


async def test_http_backend_reads_vllm_token_fields_from_the_standin(standin) -> None:
    server = standin(lambda request: {"x": 12, "y": 34}, template="qwen3")
    backend = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model=server.model, record_tokens=True,
                                               policy_version="step-7"))
    request = ModelRequest((Message.text("system", "You localize."), Message.text("user", "Where is OK?")), "localizer",
                           temperature=0.0, max_tokens=64, extra_body={"top_k": 1})
    try:
        completion = await backend.complete(request)
        tokens = completion.tokens
        assert tokens is not None
        tokenizer = server.tokenizer
        assert tokenizer.decode(tokens.prompt_ids).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
        assert "Where is OK?" in tokenizer.decode(tokens.prompt_ids)
        assert list(tokens.completion_ids) == tokenizer.encode('{"x": 12, "y": 34}') + tokenizer.end_ids
        assert len(tokens.logprobs) == len(tokens.completion_ids) and all(lp <= 0 for lp in tokens.logprobs)
        assert (tokens.policy, tokens.policy_version, tokens.finish_reason) == (server.model, "step-7", "stop")
        assert tokens.sampling == {"temperature": 0.0, "max_tokens": 64, "top_k": 1}
        assert completion.usage.prompt_tokens == len(tokens.prompt_ids)
        sent = server.requests[-1].body
        assert sent["return_token_ids"] is True and sent["logprobs"] is True
        cut = await backend.complete(dataclasses.replace(request, max_tokens=3))
        assert cut.tokens is not None and cut.tokens.finish_reason == "length" and len(cut.tokens.completion_ids) == 3
        # a session's policy named without a version (--policy NAME): the configured policy_version is recorded
        policed = OpenAICompatibleBackend(backend.endpoint, follows_policy=True)
        with model_session("named", PolicyRef.parse(server.model)):
            named = await policed.complete(request)
        await policed.aclose()
        assert named.tokens is not None and (named.tokens.policy_version, named.policy_version) == ("step-7", "step-7")
    finally:
        await backend.aclose()


async def test_a_server_without_token_fields_is_refused_before_the_run(oracle, run, tmp_path: Path) -> None:
    server = oracle(token_fields=False)
    result = await run(_config(server), tmp_path / "run")
    assert result.status == "error" and result.error_kind == "config" and result.steps == 0
    assert "does not return prompt_token_ids" in result.reason and "vLLM >= 0.10.2" in result.reason
    assert not (tmp_path / "run" / TOKENS_FILE).exists()
    with pytest.raises(ConfigError, match="does not return"):
        backend = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model=server.model))
        try:
            await backend.check_tokens()  # a backend made without record_tokens is probed the same
        finally:
            await backend.aclose()


async def test_an_answer_without_token_fields_mid_run_ends_it_never_a_silent_null(oracle, run, tmp_path: Path) -> None:
    server = oracle()
    original = server.respond

    def respond(request):  # type: ignore[no-untyped-def]
        if request.role == "localizer":
            server.token_fields = False  # the server stops returning them after the probe and the first call
        return original(request)

    server.respond = respond
    result = await run(_config(server), tmp_path / "run")
    assert result.status == "error" and "answered without prompt_token_ids" in result.reason
    calls = read_calls(tmp_path / "run")
    assert [c.role for c in calls] == ["policy"]  # what was recorded is whole; nothing after it



async def test_a_conversation_run_is_recorded_exactly_chains_and_joins(oracle, run, tmp_path: Path) -> None:
    server = oracle(template="qwen3")  # Holo2's turn shape: the generation prompt ends with an empty thinking block
    result = await run(_config(server, "holo2", prompt_layout="conversation", policy_version="v3"), tmp_path / "run")
    assert result.status == "success", result.reason
    calls = read_calls(tmp_path / "run")
    sent = server.requests[1:]  # (the first request is the preflight probe)
    assert len(calls) == len(sent) >= 5
    tokenizer = server.tokenizer
    for call, request in zip(calls, sent):  # what the reader gives back is what the server computed, id for id
        assert call.prompt_ids == tokenizer.chat_ids(request.body["messages"])
        assert call.completion_ids == tokenizer.encode(call_text(tmp_path / "run", call.call)) + tokenizer.end_ids
        assert tokenizer.decode(call.completion_ids).endswith("}<|im_end|>")
        assert (call.policy, call.policy_version) == (server.model, "v3")
    steps = [json.loads(line) for line in (tmp_path / "run" / "trajectory.jsonl").read_text().splitlines()]
    numbers = sorted(c["call"] for s in steps for cs in s["calls"].values() for c in cs)
    assert numbers == [c.call for c in calls]  # each trajectory call names its tokens line
    for line in (tmp_path / "run" / TOKENS_FILE).read_text().splitlines():  # the documented format, no field more
        TokensLine.model_validate_json(line)
    for step in steps:
        TrajectoryLine.model_validate(step)
    # conversation + role continuation + the profile's reply_prefix: every call extends the one it follows
    report = chain_report(calls)
    assert set(report) == {"policy", "localizer", "validator"}
    assert all(entry["share"] == 1.0 and not entry["breaks"] for entry in report.values())
    policy = [c for c in calls if c.role == "policy"]
    (view,) = trajectory_views(calls, "policy")
    assert view["calls"] == [c.call for c in policy]
    assert view["prompt_ids"] + view["completion_ids"] == policy[-1].sequence  # one sequence: the last call's
    assert view["prompt_ids"] == policy[0].prompt_ids
    assert len(view["completion_mask"]) == len(view["completion_ids"]) == len(view["logprobs"])
    assert sum(view["completion_mask"]) == sum(len(c.completion_ids) for c in policy)
    generated = [i for i, m in zip(view["completion_ids"], view["completion_mask"]) if m]
    assert generated == [i for c in policy for i in c.completion_ids]
    assert [lp for lp, m in zip(view["logprobs"], view["completion_mask"]) if m] == [lp for c in policy for lp in c.logprobs]
    assert all(lp == 0.0 for lp, m in zip(view["logprobs"], view["completion_mask"]) if not m)
    # stored against the call each extends: far smaller than the ids in full
    stored = (tmp_path / "run" / TOKENS_FILE).stat().st_size
    full = sum(len(json.dumps(c.prompt_ids)) for c in calls)
    assert stored < full / 2


def call_text(run_dir: Path, number: int) -> str:
    for line in (run_dir / "trajectory.jsonl").read_text().splitlines():
        for calls in json.loads(line)["calls"].values():
            for call in calls:
                if call.get("call") == number:
                    return call["completion"]
    raise AssertionError(f"call {number} is not in the trajectory")


async def test_holotrons_template_drops_the_thinking_block_so_chat_calls_never_chain(oracle, run, tmp_path: Path) -> None:
    # Nemotron-Nano-v2's template drops an earlier assistant turn's text up to `</think>`: the reply_prefix the
    # client puts back in front of each history reply is gone from what the server computes
    server = oracle(template="nemotron")
    result = await run(_config(server, prompt_layout="conversation"), tmp_path / "run")
    assert result.status == "success", result.reason
    calls = read_calls(tmp_path / "run")
    sent = server.requests[1:]  # (the first request is the preflight probe)
    assert any(m["role"] == "assistant" and m["content"].startswith("<think></think>") for r in sent for m in r.body["messages"])
    tokenizer = server.tokenizer
    assert [c.prompt_ids for c in calls] == [tokenizer.chat_ids(r.body["messages"]) for r in sent]
    for call in calls:  # the reply as Holotron ends it: its text, a newline (the close up to the stop id), `<SPECIAL_12>`
        assert call.completion_ids == tokenizer.encode(call_text(tmp_path / "run", call.call) + "\n") + tokenizer.end_ids
    report = chain_report(calls)
    assert {role: entry["extends"] for role, entry in report.items()} == {"policy": 0, "localizer": 0, "validator": 0}
    for broken in report["policy"]["breaks"] + report["localizer"]["breaks"] + report["validator"]["breaks"]:
        # the earlier call went on with the generation prompt's <think></think>; the history turn starts the reply
        assert tokenizer.decode(broken["expected"]).startswith("<think></think>")
        assert tokenizer.decode(broken["found"]).startswith('{"')
        assert tokenizer.decode(broken["before"]).endswith("Assistant\n")
    assert all(len(view["calls"]) == 1 for view in trajectory_views(calls))  # nothing chains: one view per call


def test_ids_are_packed_and_prefixes_found_exactly() -> None:
    rng = random.Random(7)
    for _ in range(200):
        ids = [rng.choice([5, 6, 151655]) if rng.random() < 0.7 else rng.randrange(10**6) for _ in range(rng.randrange(0, 700))]
        ids += [151655] * rng.randrange(0, 600)
        assert unpack(pack(ids)) == ids
        cut = rng.randrange(0, len(ids) + 1)
        other = ids[:cut] + [rng.randrange(10**6)] + ids[cut:]
        expected = next((i for i, (a, b) in enumerate(zip(ids, other)) if a != b), min(len(ids), len(other)))
        assert shared_prefix(ids, other) == expected
    assert pack([9] * 500) == [[9, 500]]


def test_the_log_stores_each_call_against_the_one_it_follows(tmp_path: Path) -> None:
    def tokens(prompt: list[int], completion: list[int]) -> Tokens:
        return Tokens(tuple(prompt), tuple(completion), tuple(-0.5 for _ in completion), "stop", None, "m", "v1")

    log = TokenLog(tmp_path)
    first = list(range(100, 400))
    log.add(0, 1, "policy", True, tokens(first, [1, 2, 3]))
    log.add(1, 1, "localizer", True, tokens(first + [1, 2, 3, 7, 8], [9, 2]))  # continues the policy's call
    log.add(2, 2, "policy", True, tokens(first + [1, 2, 3, 11, *[151655] * 300], [4]))
    log.add(3, 2, "localizer", True, tokens([0] + first, [5]))  # extends nothing
    lines = [json.loads(line) for line in (tmp_path / TOKENS_FILE).read_text().splitlines()]
    assert [(ln["previous"], ln["prompt"]["shared"], ln["extends_previous"]) for ln in lines] == [
        (None, 0, False), (0, 303, True), (0, 303, True), (1, 0, False)]
    assert lines[2]["prompt"]["ids"] == [11, [151655, 300]]
    assert lines[3]["break"]["at"] == 0 and lines[3]["break"]["found"][:2] == [0, 100]
    calls = read_calls(tmp_path)
    assert calls[2].prompt_ids == first + [1, 2, 3, 11, *[151655] * 300]
    assert calls[3].prompt_ids == [0] + first
    (tmp_path / TOKENS_FILE).open("a").write('{"call": 4, "step"')  # a torn last line (a crash mid-write)
    assert len(read_calls(tmp_path)) == 4


def test_the_standin_tokenizer_is_deterministic_and_expands_images() -> None:
    from PIL import Image
    import io

    buffer = io.BytesIO()
    Image.new("RGB", (280, 140)).save(buffer, "PNG")
    tokenizer = StandInTokenizer("chatml")
    ids = tokenizer.image_ids(buffer.getvalue())
    assert len(ids) == 2 + 10 * 5 and len(set(ids[1:-1])) == 1
    text = 'Click the "Sign in" button at 120, 45.\n\nThen wait.'
    assert tokenizer.decode(tokenizer.encode(text)) == text
    assert StandInTokenizer("chatml").encode(text) == tokenizer.encode(text)
    prose = "Open the registration page, fill in the form with the name and the email, then report the code."
    assert 3.5 <= len(prose) / len(tokenizer.encode(prose)) <= 5  # about four characters a token


async def test_a_retry_after_malformed_output_extends_the_rejected_call(oracle, run, tmp_path: Path) -> None:
    server = oracle(template="qwen3")
    original, spoiled = server.respond, []

    def respond(request):  # type: ignore[no-untyped-def]
        if request.role == "policy" and not spoiled and "Say OK." not in request.text:
            spoiled.append(request)
            return '{"thought": "oops"'  # cut short: the policy is asked again with the error
        return original(request)

    server.respond = respond
    result = await run(_config(server, "holo2", prompt_layout="conversation"), tmp_path / "run")
    assert result.status == "success", result.reason
    calls = read_calls(tmp_path / "run")
    rejected, retry = calls[0], calls[1]
    assert (rejected.accepted, retry.accepted, retry.role) == (False, True, "policy")
    assert retry.previous == rejected.call and retry.extends_previous  # the reply repeated as the server computed it
    (view, *_) = trajectory_views(calls, "policy")
    assert view["calls"][:2] == [rejected.call, retry.call]


async def test_cli_run_with_record_tokens_refuses_a_server_without_them(oracle, demo_site, tmp_path: Path) -> None:
    from inprocess import surfer

    server = oracle(token_fields=False)
    proc = await asyncio.to_thread(  # (in this process: tests/inprocess.py)
        surfer, "run", DEMO_TASK, "--url", demo_site.url("index.html"), "--base-url", server.base_url,
        "--model", server.model, "--record-tokens", "--out", str(tmp_path / "run"), "--json")
    assert proc.returncode == 2, proc.stderr
    assert json.loads(proc.stdout)["error_kind"] == "config"
    assert "Traceback" not in proc.stderr and "does not return prompt_token_ids" in proc.stderr + proc.stdout


def test_vllm_outputs_become_tokens() -> None:
    from types import SimpleNamespace as Obj

    from surfer.models.vllm_backend import tokens_of

    generated = Obj(token_ids=[7, 9], logprobs=[{7: Obj(logprob=-0.5)}, {9: Obj(logprob=-1.25), 3: Obj(logprob=-0.1)}],
                    finish_reason="stop", text="hi")
    tokens = tokens_of(Obj(prompt_token_ids=[1, 2, 3], outputs=[generated], num_cached_tokens=2), {"temperature": 0.7}, "m")
    assert (tokens.prompt_ids, tokens.completion_ids, tokens.logprobs) == ((1, 2, 3), (7, 9), (-0.5, -1.25))
    assert (tokens.cached_tokens, tokens.finish_reason, tokens.sampling) == (2, "stop", {"temperature": 0.7})


async def test_backends_that_cannot_capture_say_so_at_the_start() -> None:
    from surfer.models.scripted import ScriptedModel

    agent = Agent(backend=ScriptedModel(), record_tokens=True)
    result = await agent.run("anything")
    assert result.status == "error" and result.error_kind == "config"
    assert "does not return token ids and logprobs" in result.reason


async def test_doctor_says_whether_token_ids_come_back(standin) -> None:
    from surfer.apps.doctor import check_endpoint

    for engine, fields, status in (("vllm", True, "ok"), ("sglang", False, "warn")):  # SGLang's chat path has none
        server = standin(lambda request: {"ok": True, "n": 7, "word": "zebra-41"}, engine=engine)
        checks = {c.name: c for c in await check_endpoint(server.base_url, server.model)}
        assert checks["token ids"].status == status
        assert ("--record-tokens cannot be used" in checks["token ids"].detail) == (not fields)


async def test_ids_stay_in_memory_only_where_no_run_directory_keeps_them(standin, tmp_path: Path) -> None:
    from surfer.agent.events import StepFinished
    from surfer.apps.options import DEMO_RECORDINGS
    from surfer.tools.replay import ReplayEnvironment

    answers = iter([{"thought": "", "notes": "", "action": {"type": "click", "target": "the 'Register' link"}}])

    def respond(request):  # type: ignore[no-untyped-def]
        if request.role == "localizer":
            return {"x": 250, "y": 500}
        if request.role == "validator":
            return {"verdict": "accept", "reasons": "ok"}
        return next(answers, {"thought": "", "notes": "", "action": {"type": "answer", "text": "ABC"}})

    for out_dir in (False, tmp_path / "run"):  # False: no run directory (the SDK records by default)
        server = standin(respond)
        finished: list = []
        agent = Agent(base_url=server.base_url, model=server.model, environment=ReplayEnvironment(DEMO_RECORDINGS / "demo-1280x800"),
                      record_tokens=True, max_steps=4)
        result = await agent.run("Register.", out_dir=out_dir, listeners=[finished.append])
        await agent.aclose()
        assert result.status == "success", result.reason
        calls = [c for e in finished if isinstance(e, StepFinished) for c in e.record.calls]
        assert calls and all(c.tokens is not None and c.tokens.policy == server.model for c in calls)
        assert all(bool(c.tokens.prompt_ids) == (out_dir is False) for c in calls)
        answers = iter([{"thought": "", "notes": "", "action": {"type": "click", "target": "the 'Register' link"}}])
    assert len(read_calls(tmp_path / "run")) == len(calls)  # (there, in the file)
