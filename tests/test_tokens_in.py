"""Tokens in: a session's requests sent as token ids to SGLang's /generate (the stand-in's, with a real
tokenizer and chat template from the tiny model directories `surfer bench gpu make-model` writes), each
continuing the last with the ids the server generated — asking what the chat request would have asked."""

from __future__ import annotations

import asyncio
import json
import logging

from pathlib import Path

import pytest

from surfer.agent.events import StepFinished
from surfer.agent.formats import TokensLine
from surfer.agent.tokens_record import TokenLog, chain_report, read_calls, trajectory_views
from surfer.agent.loop import Agent
from surfer.apps.options import DEMO_RECORDINGS
from surfer.core.errors import ConfigError
from surfer.models.adapters import PolicyRef
from surfer.models.affinity import model_session
from surfer.models.backend import ImagePart, Message, ModelRequest, TextPart
from surfer.models.chat_tokens import TemplateTokenizer
from surfer.models.endpoint import Endpoint
from surfer.models.http import OpenAICompatibleBackend
from surfer.models.profiles import PROFILES
from surfer.models.token_chain import DROPPED, FIRST, TokenChain
from surfer.tools.replay import ReplayEnvironment

RUN = DEMO_RECORDINGS / "demo-1280x800"
CLICK = {"thought": "open it", "notes": "", "action": {"type": "click", "target": "the 'Register' link"}}
ANSWER = {"thought": "done", "notes": "", "action": {"type": "answer", "text": "ABC-123"}}
FAMILIES = {"holotron": "holotron", "holo2": "holo2"}  # profile -> make-model shape


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):  # type: ignore[no-untyped-def]
    """The two families' model directories (tokenizer, chat template, configuration; no weights)."""
    from surfer.bench.gpu.models import make_model

    root = tmp_path_factory.mktemp("tiny-models")
    for shape in set(FAMILIES.values()):
        make_model(shape, root / shape)
    return {profile: str(root / shape) for profile, shape in FAMILIES.items()}


@pytest.fixture(scope="session")
def chat_tokenizers(tiny_models):  # type: ignore[no-untyped-def]
    return {profile: TemplateTokenizer.load(path) for profile, path in tiny_models.items()}


def _image(n: int) -> ImagePart:
    return ImagePart(f"screenshot {n}".encode(), "image/png", step=n)


