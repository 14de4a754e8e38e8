"""The lighter step path (issue 14) against the path it replaced, in real
Chromium: screenshots are the images they were (scale 1 and 2, clip,
scrolled pages), the caret no longer blinks, and typing inserts text in one
go only where the page listens to no key."""

from __future__ import annotations

import io

import pytest
from PIL import Image, ImageChops

from surfer.core.actions import Click, CssPoint, TypeText

PLAIN, NOTES = CssPoint(x=250, y=115), CssPoint(x=250, y=190)


async def _log(env) -> list[str]:  # type: ignore[no-untyped-def]
    return await env.page.evaluate("window.__log")


async def test_plain_text_is_inserted_in_one_go_with_input_events(browser_env, pages):
    env = await browser_env(pages.url("typing.html"))
    await env.perform(TypeText(text="value 0", target="field", point=PLAIN, clear=True))
    await env.perform(TypeText(text="a note", target="notes", point=NOTES, clear=False))
    assert await env.page.input_value("#plain") == "value 0"
    assert await env.page.input_value("#notes") == "a note"
    log = await _log(env)
    assert log.count("plain:beforeinput:insertText") == 1 and log.count("notes:beforeinput:insertText") == 1, log
    assert log.count("plain:input:true") == 1 and log.count("notes:input:true") == 1, log
    # what a field did not keep is told, and code boxes get every digit
    typed = {}
    fields = (("code", 335, "123"), ("fixed", 385, "new"), ("short", 435, "abcdefg"), ("digits", 485, "555-12"))
    for name, y, text in fields:
        typed[name] = (await env.perform(TypeText(text=text, target=name, point=CssPoint(x=115, y=y)))).detail
    # one digit per box, as a keyboard types them (an insert of "123" into the first box kept "1" of it)
    boxes = await env.page.evaluate("[...document.querySelectorAll('#code input')].map((box) => box.value)")
    assert boxes == ["1", "2", "3"]
    assert typed["code"] == "typed 3 characters"
    assert typed["fixed"].endswith("the field is read-only: its text did not change")
    assert typed["short"].endswith("the field takes at most 4 characters: not all of the 7 typed went in")
    assert typed["digits"].endswith("the field changed what was typed: it holds 5 characters (6 typed)")
    assert await env.page.evaluate("[fixed.value, short.value, digits.value]") == ["fixed", "abcd", "55512"]


@pytest.mark.parametrize("hook", ["keys", "onkey", "prop"])
async def test_a_page_that_listens_to_keys_gets_every_key(browser_env, pages, hook):
    env = await browser_env(pages.url(f"typing.html#{hook}"))
    await env.perform(TypeText(text="abc", target="field", point=PLAIN, clear=False))
    assert await env.page.input_value("#plain") == "abc"
    log = await _log(env)
    expected = {"keys": ["keydown:a", "keydown:b", "keydown:c"], "onkey": ["keyup"] * 3, "prop": ["keypress"] * 3}[hook]
    assert [e for e in log if e.startswith("key")] == expected
    assert log.count("plain:beforeinput:insertText") == 3  # one per key, as before


async def test_a_newline_is_still_the_enter_key(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    await env.perform(TypeText(text="hi\n", target="field", point=CssPoint(x=250, y=215), clear=True))
    assert [e for e in await _log(env) if e.startswith("submit")] == ["submit:hi"]


def _pixels(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data)).convert("RGB")


@pytest.mark.parametrize(("scale", "clip"), [(1, None), (2, None), (1, (40, 60, 320, 200)), (2, (40, 60, 320, 200))])
async def test_screenshots_are_the_images_the_old_path_took(browser_env, pages, scale, clip):
    new = await browser_env(pages.url("actions.html"), device_scale_factor=scale, clip=clip, screenshot_format="png")
    old = await browser_env(pages.url("actions.html"), device_scale_factor=scale, clip=clip, screenshot_format="png", legacy_step=True)
    for env in (new, old):
        await env.page.evaluate("window.scrollTo(0, 300)")  # a scrolled page: the clip is in viewport coordinates
    a, b = (await new.observe()).screenshot, (await old.observe()).screenshot
    width, height = (clip[2], clip[3]) if clip else new.viewport
    assert a.size == b.size and (a.size.width, a.size.height) == (width * scale, height * scale)
    assert ImageChops.difference(_pixels(a.data), _pixels(b.data)).getbbox() is None


async def test_clearing_then_inserting_replaces_the_old_text(browser_env, pages):
    env = await browser_env(pages.url("typing.html"))
    await env.page.fill("#plain", "old text")  # the test's setup, not the agent's action
    await env.page.evaluate("window.__log = []")
    await env.perform(TypeText(text="new", target="field", point=PLAIN, clear=True))
    assert await env.page.input_value("#plain") == "new"
    assert await _log(env) == ["plain:beforeinput:insertText", "plain:input:true"]


async def test_the_caret_stays_drawn_so_screenshots_of_a_focused_field_repeat(browser_env, pages):
    env = await browser_env(pages.url("typing.html"), screenshot_format="png")
    await env.perform(TypeText(text="abc", target="field", point=PLAIN, clear=False))
    assert await env.page.evaluate("getComputedStyle(document.activeElement).caretAnimation") == "manual"
    shots = []
    for _ in range(3):  # 0.3 s apart: a blinking caret (0.5 s on, 0.5 s off) would differ between some of them
        shots.append(_pixels((await env.observe()).screenshot.data))
        await env.page.wait_for_timeout(300)
    assert all(ImageChops.difference(shots[0], shot).getbbox() is None for shot in shots[1:])


async def test_the_title_read_by_the_settle_check_is_the_one_after_the_action(browser_env, pages):
    env = await browser_env(pages.url("typing.html"))
    assert (await env.observe()).title == "Typing"
    await env.perform(Click(target="Rename", point=CssPoint(x=160, y=275)))  # renames the page 50 ms later
    assert (await env.observe()).title == "Renamed"
    await env.page.evaluate("document.title = 'Changed by the page'")  # no action, no settle: asked for again
    assert (await env.observe()).title == "Changed by the page"


@pytest.mark.parametrize("fmt, options", [
    ("JPEG", {"quality": 85}), ("JPEG", {"quality": 60, "progressive": True}), ("PNG", {}), ("WEBP", {}),
])
@pytest.mark.parametrize("size", [(1280, 800), (2560, 1600), (17, 3)])
def test_screenshot_sizes_are_read_from_the_header(fmt, options, size) -> None:
    """PNG and JPEG sizes come from their headers without PIL; other formats through PIL."""
    from surfer.tools.browser.capture import image_size as _image_size

    data = io.BytesIO()
    Image.new("RGB", size, "white").save(data, format=fmt, **options)
    got = _image_size(data.getvalue())
    assert (got.width, got.height) == size
