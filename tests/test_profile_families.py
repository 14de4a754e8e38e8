"""The holo1.5 and openai profiles as data, and `--profile auto` suggestions
(always with a reason; the endpoint variant asks /v1/models)."""

from __future__ import annotations

import pytest

from surfer.core.coordinates import Size
from surfer.core.errors import ModelOutputError
from surfer.models.profiles import PROFILES, get_profile
from surfer.models.profiles.auto import suggest_profile, suggest_profile_for_endpoint
from surfer.models.schema import parse_json_object
from surfer.prompts import render


def test_registry_discovers_the_new_profiles() -> None:
    assert {"holo1.5", "openai", "holo2", "holotron"} <= set(PROFILES)


def test_holo1_5_is_click_absolute_on_a_smart_resized_image() -> None:
    profile = get_profile("holo1.5")
    assert profile.frame == "absolute"
    # 1204x1204: 43x43 patches of 28 = 1,449,616 px > 1,003,520, so scaled by
    # sqrt(1449616/1003520) = 1.2019 and floored to 35 patches = 980 px a side.
    assert profile.image.target_size(Size(1204, 1204)) == Size(980, 980)
    assert profile.image.target_size(Size(1280, 800)) == Size(1260, 784)  # 45x28 patches: within bounds
    schema = profile.localizer_schema
    assert schema["required"] == ["action", "x", "y"] and schema["properties"]["action"]["enum"] == ["click_absolute"]
    assert "maximum" not in schema["properties"]["x"]
    assert profile.parse_point(parse_json_object('{"action": "click_absolute", "x": 412, "y": 97}')) == (412.0, 97.0)
    prompt = render(profile.templates["localizer"], target="the OK button", frame_hint=profile.frame_hint)
    assert '{"action": "click_absolute", "x": ..., "y": ...}' in prompt and "pixel coordinates" in prompt
    assert profile.serving.mm_processor_kwargs == {"max_pixels": 1_003_520}


def test_openai_profile_downscales_to_1280_and_sends_no_extra_body() -> None:
    profile = get_profile("openai")
    assert profile.frame == "absolute"
    assert profile.image.target_size(Size(2560, 1440)) == Size(1280, 720)
    assert profile.image.target_size(Size(1024, 768)) == Size(1024, 768)
    assert all(profile.extra_body_for(role) == {} for role in ("policy", "localizer", "validator"))
    with pytest.raises(ModelOutputError):
        profile.parse_point({"x": 3})


def test_holo2_turns_thinking_off_and_holotron_trusts_remote_code() -> None:
    holo2, holotron = get_profile("holo2"), get_profile("holotron")
    assert holo2.extra_body_for("localizer") == {"chat_template_kwargs": {"thinking": False}}
    assert holo2.serving.reasoning_parser == "holo2" and holo2.max_images == 3
    assert holotron.serving.trust_remote_code and holotron.serving.hybrid
    qwen3 = get_profile("qwen3-vl")  # Holo2's frame and image sizes, without its thinking block
    assert (qwen3.frame, qwen3.image) == (holo2.frame, holo2.image)
    assert qwen3.extra_body_for("policy") == {} and qwen3.reply_prefix == "" and qwen3.serving.reasoning_parser is None


@pytest.mark.parametrize("ids,expected", [
    (["Hcompany/Holotron-12B"], "holotron"),
    (["Hcompany/Holo2-4B"], "holo2"),
    (["Hcompany/Holo2-30B-A3B"], "holo2"),
    (["Hcompany/Holo1.5-72B"], "holo1.5"),
    (["Hcompany/Holo1-7B"], "holo1.5"),
    (["gpt-4.1-mini"], "openai"),
    ([], "openai"),
    # the bases as servers name them: a hub id, a local path, quantised, Ollama's tags
    (["Qwen/Qwen2.5-VL-7B-Instruct"], "holo1.5"),
    (["/models/Qwen2.5-VL-72B-Instruct-AWQ"], "holo1.5"),
    (["qwen2.5vl:7b"], "holo1.5"),
    (["Qwen/Qwen3-VL-8B-Instruct"], "qwen3-vl"),
    (["/srv/Qwen3-VL-30B-A3B-Instruct-FP8"], "qwen3-vl"),
    (["qwen3-vl:8b"], "qwen3-vl"),
    (["Qwen/Qwen2-VL-7B-Instruct"], "openai"),  # 0..1000 boxes, not Qwen2.5-VL's pixels: not guessed
])
def test_suggest_profile(ids: list[str], expected: str) -> None:
    name, reason = suggest_profile(ids)
    assert name == expected
    assert reason and expected in reason  # never silent: the reason names the choice