@pytest.mark.parametrize("profile", sorted(FAMILIES))
def test_the_new_turn_is_what_the_chat_template_renders_after_the_reply(profile, chat_tokenizers) -> None:
    chat, family = chat_tokenizers[profile], PROFILES[profile]
    options = dict(family.extra_body_for("policy").get("chat_template_kwargs") or {})
    reply = json.dumps(CLICK)
    before = [Message.text("system", "You are a web agent."), Message("user", (_image(0), TextPart("Task: register.")))]
    history = [*before, Message.text("assistant", family.reply_prefix + reply),
               Message("user", (TextPart("Clicked."), _image(1), TextPart("What next?")))]
    # the chat request: the server renders the whole conversation with the template; Nemotron-Nano-v2's leaves the
    # generation prompt's empty thinking block out of an earlier assistant turn, even where the reply repeats it
    whole = chat.render(history, generation_prompt=True, options=options)
    dropped = family.reply_prefix if profile == "holotron" else ""
    assert (family.reply_prefix + reply in whole) == (not dropped)
    # tokens in: the last prompt (its generation prompt ends with the reply prefix), the reply, then the new turn
    prompt = chat.render(before, generation_prompt=True, options=options)
    assert prompt.endswith(family.reply_prefix)
    # (the model was shown it: the ids go on from there, the chat request's text but for that block)
    shown = whole.replace(reply, family.reply_prefix + reply, 1) if dropped else whole
    assert prompt + reply + chat.continuation(before, history[2], history[3:], options) == shown

    chain = TokenChain(chat)
    first = chain.prompt("s", ModelRequest(tuple(before), "policy"), options)
    assert first.extends is None and first.reason == FIRST and len(first.images) == 1
    # a model trained on its template writes the turn's close up to its stop id (Nemotron-H: a newline, then the stop)
    stop = min(chat.stop_ids)
    written = chat.continuation_parts(before, history[2], history[3:], options)[0].partition(chat.decode([stop]))[0]
    assert written == ("\n" if profile == "holotron" else "")
    generated = [*chat.encode(reply + written), stop]
    chain.keep_reply("s", first, generated, reply + written)
    second = chain.prompt("s", ModelRequest(tuple(history), "policy"), options)
    assert second.ids[:second.extends] == [*first.ids, *generated]  # every id sent and generated, the stop id too
    assert chat.decode(second.ids) == shown  # ...and, read back, exactly the text the model was shown
    assert [i.step for i in second.images] == [0, 1]
    assert chain.stats.as_dict() == {"requests": 2, "extended": 1, "rendered": {FIRST: 1}, "refused": 0}
    # recorded: one sequence, the second call's prompt extending the first call's whole sequence
    calls = _recorded([(first.ids, generated), (second.ids, [*chat.encode("{}" + written), stop])])
    assert [(c.extends_previous, c.dropped_stop) for c in calls] == [(False, None), (True, None)]
    (view,) = trajectory_views(calls)
    assert view["prompt_ids"] + view["completion_ids"] == calls[1].sequence and view["dropped"] == []
    if not written:
        return
    # a reply ended without the template's newline: the stop id is left out and the template writes the whole close,
    # so the prompt is still all the server computed (its last generated id never is) then the chat request's text
    bare = [*chat.encode(reply), stop]
    chain.keep_reply("t", chain.prompt("t", ModelRequest(tuple(before), "policy"), options), bare, reply)
    third = chain.prompt("t", ModelRequest(tuple(history), "policy"), options)
    assert third.ids[:third.extends] == [*first.ids, *bare[:-1]] and chat.decode(third.ids) == shown
    # ...and the record says so: it extends the first call all the same, the stop id dropped; the trainer's view is one
    # exact sequence (the last prompt's), the dropped stop id kept aside with its logprob
    last = [*chat.encode("{}"), stop]
    calls = _recorded([(first.ids, bare), (third.ids, last)])
    assert [(c.extends_previous, c.dropped_stop, c.broken) for c in calls] == [(False, None, None), (True, stop, None)]
    (view,) = trajectory_views(calls)
    assert view["prompt_ids"] + view["completion_ids"] == calls[1].sequence
    mask = view["completion_mask"]
    assert mask == [1] * (len(bare) - 1) + [0] * (len(third.ids) - len(first.ids) - len(bare) + 1) + [1] * len(last)
    assert view["dropped"] == [{"at": len(bare) - 1, "id": stop, "logprob": -0.5}]
    assert chain_report(calls)["policy"]["extends"] == 1


def _recorded(calls: list[tuple[list[int], list[int]]]) -> list:  # type: ignore[type-arg]
    """The calls (prompt ids, generated ids) as a run's tokens.jsonl records them, read back."""
    import tempfile
    from types import SimpleNamespace

    with tempfile.TemporaryDirectory() as run_dir:
        log = TokenLog(run_dir)
        for n, (prompt, completion) in enumerate(calls):
            log.add(n, n, "policy", True, SimpleNamespace(
                prompt_ids=prompt, completion_ids=completion, logprobs=[-0.5] * len(completion), finish_reason="stop",
                cached_tokens=None, policy="p", policy_version=None, sampling={}))
        for line in (Path(run_dir) / "tokens.jsonl").read_text().splitlines():
            TokensLine.model_validate_json(line)
        return read_calls(run_dir)


