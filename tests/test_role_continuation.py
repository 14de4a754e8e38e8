"""Role continuation: a localizer and validator on the policy's endpoint and model
continue the policy's request of the step (its messages byte for byte, its reply,
then their own instruction); separate endpoints keep requests of their own; the
coordinates are read in the frame of the same prepared screenshot either way."""

from __future__ import annotations

import asyncio
import json

import pytest

from surfer.agent.events import RunStarted, StepFinished
from surfer.agent.loop import Agent
from surfer.apps.options import DEMO_RECORDINGS
from surfer.models.backend import ImagePart, TextPart
from surfer.models.profiles import PROFILES
from surfer.models.scripted import ScriptedModel
from surfer.tools.replay import ReplayEnvironment

RUN = DEMO_RECORDINGS / "demo-1280x800"
CLICK = {"thought": "open it", "notes": "", "action": {"type": "click", "target": "the 'Register' link"}}
ANSWER = {"thought": "done", "notes": "", "action": {"type": "answer", "text": "ABC-123"}}


def _point(request):  # type: ignore[no-untyped-def]
    """A localizer reply at 25 % / 50 % of the last image, in the request's frame."""
    text = "".join(p.text for m in request.messages for p in m.content if isinstance(p, TextPart))
    if "click_absolute" in text:
        return {"action": "click_absolute", "x": 100, "y": 100}
    return {"x": 250, "y": 500}


def _run(profile: str, continuation: bool | None, **options):  # type: ignore[no-untyped-def]
    model = ScriptedModel(policy=[CLICK, ANSWER], default={"localizer": _point, "validator": {"verdict": "accept", "reasons": "ok"}})
    backends = options.pop("backends", None)
    events: list = []
    agent = Agent(backend=model, backends=backends, profile=profile, environment=ReplayEnvironment(RUN),
                  role_continuation=continuation, max_steps=5, **options)
    result = asyncio.run(agent.run("Register and report the code.", listeners=[events.append]))
    assert result.status == "success", result.reason
    return agent, model, events


def _texts(message):  # type: ignore[no-untyped-def]
    return "".join(p.text for p in message.content if isinstance(p, TextPart))


@pytest.mark.parametrize("layout", ["window", "blocks", "conversation"])
def test_localizer_and_validator_continue_the_policy_request(layout: str) -> None:
    agent, model, events = _run("holotron", None, prompt_layout=layout)
    assert agent.continuation == {"localizer": True, "validator": True}  # the profile's default
    policy = [r for r in model.requests if r.schema_name == "policy"]
    localizer = next(r for r in model.requests if r.schema_name == "localizer")
    validator = next(r for r in model.requests if r.schema_name == "validator")
    for role_request, step in ((localizer, 0), (validator, 1)):
        head = role_request.messages[:len(policy[step].messages)]
        assert head == policy[step].messages  # byte-identical prefix: the server reuses all of it
        reply, instruction = role_request.messages[len(policy[step].messages):]
        # the reply after what Holotron's generation prompt adds (its empty thinking block): the tokens computed
        assert reply.role == "assistant" and _texts(reply).startswith("<think></think>")
        assert json.loads(_texts(reply).removeprefix("<think></think>")) == (CLICK if step == 0 else ANSWER)
        assert instruction.role == "user" and not any(isinstance(p, ImagePart) for p in instruction.content)
    assert "Target: the 'Register' link" in _texts(localizer.messages[-1])
    assert "Proposed answer: \"ABC-123\"" in _texts(validator.messages[-1])
    assert localizer.schema_name == "localizer" and validator.schema_name == "validator"
    started = next(e for e in events if isinstance(e, RunStarted))
    assert started.config["role_continuation"] == {"localizer": True, "validator": True}


def test_separate_endpoints_and_the_setting_keep_requests_of_their_own() -> None:
    own = ScriptedModel(default={"localizer": _point})
    agent, _model, _events = _run("holotron", None, backends={"localizer": own})
    assert agent.continuation == {"localizer": False, "validator": True}
    (request,) = own.requests
    assert isinstance(request.messages[0].content[0], ImagePart) and len(request.messages) == 1
    agent, model, _ = _run("holotron", False)
    assert agent.continuation == {"localizer": False, "validator": False}
    validator = next(r for r in model.requests if r.schema_name == "validator")
    assert [m.role for m in validator.messages] == ["user"]
    assert not PROFILES["openai"].role_continuation and PROFILES["holo1.5"].role_continuation
    configured = Agent(backend=ScriptedModel(), profile="openai", role_continuation=True)
    assert configured.continuation == {"localizer": True, "validator": True}
    on_separate_servers = Agent(profile="holo2", localizer={"base_url": "http://127.0.0.1:9/v1"})
    assert on_separate_servers.continuation == {"localizer": False, "validator": True}


@pytest.mark.parametrize("profile", ["holotron", "holo1.5", "openai"])
def test_points_are_read_in_the_same_frame_with_and_without_continuation(profile: str) -> None:
    points = {}
    for continuation in (False, True):
        _agent, model, events = _run(profile, continuation)
        localizer = next(r for r in model.requests if r.schema_name == "localizer")
        if continuation:
            assert "the last screenshot above" in _texts(localizer.messages[-1])
            if profile == "holo1.5":
                assert "click_absolute" in _texts(localizer.messages[-1])
        step = next(e.record for e in events if isinstance(e, StepFinished))
        points[continuation] = step.points
    assert points[True] == points[False] and points[True]