async def test_suggest_profile_for_endpoint_asks_v1_models(standin) -> None:
    server = standin(lambda request: {}, model="Hcompany/Holo2-8B")
    name, reason = await suggest_profile_for_endpoint(server.base_url)
    assert name == "holo2" and "Hcompany/Holo2-8B" in reason
    from surfer import Agent  # the SDK takes profile="auto" too (the configuration reference offers it), also in a loop

    assert Agent(base_url=server.base_url, model=server.model, profile="auto").profile.name == "holo2"


async def test_suggest_profile_for_an_unreachable_endpoint_says_so() -> None:
    from surfer.core.errors import ModelServerUnreachable

    with pytest.raises(ModelServerUnreachable, match="cannot reach"):
        await suggest_profile_for_endpoint("http://127.0.0.1:9/v1")



async def test_suggest_profile_for_an_endpoint_that_wants_a_key_or_is_loading_says_so(standin) -> None:
    # not "choose --profile explicitly": the key is what to fix, or the server is not ready (exit 3)
    from surfer.core.errors import ConfigError, ModelServerUnreachable

    server = standin(lambda request: {})
    server.models_status = 401
    with pytest.raises(ConfigError, match=r'^profile="auto": .*wants an API key \(HTTP 401: HTTP 401 from the stand-in\); '
                                          r"give it with Agent\(api_key=\.\.\.\)"):  # in Python's words, called from Python
        await suggest_profile_for_endpoint(server.base_url)
    server.models_status = 503
    with pytest.raises(ModelServerUnreachable, match=r"is not ready: /models answered HTTP 503"):
        await suggest_profile_for_endpoint(server.base_url)


def test_policy_schema_requires_every_action_tag_and_raw_newlines_parse() -> None:
    """Structured-output engines fill in only required fields: a variant whose `type` has a
    default once let `{"action": {}}` through (seen with random-weight models under xgrammar)."""
    from surfer.agent.roles import PolicyDecision
    from surfer.models.schema import portable_schema

    schema = portable_schema(PolicyDecision.model_json_schema())
    variants = schema["properties"]["action"]["anyOf"]
    assert len(variants) > 10 and all("type" in v["required"] for v in variants)
    assert parse_json_object('{"thought": "line one\nline\ttwo", "action": {"type": "back"}}')["thought"] == "line one\nline\ttwo"


def test_the_roles_schemas_are_made_once_and_each_role_has_its_own_copy(monkeypatch) -> None:
    """A batch makes its roles for every task: the schemas come from pydantic once in a process (the
    policy's takes ~14 ms of CPU), equal to a fresh one, and no role can change another's."""
    from surfer import ScriptedModel
    from surfer.agent import roles
    from surfer.models.schema import portable_schema

    fresh = portable_schema(roles.PolicyDecision.model_json_schema())
    made: list[str] = []
    for model in (roles.PolicyDecision, roles.FinalDecision, roles.ValidatorAnswer):
        build = model.model_json_schema
        monkeypatch.setattr(model, "model_json_schema", lambda build=build, name=model.__name__: made.append(name) or build())
    cached = getattr(roles, "_made_schema", None)
    if cached is not None:
        cached.cache_clear()  # (as in a new process)
    client = roles.RoleClient("policy", ScriptedModel(), get_profile("holo2"))
    policies = [roles.Policy(client) for _ in range(3)]
    validators = [roles.Validator(client) for _ in range(3)]
    assert sorted(made) == ["FinalDecision", "PolicyDecision", "ValidatorAnswer"]
    assert policies[0].schema == policies[2].schema == fresh
    assert validators[0].schema == validators[1].schema and validators[0].schema is not validators[1].schema
    policies[0].schema["properties"].pop("action")
    assert "action" in policies[1].schema["properties"] and "action" in roles.Policy(client).schema["properties"]