def _responder(retry: bool = False):  # type: ignore[no-untyped-def]
    """Clicks, then answers; `retry`: the first reply is unusable (the step is asked again)."""
    seen: list[str] = []

    def respond(request):  # type: ignore[no-untyped-def]
        seen.append(request.role)
        if request.role == "localizer":
            return {"x": 250, "y": 500}
        if request.role == "validator":
            return {"verdict": "accept", "reasons": "the code is shown"}
        asked = seen.count("policy") - (1 if retry else 0)
        if asked == 0:
            return {"thought": "no action given"}
        return ANSWER if asked > 1 else CLICK
    return respond


def _run(server, profile: str, tokens_in: str, layout: str = "conversation", out_dir=None):  # type: ignore[no-untyped-def]
    """`out_dir`: the run's directory, its model calls recorded token for token there."""
    events: list = []
    agent = Agent(base_url=server.base_url, model=server.model, profile=profile, environment=ReplayEnvironment(RUN),
                  prompt_layout=layout, tokens_in=tokens_in, max_steps=5, record_tokens=out_dir is not None)
    result = asyncio.run(agent.run("Register and report the code.", listeners=[events.append], out_dir=out_dir))
    assert result.status == "success", result.reason
    steps = [e.record for e in events if isinstance(e, StepFinished)]
    return result, [(s.action, s.points) for s in steps]


@pytest.mark.parametrize("profile, retry", [(profile, False) for profile in sorted(FAMILIES)] + [("holotron", True)])
def test_a_run_by_tokens_in_reuses_every_earlier_request_and_acts_as_by_chat(profile, retry, tiny_models, standin,
                                                                           tmp_path) -> None:
    """`retry`: the first step's first reply is unusable; the step's retry holds it and the feedback, and so do
    the later requests (measured on SGLang: leaving them out sent 13 of 787 requests whole)."""
    # SGLang with two data-parallel ranks (its /server_info says dp_size): the run keeps one, in header and body
    by_ids = standin(_responder(retry), engine="sglang", model_dir=tiny_models[profile], data_parallel=2)
    result, steps = _run(by_ids, profile, "on", out_dir=tmp_path)
    # recorded: each call extends the one it follows, all its ids (the model wrote its turn's close up to the stop
    # id: Nemotron-H's newline too); the policy's calls join into one exact sequence, the localizer's each follow one
    calls = read_calls(tmp_path)
    assert len(calls) == len(by_ids.generate.requests)
    assert all(c.extends_previous and c.dropped_stop is None for c in calls[1:]), chain_report(calls)
    (policy,) = trajectory_views(calls, "policy")
    last = [c for c in calls if c.role == "policy"][-1]
    assert policy["prompt_ids"] + policy["completion_ids"] == last.sequence and policy["dropped"] == []
    bodies, cached, routes = by_ids.generate.requests, by_ids.generate.cached, by_ids.generate
    assert len(bodies) >= 4 and all(b["sampling_params"]["json_schema"] for b in bodies)
    assert {b["routed_dp_rank"] for b in bodies} == {0} and {r.rank for r in by_ids.requests} == {"0"}
    # every request after the first extends an earlier one, token for token, and finds all of it cached
    answers = routes.answers
    for i in range(1, len(bodies)):
        ids = bodies[i]["input_ids"]
        earlier = [j for j in range(i) if ids[:len(bodies[j]["input_ids"]) + len(answers[j]["output_ids"]) - 1]
                   == bodies[j]["input_ids"] + answers[j]["output_ids"][:-1]]
        assert earlier, f"request {i} extends no earlier request"
        j = earlier[-1]
        # all it computed before (a sibling continuation may share a few ids more: the turn's close)
        assert answers[i]["meta_info"]["prompt_tokens"] > cached[i] >= \
            answers[j]["meta_info"]["prompt_tokens"] + len(answers[j]["output_ids"]) - 1
    # the same run by chat completions: the responder was asked the same, the same actions followed
    by_chat = standin(_responder(retry), engine="sglang", data_parallel=2)
    chat_result, chat_steps = _run(by_chat, profile, "off")
    assert not by_chat.generate and len(by_chat.requests) == len(by_ids.requests)
    assert {r.rank for r in by_chat.requests} == {"0"}  # SGLang's chat completions: the header
    assert chat_steps == steps and chat_result.answer == result.answer == "ABC-123"
    for asked_by_ids, asked_by_chat in zip(by_ids.requests, by_chat.requests):
        assert asked_by_ids.role == asked_by_chat.role
        assert asked_by_ids.schema == asked_by_chat.schema
        # the same text (the template joins a turn's text parts; the stand-in cannot tell where one ended)
        assert "".join(asked_by_ids.last_text.split()) == "".join(asked_by_chat.last_text.split())
        assert asked_by_ids.images == asked_by_chat.images


