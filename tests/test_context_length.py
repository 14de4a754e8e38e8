"""A request longer than the model's context (vLLM's HTTP 400 "exceeds model's maximum context
length") does not end the run: the policy sends fewer screenshots from then on, and a continuing
localizer asks on the screenshot alone. Against the stand-in over real HTTP."""

from __future__ import annotations

import asyncio

import pytest

from surfer.agent.loop import Agent
from surfer.apps.options import DEMO_RECORDINGS
from surfer.tools.replay import ReplayEnvironment

RUN = DEMO_RECORDINGS / "demo-1280x800"
CLICK = {"thought": "next", "notes": "", "action": {"type": "click", "target": "the 'Next' button"}}


def _answer(request):  # type: ignore[no-untyped-def]
    return {"x": 500, "y": 500} if request.role == "localizer" else CLICK


def _run(server, layout: str = "blocks", **options):  # type: ignore[no-untyped-def]
    agent = Agent(base_url=server.base_url, model=server.model, profile="holotron", environment=ReplayEnvironment(RUN),
                  prompt_layout=layout, block_images=16, max_steps=5, **options)
    return asyncio.run(agent.run("Go through the pages."))


@pytest.mark.parametrize("layout", ["blocks", "conversation"])
@pytest.mark.parametrize("continuation", [True, False])
def test_a_request_over_the_context_sends_fewer_screenshots_and_the_run_goes_on(standin, continuation, layout) -> None:
    free = standin(_answer)
    assert _run(free, layout, role_continuation=continuation).status == "limit"
    policy = [r for r in free.requests if r.role == "policy"]
    assert [len(r.image_urls) for r in policy] == [1, 2, 3, 4, 5]  # append-only: every screenshot so far
    tokens = [len(r.text) // 4 + 256 * len(r.image_urls) for r in policy]  # the stand-in's count

    tight = standin(_answer, max_model_len=tokens[2])  # the 4th policy request no longer fits
    result = _run(tight, layout, role_continuation=continuation)
    assert result.status == "limit" and result.steps == 5, result.reason
    answered = [r for r in tight.requests if r.role == "policy"]
    sent = [len(r.image_urls) for r in answered]
    # the 4th request (4 screenshots) was refused; the step asked again with half of them in a new block
    # that starts at the latest screenshot, which then grows again up to that cap
    assert sent[:3] == [1, 2, 3] and sent[3] == 4 and sent[4] == 1 and max(sent[5:]) <= 2, sent
    fits = lambda r: len(r.text) // 4 + 256 * len(r.image_urls) <= tokens[2]  # noqa: E731
    assert [fits(r) for r in answered] == [True, True, True, False] + [True] * (len(answered) - 4)
    localizer = [r for r in tight.requests if r.role == "localizer"]
    if continuation:
        # the 3rd step's policy request just fitted; the localizer continuing it did not, and asked again
        # on the screenshot alone (one image, no policy turn before it)
        refused = next(k for k, r in enumerate(localizer) if not fits(r))
        assert len(localizer[refused].image_urls) == 3 and len(localizer[refused + 1].image_urls) == 1
        assert fits(localizer[refused + 1]) and "Go through the pages." not in localizer[refused + 1].text
    else:
        assert all(len(r.image_urls) == 1 and fits(r) for r in localizer)

def test_a_single_screenshot_over_the_context_is_a_clear_error(standin) -> None:
    server = standin(_answer, max_model_len=100)
    result = _run(server, role_continuation=True)
    assert result.status == "error" and "exceeds model's maximum context length (100)" in (result.reason or "")
    assert [len(r.image_urls) for r in server.requests] == [1]  # nothing left to drop: asked once


def test_a_server_that_takes_fewer_images_gets_fewer_and_the_run_goes_on(standin) -> None:
    # vLLM's refusal of more images than --limit-mm-per-prompt allows is met as a request too long: the policy
    # and the validator ask again with fewer screenshots (the run ended at the 2nd step with the HTTP 400)
    from surfer.models.standin import RawReply

    def one_image_only(request):  # type: ignore[no-untyped-def]
        if len(request.image_urls) > 1:
            return RawReply({"error": {"message": "At most 1 image(s) may be provided in one request.", "code": 400}}, 400)
        if request.role == "validator":
            return {"verdict": "accept", "reasons": "shown"}
        done = sum(r.role == "policy" and len(r.image_urls) == 1 for r in server.requests) > 2
        return {"thought": "seen", "notes": "", "action": {"type": "answer", "text": "done"}} if done else _answer(request)

    server = standin(one_image_only)
    result = _run(server, "window", role_continuation=False)
    assert result.status == "success" and result.steps == 3, result.reason
    refused = [r.role for r in server.requests if len(r.image_urls) > 1]
    assert refused == ["policy", "validator"]  # once each: the policy's cap holds for the rest of the run
