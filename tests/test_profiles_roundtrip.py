"""Exact coordinate round trip per profile in a real Chromium.

Small buttons at known CSS positions record their clicks. For each viewport
and device scale factor, the real screenshot from `BrowserEnvironment.observe()`
is prepared with the profile's image policy; the perfect model answer in the
profile's frame is computed HERE with explicit arithmetic (not with
css_to_model), parsed by the Localizer role, and clicked through
`BrowserEnvironment.perform`. The page must record a click on the target.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from PIL import Image

from surfer.agent.roles import Localizer, RoleClient
from surfer.core.actions import Click
from surfer.models.imaging import prepare_image
from surfer.models.profiles import PROFILES, Profile
from surfer.models.scripted import ScriptedModel
from surfer.tools.browser import BrowserEnvironment
from surfer.tools.settle import SettleConfig

pytestmark = pytest.mark.browser

VIEWPORTS = [(1280, 800), (800, 1280), (2560, 720), (1204, 1204)]
SCALES = [1, 2]
SIZE = 14  # CSS px per target button
# Target centres as fractions of the viewport: corners, centre, odd spots.
SPOTS = [(0.03, 0.04), (0.97, 0.05), (0.5, 0.5), (0.04, 0.96), (0.96, 0.95), (0.37, 0.61), (0.71, 0.23)]


def page_html(viewport: tuple[int, int]) -> tuple[str, dict[str, tuple[float, float]]]:
    width, height = viewport
    centres, buttons = {}, []
    for i, (fx, fy) in enumerate(SPOTS):
        cx, cy = round(fx * width), round(fy * height)
        centres[f"t{i}"] = (cx, cy)
        buttons.append(
            f'<button id="t{i}" style="position:absolute;left:{cx - SIZE / 2}px;top:{cy - SIZE / 2}px;'
            f'width:{SIZE}px;height:{SIZE}px;padding:0;border:0;background:#c00"></button>'
        )
    script = "window.clicks=[];document.addEventListener('click',e=>window.clicks.push(e.target.id||'page'));"
    html = f"<html><body style='margin:0;overflow:hidden'>{''.join(buttons)}<script>{script}</script></body></html>"
    return html, centres


def _distinct(profiles: dict[str, Profile]) -> dict[str, Profile]:
    """The profiles that differ in what a click's round trip depends on (frame, image sizes, localizer
    schema): qwen3-vl is Holo2's, and its clicks are Holo2's."""
    seen: dict[Any, str] = {}
    for name, profile in profiles.items():
        seen.setdefault((profile.frame, profile.image, json.dumps(profile.localizer_schema, sort_keys=True)), name)
    return {name: profiles[name] for name in seen.values()}


DISTINCT = _distinct(PROFILES)


def perfect_answer(profile: Profile, centre: tuple[float, float], viewport: tuple[int, int], sent: tuple[int, int]) -> dict[str, Any]:
    """What a perfect model answers, from first principles: the CSS centre as a
    fraction of the viewport, times the frame's extent."""
    fx, fy = centre[0] / viewport[0], centre[1] / viewport[1]
    if profile.frame == "normalized_1000":
        answer: dict[str, Any] = {"x": round(fx * 1000), "y": round(fy * 1000)}
    elif profile.frame == "absolute":
        answer = {"x": round(fx * sent[0]), "y": round(fy * sent[1])}
    else:  # a new frame needs its own arithmetic here
        raise AssertionError(f"no oracle for frame {profile.frame!r}")
    required = profile.localizer_schema.get("required", [])
    for name in required:
        if name not in answer:  # e.g. Holo1.5's {"action": "click_absolute"}
            answer[name] = profile.localizer_schema["properties"][name]["enum"][0]
    return answer


async def _noop(call: object) -> None:
    pass


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("viewport", VIEWPORTS, ids=lambda v: f"{v[0]}x{v[1]}")
async def test_clicks_land_on_target_for_every_profile(shared_browser, viewport: tuple[int, int], scale: int) -> None:
    env = BrowserEnvironment(browser=shared_browser, viewport=viewport, device_scale_factor=scale,
                             settle=SettleConfig(timeout=1.0, quiet=0.0, timer_horizon=0.0))
    await env.start()
    try:
        html, centres = page_html(viewport)
        await env.page.set_content(html)
        observation = await env.observe()
        shot = observation.screenshot
        assert (shot.size.width, shot.size.height) == (viewport[0] * scale, viewport[1] * scale)
        misses = []
        budgets = (None, 800) if scale == 1 else (None,)  # an image budget: downscaled / fewer tiles
        for name, profile, budget in [(n, p, b) for n, p in DISTINCT.items() for b in budgets]:
            prepared = await prepare_image(shot, profile.image, budget)
            with Image.open(io.BytesIO(prepared.data)) as image:
                sent = image.size  # the size of the bytes the model would really see
            if budget:
                assert profile.image.image_tokens(prepared.geometry.sent) <= budget, name
            model = ScriptedModel()
            localizer = Localizer(RoleClient("localizer", model, profile))
            for target, centre in centres.items():
                answer = perfect_answer(profile, centre, viewport, sent)
                model.enqueue("localizer", json.dumps(answer))
                point = await localizer.locate(f"the button {target}", prepared, _noop)
                await env.perform(Click(target=f"the button {target}", point=point))
                clicked = await env.page.evaluate("window.clicks[window.clicks.length - 1]")
                if clicked != target:
                    misses.append(f"{name} (budget {budget}): {target} at {centre} answered {answer} on {sent} -> {point} hit {clicked!r}")
        assert not misses, "\n".join(misses)
    finally:
        await env.close()


def test_every_profile_has_an_oracle() -> None:
    """A new profile must be covered by the round trip (its frame known to perfect_answer)."""
    for profile in PROFILES.values():
        answer = perfect_answer(profile, (10, 20), (100, 100), (50, 50))
        assert {"x", "y"} <= set(answer)