def test_a_layout_that_drops_screenshots_is_sent_whole_and_said(tiny_models, standin, caplog) -> None:
    server = standin(_responder(), engine="sglang", model_dir=tiny_models["holotron"])
    backend = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model=server.model, tokens_in="on"))

    async def steps() -> None:
        system = Message.text("system", "You are a web agent.")
        with model_session("window"):
            for n in range(3):  # the window layout: the last two screenshots, the text rewritten every step
                shown = [_image(k) for k in range(max(0, n - 1), n + 1)]
                await backend.complete(ModelRequest((system, Message("user", (TextPart(f"Step {n}"), *shown))), "policy"))
        await backend.aclose()

    with caplog.at_level(logging.INFO, logger="surfer.models.token_chain"):
        asyncio.run(steps())
    stats = backend.generate.chain.stats.as_dict()
    assert stats["extended"] == 0 and stats["rendered"] == {FIRST: 1, DROPPED: 1, "earlier turns rewritten (the layout changes text it sent before)": 1}
    assert "could not extend" in caplog.text and "screenshots dropped" in caplog.text


def test_the_path_follows_the_server_and_the_setting(tiny_models, standin) -> None:
    sglang = standin(_responder(), engine="sglang", model_dir=tiny_models["holo2"])
    vllm = standin(_responder())

    async def path(server, **options):  # type: ignore[no-untyped-def]
        backend = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model=server.model, **options))
        try:
            await backend.check()
            return backend.path
        finally:
            await backend.aclose()

    chosen = asyncio.run(path(sglang))
    assert chosen.tokens_in and "SGLang /generate" in chosen.reason and tiny_models["holo2"] in chosen.reason
    assert "not SGLang" in asyncio.run(path(vllm)).reason and not asyncio.run(path(vllm)).tokens_in
    assert asyncio.run(path(sglang, tokens_in="off")).reason == "chat completions (tokens_in = off)"
    with pytest.raises(ConfigError, match="tokens_in = on"):
        asyncio.run(path(vllm, tokens_in="on"))
    with pytest.raises(ConfigError, match="cannot load a tokenizer"):
        asyncio.run(path(sglang, tokens_in="on", tokenizer=str(RUN)))
    fallback = asyncio.run(path(sglang, tokenizer=str(RUN)))  # auto: a tokenizer that does not load keeps chat
    assert not fallback.tokens_in and "cannot load a tokenizer" in fallback.reason


def test_holotrons_sglang_processor_puts_each_image_at_its_placeholder_and_keeps_the_ids(chat_tokenizers) -> None:
    from surfer.models.sglang_processors import expand_images, image_offsets, tile_ranges

    chat = chat_tokenizers["holotron"]
    vocab = chat.tokenizer.get_vocab()
    image, start, end = vocab["<image>"], vocab["<img>"], vocab["</img>"]
    history = [Message("user", (_image(0), TextPart("Task"))), Message.text("assistant", "{}"),
               Message("user", (_image(1), TextPart("Next")))]
    ids = chat.encode(chat.render(history, generation_prompt=True))
    # what SGLang 0.5.15's processor writes: every image's tokens at the first placeholder, the second left stray
    first = ids.index(image)
    processed = [*ids[:first], start, *[image] * 512, end, start, *[image] * 256, end, *ids[first + 1:]]
    expanded = expand_images(ids, processed, image, start, end)
    assert expanded is not None and len(expanded) == len(ids) - 2 + 514 + 258
    offsets = image_offsets(expanded, image, start)
    assert [e - s + 1 for s, e in offsets] == [512, 256]  # each image's tokens where its placeholder was
    second = ids.index(image, first + 1)
    assert offsets[1][0] == second - 1 + 514 + 1  # after the first image's run, the ids between kept as sent
    assert [t for t in expanded if t not in (image, start, end)] == [t for t in ids if t != image]
    assert expand_images(ids, processed[:first + 515], image, start, end) is None  # two placeholders, one image
    bracketed = [*ids[:first], start, image, end, *ids[first + 1:]]  # a template that writes <img><image></img>
    assert expand_images(bracketed, processed, image, start, end) == expanded
    # one item per image (its own hash, so a request with one screenshot more keeps the earlier ones' cache key):
    # each image's rows of the stacked tiles, from its run of tokens (256 a tile)
    assert tile_ranges(offsets, 256) == [(0, 2), (2, 3)]
    assert tile_ranges([(10, 300)], 256) is None  # not whole tiles: left as SGLang made it


def test_a_refused_form_keeps_the_chat_path(tiny_models, standin, caplog) -> None:
    server = standin(_responder(), engine="sglang", model_dir=tiny_models["holotron"])
    server.generate.refuse_images = True  # stock SGLang 0.5.15 with Holotron: ids with images are an HTTP 500
    backend = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model=server.model))
    request = ModelRequest((Message("user", (_image(0), TextPart("Task"))),), "policy", {"type": "object"})

    async def twice() -> list[str]:
        texts = [(await backend.complete(request)).text for _ in range(2)]
        await backend.aclose()
        return texts

    with caplog.at_level(logging.WARNING, logger="surfer.models.tokens_in"):
        texts = asyncio.run(twice())
    assert [json.loads(t) for t in texts] == [CLICK, ANSWER]  # both answered, by chat
    assert len(server.generate.requests) == 0 and len(server.requests) == 2
    assert not backend.path.tokens_in and "refused token ids with images" in backend.path.reason
    assert caplog.text.count("refused token ids with images") == 1


def test_doctor_says_which_path_an_endpoint_gets_and_why(tiny_models, standin) -> None:
    from surfer.apps.doctor import PROBE_ANSWER, run_checks

    def probe_answer(request):  # type: ignore[no-untyped-def]
        return PROBE_ANSWER

    def checks_of(server):  # type: ignore[no-untyped-def]
        return {c.name: c for c in asyncio.run(run_checks(server.base_url, server.model, browser=False))}

    def path_check(server):  # type: ignore[no-untyped-def]
        return checks_of(server)["request path"]

    sglang = standin(probe_answer, engine="sglang", model_dir=tiny_models["holotron"])
    checks = checks_of(sglang)
    check = checks["request path"]
    assert check.status == "ok" and "tokens in: SGLang /generate" in check.detail and "screenshot accepted" in check.detail
    # SGLang's chat completions return no token ids, its /generate does: --record-tokens works by tokens in
    ids = checks["token ids"]
    assert ids.status == "ok" and "tokens-in path" in ids.detail and "--record-tokens records them" in ids.detail
    assert len(sglang.generate.requests) == 1 and sglang.generate.requests[0]["image_data"]
    sglang.generate.refuse_images = True
    checks = checks_of(sglang)
    check = checks["request path"]
    assert check.status == "warn" and "refused token ids with images" in check.detail and "surfer serve" in check.fix
    assert checks["token ids"].status == "warn"  # requests with screenshots go by chat: no ids
    check = path_check(standin(probe_answer))
    assert check.status == "ok" and check.detail == "the server is not SGLang (no /get_model_info): chat completions"


def test_recorded_calls_carry_the_ids_the_server_saw_and_sampled(tiny_models, standin) -> None:
    from surfer.models.standin_generate import IMAGE_TOKENS, SAMPLED_LOGPROB

    server = standin(_responder(), engine="sglang", model_dir=tiny_models["holo2"])
    backend = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model=server.model, tokens_in="on"))

    async def calls():  # type: ignore[no-untyped-def]
        await backend.choose_path()
        plain = await backend.complete(ModelRequest((Message("user", (_image(0), TextPart("Task"))),), "policy"))
        # capture's preflight: SGLang's chat completions carry no ids, its /generate does: the run records by it
        await backend.check_tokens()
        recorded = await backend.complete(ModelRequest((Message("user", (_image(0), TextPart("Task"))),), "policy"))
        await backend.aclose()
        # a session on an adapter (a batch's --policy): /generate is told which (`lora_path`), the call records it
        policed = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model=server.model, tokens_in="on",
                                                   record_tokens=True), follows_policy=True)
        with model_session("on-adapter", PolicyRef.parse("step-1@7")):
            adapted = await policed.complete(ModelRequest((Message("user", (_image(0), TextPart("Task"))),), "policy"))
        await policed.aclose()
        assert server.generate.requests[-1]["lora_path"] == "step-1" and "lora_path" not in server.generate.requests[1]
        assert adapted.tokens is not None and (adapted.tokens.policy, adapted.tokens.policy_version) == ("step-1", "7")
        assert (adapted.model, adapted.policy_version) == ("step-1", "7")
        return plain, recorded

    plain, recorded = asyncio.run(calls())
    assert plain.tokens is None and "return_prompt_token_ids" not in server.generate.requests[0]
    tokens, sent = recorded.tokens, server.generate.requests[1]
    placeholder = server.generate.placeholder
    assert tokens.prompt_ids.count(placeholder) == IMAGE_TOKENS and sent["input_ids"].count(placeholder) == 1
    assert len(tokens.prompt_ids) == len(sent["input_ids"]) - 1 + IMAGE_TOKENS == recorded.usage.prompt_tokens
    assert list(tokens.completion_ids) == server.generate.answers[1]["output_ids"]
    assert tokens.logprobs == (SAMPLED_LOGPROB,) * len(tokens.completion_ids) and tokens.finish_reason == "stop"
    assert tokens.cached_tokens == len(tokens.prompt_ids) - 1  # the same prompt again: all but the last id found
    # no --policy-version: null, as the call's trajectory entry and the chat path record it (not the server's
    # weight_version, "default")
    assert tokens.policy == server.model and tokens.policy_version is None is recorded.policy_version


def test_bench_variants_compare_chat_and_tokens_in() -> None:
    from surfer.bench.gpu.variants import parse_inline

    chat, ids = parse_inline("layout=conversation,tokens_in=off|on")
    assert (chat.label(), ids.label()) == ("conversation+chat", "conversation+ids")
    assert chat.config_update()["tokens_in"] == "off" and ids.config_update()["tokens_in"] == "on"
    assert "tokens_in" not in parse_inline("layout=window")[0].config_update()  # the configuration's own (auto)
    with pytest.raises(ConfigError, match="tokens_in takes on/off/auto"):
        parse_inline("tokens_in=maybe")


def test_a_sessions_conversation_is_forgotten_when_it_ends(chat_tokenizers) -> None:
    chain = TokenChain(chat_tokenizers["holo2"])
    request = ModelRequest((Message("user", (_image(0), TextPart("Task"))),), "policy")
    with model_session("ends"):
        prompt = chain.prompt("ends", request, {})
        chain.keep_reply("ends", prompt, chain.chat.encode("{}"), "{}")
        assert chain.prompt("ends", ModelRequest((*request.messages, Message.text("assistant", "{}"),
                                                  Message.text("user", "Next")), "policy"), {}).extends
    again = chain.prompt("ends", ModelRequest((*request.messages, Message.text("assistant", "{}"),
                                               Message.text("user", "Next")), "policy"), {})
    assert again.extends is None and again.reason == FIRST  # nothing of the ended session is kept


def test_why_a_request_is_sent_whole_is_said_of_its_own_roles_last_request(chat_tokenizers) -> None:
    """The localizer's request came last; the policy's next one dropped a screenshot from its own last
    request: that is the reason given, not "rewritten" (the localizer's request is another conversation)."""
    chain = TokenChain(chat_tokenizers["holo2"])
    system = Message.text("system", "You are a web agent.")
    policy = ModelRequest((system, Message("user", (_image(0), TextPart("Step 1")))), "policy")
    localizer = ModelRequest((Message("user", (_image(0), TextPart("Where is the button?"))),), "localizer")
    for request in (policy, localizer):
        chain.keep_reply("s", chain.prompt("s", request, {}), chain.chat.encode("{}"), "{}")
    moved = ModelRequest((system, Message("user", (_image(1), TextPart("Step 1"))), Message.text("assistant", "{}"),
                          Message("user", (_image(2), TextPart("Step 2")))), "policy")
    assert chain.prompt("s", moved, {}).reason == DROPPED
    assert chain.stats.as_dict()["rendered"] == {FIRST: 2, DROPPED: 1}


@pytest.mark.parametrize("image_text", ["<image>", "<video>"])
def test_a_reply_holding_an_image_token_is_not_sent_back_as_ids(tiny_models, standin, image_text) -> None:
    """Measured on SGLang with Holotron's random weights: a reply sampled an image token; sent back as ids, the
    next request held one image token more than images (HTTP 500); another sampled `<video>` ("No data
    iterator found for token: <video>"). Its text leaves that token out, so the session's next request is
    rendered from the text, and every request still goes as ids."""
    # (Holotron's image placeholder, which the tiny model's template writes too; and its video token)
    replies = iter([{**CLICK, "thought": f"open it {image_text}"}, ANSWER])

    def respond(request):  # type: ignore[no-untyped-def]
        if request.role == "localizer":
            return {"x": 250, "y": 500}
        if request.role == "validator":
            return {"verdict": "accept", "reasons": "the code is shown"}
        return next(replies)

    server = standin(respond, engine="sglang", model_dir=tiny_models["holotron"])
    result, _ = _run(server, "holotron", "on")
    assert result.answer == "ABC-123"
    chain = TemplateTokenizer.load(tiny_models["holotron"])
    first_reply = server.generate.answers[0]["output_ids"]
    assert not chain.media_ids.isdisjoint(first_reply) and image_text not in server.generate.answers[0]["text"]
    # no request was refused: every call went as ids, none by chat
    assert len(server.generate.requests) == len(server.requests) and all(
        b["input_ids"].count(server.generate.placeholder) == len(b.get("image_data") or []) for b in server.generate.requests)


def test_one_refused_request_goes_by_chat_and_the_others_keep_tokens_in(tiny_models, standin, caplog) -> None:
    server = standin(_responder(), engine="sglang", model_dir=tiny_models["holotron"])
    backend = OpenAICompatibleBackend(Endpoint(base_url=server.base_url, model=server.model, tokens_in="on"))
    request = ModelRequest((Message("user", (_image(0), TextPart("Task"))),), "policy", {"type": "object"})

    async def three() -> list[str]:
        texts = [(await backend.complete(request)).text]
        server.fail_next(500)  # the next /generate: HTTP 500 (the chat request after it is answered)
        texts += [(await backend.complete(request)).text for _ in range(2)]
        await backend.aclose()
        return texts

    with caplog.at_level(logging.WARNING, logger="surfer.models.token_chain"):
        texts = asyncio.run(three())
    assert [json.loads(t) for t in texts] == [CLICK, ANSWER, ANSWER]
    assert len(server.generate.requests) == 2 and len(server.requests) == 3  # the refused one went by chat
    assert backend.path.tokens_in and backend.generate.chain.stats.refused == 1
    assert caplog.text.count("refused a request's ids") == 1


def test_the_bench_replays_a_tokens_in_run_as_the_ids_it_sent(tiny_models, standin, tmp_path) -> None:
    """Surfer against the bare replay compares the same requests: a run by tokens in is replayed to /generate
    with the ids surfer sent (not as chat completions, which a hybrid model would find nothing of)."""
    from typer.testing import CliRunner

    from surfer.apps.cli import app
    from surfer.bench.gpu.emulate import ClickEverywhere

    server = standin(ClickEverywhere(), engine="sglang", model_dir=tiny_models["holotron"], kv_capacity=10**7)
    out = tmp_path / "gpu.json"
    result = CliRunner().invoke(app, [
        "bench", "gpu", "run", "--base-url", server.base_url, "--model", f"holotron={server.model}", "--levels", "2",
        "--variants", "layout=conversation,continuation=on,tokens_in=on", "--min-steps", "0", "--window", "30",
        "--session-steps", "3", "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(out.read_text())["models"][0]["levels"]
    surfer, bare = row["surfer"], row["bare"]
    assert surfer["request_path"].startswith("tokens in: SGLang /generate") and surfer["tokens_in"]["extended"] > 0
    assert bare["model_calls"] == surfer["model_calls"] > 0 and bare["prompt_tokens_per_call"] == surfer["prompt_tokens_per_call"]
    # every request went to /generate, each replayed once with the ids, images and sampling surfer sent
    bodies = [{k: v for k, v in body.items() if k != "rid"} for body in server.generate.requests]
    assert len(bodies) == len(server.requests) == 2 * surfer["model_calls"]
    key = lambda body: json.dumps(body, sort_keys=True)  # noqa: E731
    assert sorted(map(key, bodies[:surfer["model_calls"]])) == sorted(map(key, bodies[surfer["model_calls"]:]))
    assert row["surfer_vs_bare"]["calls_per_s"] > 0


def test_the_bench_over_two_servers_reports_each_ones_tokens_in_and_replays_at_the_same(tiny_models, standin, tmp_path) -> None:
    """Round robin per request over two SGLang servers: a session's requests land on either, each server's
    chain continues what that server saw of the session; the bench sums what both chains did."""
    from typer.testing import CliRunner

    from surfer.apps.cli import app
    from surfer.bench.gpu.emulate import ClickEverywhere

    servers = [standin(ClickEverywhere(), engine="sglang", model_dir=tiny_models["holotron"], kv_capacity=10**7)
               for _ in range(2)]
    out = tmp_path / "gpu.json"
    result = CliRunner().invoke(app, [
        "bench", "gpu", "run", "--base-url", servers[0].base_url, "--base-url", servers[1].base_url,
        "--placement", "round-robin-per-request", "--model", f"holotron={servers[0].model}", "--levels", "2",
        "--variants", "layout=conversation,continuation=on,tokens_in=on", "--min-steps", "0", "--window", "30",
        "--session-steps", "3", "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(out.read_text())["models"][0]["levels"]
    surfer, bare = row["surfer"], row["bare"]
    chains = surfer["tokens_in"]
    assert surfer["request_path"].startswith("tokens in: SGLang /generate")
    assert chains["requests"] == surfer["model_calls"] > 0  # every call, on either server, counted once
    assert chains["extended"] + sum(chains["rendered"].values()) + chains["refused"] == chains["requests"]
    assert chains["rendered"]["the first request of its conversation (the session's, or its role's)"] >= 4
    # both servers answered surfer's /generate requests, and the replay sent each of them once more
    assert all(server.generate.requests for server in servers)
    assert bare["model_calls"] == surfer["model_calls"]
    assert sum(len(server.generate.requests) for server in servers) == 2 * surfer["model_calls"]
