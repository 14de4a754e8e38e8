"""Native widgets in real Chromium, headless shell and headful (Xvfb): what is
drawn on the screenshot can be clicked. Positions come from the screenshot
the test was given (colours found in the image) or from the geometry of what
is drawn, read like a person reads the screen (`surfer.tools.widgets.drawn`)
— never from Playwright's select_option / fill. Each fixture page reports
the values and events it received."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from surfer import Agent, ScriptedModel
from surfer.apps.cli import app
from surfer.core.actions import Click, CssPoint, Dialog, Goto, PressKeys, Scroll, TypeText, Upload
from surfer.core.errors import ActionFailed
from surfer.models.backend import ImagePart, ModelRequest
from surfer.tools.browser import BrowserEnvironment
from surfer.tools.settle import SettleConfig
from surfer.tools.chromium import LAUNCH_ARGS, find_chromium
from surfer.tools.dialogs import BLUE
from surfer.tools.widgets import drawn

GOLD = (255, 215, 0)
SCROLL_THUMB = (168, 168, 168)  # widgets.js THUMB
SKY = (0, 160, 255)


@pytest.fixture(scope="module")
async def headful_browser(xvfb):
    """Full Chromium with a window, on the private Xvfb display."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=find_chromium(headless=False), headless=False, args=list(LAUNCH_ARGS),
            env={"DISPLAY": xvfb, "PATH": "/usr/bin:/bin"},
        )
        yield browser
        await browser.close()


@pytest.fixture(params=["headless", "headful"])
async def widget_env(request, shared_browser, headful_browser, pages):
    """Factory for environments on the headless shell or the headful Chromium."""
    browser = shared_browser if request.param == "headless" else headful_browser
    made: list[BrowserEnvironment] = []

    async def make(page: str, **options: Any) -> BrowserEnvironment:
        env = BrowserEnvironment(browser=browser, viewport=(800, 600), screenshot_format="png", **options)
        await env.start(pages.url(f"widgets/{page}"))
        made.append(env)
        return env

    yield make
    for env in made:
        await env.close()


def colour_centre(image: bytes, rgb: tuple[int, int, int], tolerance: int = 8) -> tuple[float, float]:
    """Centre of the pixels of one colour in an image (image pixels)."""
    pixels = np.asarray(Image.open(io.BytesIO(image)).convert("RGB")).astype(int)
    mask = (np.abs(pixels - np.array(rgb)).sum(axis=2) <= tolerance)
    ys, xs = np.nonzero(mask)
    assert len(xs) > 20, f"colour {rgb} is not drawn on the screenshot"
    return float(xs.mean()), float(ys.mean())


async def box_of(env: BrowserEnvironment, selector: str, frame: Any = None) -> dict[str, float]:
    box = await (frame or env.page).locator(selector).bounding_box()
    assert box is not None
    return box


async def click(env: BrowserEnvironment, x: float, y: float, **options: Any) -> str:
    return (await env.perform(Click(target="t", point=CssPoint(x=x, y=y), **options))).detail


async def click_drawn(env: BrowserEnvironment, label: str) -> str:
    """Click the centre of the drawn popup item showing `label`."""
    items = [i for i in await drawn(env.page) if i["visible"] and (i["label"] == label or i["value"] == label)]
    assert items, f"{label!r} is not drawn; drawn: {[i['label'] for i in await drawn(env.page) if i['visible']]}"
    item = items[0]
    return await click(env, item["x"] + item["width"] / 2, item["y"] + item["height"] / 2)


async def received(env: BrowserEnvironment, frame: Any = None) -> list[str]:
    return await (frame or env.page).evaluate("window.received")


# -- selects ------------------------------------------------------------------------


async def test_select_option_is_chosen_where_the_screenshot_draws_it(widget_env):
    env = await widget_env("select.html")
    box = await box_of(env, "#plan")
    await click(env, box["x"] + 10, box["y"] + box["height"] / 2)
    shot = (await env.observe()).screenshot
    x, y = colour_centre(shot.data, GOLD)  # the Gold option's own background colour, as Chromium draws it
    assert y > box["y"] + box["height"]  # drawn under the select
    await click(env, x / shot.scale, y / shot.scale)
    assert await received(env) == ["plan:input:Gold", "plan:change:Gold"]
    assert await drawn(env.page) == []  # the popup closed


async def test_customizable_selects_popovers_modals_and_zoomed_pages(browser_env, pages):
    # (headless only: the same Blink draws the page in both, and each test of both costs a second)
    env = await browser_env(pages.url("widgets/select.html"), viewport=(800, 600), screenshot_format="png")
    # a customizable select (`appearance: base-select`): Chromium opens the page's own picker, in the page
    field = await box_of(env, "#theme")
    await click(env, field["x"] + 10, field["y"] + field["height"] / 2)
    shot = (await env.observe()).screenshot
    x, y = colour_centre(shot.data, SKY, tolerance=40)  # the blue square in the Sky option, as the page draws it
    assert await drawn(env.page) == []  # no stand-in
    await click(env, x, y)
    # a select in a popover, then in a modal dialog: both are in the browser's top layer, over any z-index; a
    # click outside a popover closes it, and a modal makes the rest of the page inert. The page is zoomed as a
    # whole (`zoom` on <html>) for the modal: its popup opens under the select, not zoomed twice.
    open_state = "[document.querySelector('#filter-panel').matches(':popover-open'), checkout.open]"
    for opener, select, choice, still_open in (("#filters", "#sort", "Cheapest", [True, False]),
                                               ("#checkout-open", "#delivery", "Express", [False, True])):
        button = await box_of(env, opener)
        await click(env, button["x"] + 5, button["y"] + 5)
        if select == "#delivery":
            await env.page.evaluate("document.documentElement.style.zoom = '1.5'")  # the site zooms itself
        field = await box_of(env, select)
        await click(env, field["x"] + 10, field["y"] + field["height"] / 2)
        under = [i for i in await drawn(env.page) if i["visible"]][0]["y"] - (field["y"] + field["height"])
        assert 0 <= under < 3, under
        assert max(i["x"] + i["width"] for i in await drawn(env.page)) <= 800  # a long option is cut at the window
        await click_drawn(env, choice)
        assert await env.page.evaluate(open_state) == still_open
    assert await received(env) == ["theme:input:\u25a0 Sky", "theme:change:\u25a0 Sky", "sort:input:Cheapest",
                                   "sort:change:Cheapest", "delivery:input:Express", "delivery:change:Express"]


async def test_select_option_groups_long_lists_iframes_and_shadow_roots(widget_env):
    env = await widget_env("select.html")
    car = await box_of(env, "#car")
    await click(env, car["x"] + 10, car["y"] + 5)
    assert "Swedish" not in [i["label"] for i in await drawn(env.page)]  # group labels are drawn, not choosable
    await click_drawn(env, "Audi")
    country = await box_of(env, "#country")
    await click(env, country["x"] + 10, country["y"] + 5)
    visible = [i["label"] for i in await drawn(env.page) if i["visible"]]
    assert "Country 01" in visible and "Country 45" not in visible  # the popup shows at most 20 rows
    first = next(i for i in await drawn(env.page) if i["label"] == "Country 01")
    # ... and a scroll bar beside them, drawn on the screenshot even where the browser hides its own (headless)
    async def thumb() -> tuple[float, float]:  # where the scroll thumb is drawn beside the popup's rows
        beside = (first["x"] + first["width"], first["y"], first["x"] + first["width"] + 15, first["y"] + 20 * 24)
        shown = Image.open(io.BytesIO((await env.observe()).screenshot.data)).crop(tuple(map(round, beside)))
        out = io.BytesIO()
        shown.save(out, "PNG")
        return colour_centre(out.getvalue(), SCROLL_THUMB)

    top = (await thumb())[1]
    await env.perform(Scroll(direction="down", amount=10, point=CssPoint(x=first["x"] + 20, y=first["y"] + 40)))
    assert (await thumb())[1] > top + 50  # it follows the list
    await click_drawn(env, "Country 45")
    shade = await box_of(env, "#shade")  # a select in a component's shadow root
    await click(env, shade["x"] + 10, shade["y"] + 5)
    await click_drawn(env, "Blue")
    frame = env.page.frame_locator("#frame")
    size = await frame.locator("#size").bounding_box()
    await click(env, size["x"] + 10, size["y"] + 5)
    await click_drawn(env, "Large")
    child = env.page.frames[1]
    assert await received(env) == [
        "car:input:Audi", "car:change:Audi", "country:input:Country 45", "country:change:Country 45",
        "shade:input:Blue", "shade:change:Blue",
    ]
    assert await received(env, child) == ["size:change:Large"]


async def test_select_keyboard_and_multi_select_clicks(widget_env):
    env = await widget_env("select.html")
    plan = await box_of(env, "#plan")
    await env.perform(TypeText(text="Plat", target="the plan", clear=False, submit=True,
                               point=CssPoint(x=plan["x"] + 10, y=plan["y"] + 5)))
    await click(env, plan["x"] + 10, plan["y"] + 5)
    await env.perform(PressKeys(keys="ArrowUp"))
    await env.perform(PressKeys(keys="Escape"))  # closes without choosing
    assert await drawn(env.page) == []
    assert await received(env) == ["plan:input:Platinum", "plan:change:Platinum"]
    toppings = await box_of(env, "#toppings")
    row = toppings["height"] / 4
    await click(env, toppings["x"] + 20, toppings["y"] + row * 0.5)  # Cheese
    await click(env, toppings["x"] + 20, toppings["y"] + row * 2.5, modifiers=["Control"])  # + Olives
    await click(env, toppings["x"] + 20, toppings["y"] + row * 1.5, modifiers=["Shift"])  # the range Ham..Olives
    changes = [r for r in await received(env) if r.startswith("toppings:change")]
    assert changes == ["toppings:change:Cheese", "toppings:change:Cheese+Olives", "toppings:change:Ham+Olives"]


# -- pickers ------------------------------------------------------------------------


async def test_pickers_set_what_is_clicked_in_them(widget_env):
    env = await widget_env("pickers.html")

    async def open_picker(selector: str) -> None:
        box = await box_of(env, selector)
        await click(env, box["x"] + box["width"] - 10, box["y"] + box["height"] / 2)  # the calendar / clock icon

    await open_picker("#date")
    await click_drawn(env, "↓")  # next month
    await click_drawn(env, "15")
    await open_picker("#month")
    await click_drawn(env, "Mar")
    await open_picker("#time")
    await click_drawn(env, "07")
    minutes = [i for i in await drawn(env.page) if i["value"].startswith("m:")]
    await env.perform(Scroll(direction="down", amount=8, point=CssPoint(x=minutes[0]["x"] + 10, y=minutes[0]["y"] + 10)))
    await click_drawn(env, "30")
    await click_drawn(env, "PM")
    await env.perform(PressKeys(keys="Escape"))
    await open_picker("#color")
    shot = (await env.observe()).screenshot
    x, y = colour_centre(shot.data, (255, 153, 0), tolerance=0)  # the orange swatch
    await click(env, x / shot.scale, y / shot.scale)
    got = await received(env)
    date = await env.page.evaluate("document.getElementById('date').value")
    assert got[0] == f"date:change:{date}" and date.endswith("-15")
    assert got[1].startswith("month:change:") and got[1].endswith("-03")
    assert got[2:5] == ["time:change:07:00", "time:change:07:30", "time:change:19:30"]
    assert got[5] == "color:change:#ff9900"
    await open_picker("#meeting")  # datetime-local: the calendar sets the day, the time stays
    await click_drawn(env, "2025-06-20")
    assert (await received(env))[-1] == "meeting:change:2025-06-20T09:30"
    await open_picker("#week")
    week = next(i for i in await drawn(env.page) if i["visible"] and i["value"].count("-W") and i["label"] != "Wk")
    await click(env, week["x"] + week["width"] / 2, week["y"] + week["height"] / 2)
    assert (await received(env))[-1] == f"week:change:{week['value']}"


async def test_typing_into_date_and_datalist_fields(widget_env):
    env = await widget_env("pickers.html")
    date = await box_of(env, "#date")
    # a click on the day part puts the caret there; a date typed as the field shows it starts at its month (it
    # gave 202025-03-06)
    day = CssPoint(x=date["x"] + 36, y=date["y"] + date["height"] / 2)
    await env.perform(TypeText(text="03152024", target="date", clear=False, point=day))
    fruit = await box_of(env, "#fruit")
    await env.perform(TypeText(text="Ap", target="fruit", point=CssPoint(x=fruit["x"] + 10, y=fruit["y"] + 5)))
    assert [i["label"] for i in await drawn(env.page)] == ["Apple", "Apricot"]  # the suggestions under the field
    await click_drawn(env, "Apricot")
    got = await received(env)
    assert [r for r in got if r.startswith("date")][-1] == "date:change:2024-03-15"  # (a change per year digit)
    assert got[-1] == "fruit:change:Apricot"
    # text in the field's value format is its value (it was typed part by part from the caret: 40510-02-02)
    await env.perform(TypeText(text="2025-07-04", target="date", point=day))
    assert (await received(env))[-1] == "date:change:2025-07-04"


# -- dialogs ------------------------------------------------------------------------


async def test_dialogs_are_drawn_and_answered(widget_env):
    env = await widget_env("dialogs.html")
    points = {}
    for name in ("alert", "confirm", "prompt", "later", "print", "guard"):
        box = await box_of(env, f"#{name}")
        points[name] = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    await env.observe()
    detail = await click(env, *points["confirm"])
    assert "confirm dialog" in detail and "'Delete the file?'" in detail
    observation = await env.observe()
    assert any("Delete the file?" in n for n in observation.notices)
    x, y = colour_centre(observation.screenshot.data, BLUE)  # the drawn OK button
    assert "accepted (OK)" in await click(env, x, y)
    assert await received(env) == ["confirm:true"]

    await click(env, *points["prompt"])
    await env.observe()
    assert "with 'Ada'" in (await env.perform(TypeText(text="Ada", submit=True))).detail
    await click(env, *points["later"])  # the dialog opens 150 ms after the click, during settle
    outcome = await env.perform(Click(target="t", point=CssPoint(x=points["alert"][0], y=points["alert"][1])))
    assert "dismissed (Cancel) the confirm dialog 'Still there?' by default" in outcome.detail
    assert "an alert dialog" in outcome.detail  # the click went on to the Alert button
    assert "accepted (OK) the alert dialog 'Saved!'" in (await env.perform(Dialog(response="accept"))).detail
    with pytest.raises(ActionFailed, match="no dialog is open"):
        await env.perform(Dialog(response="accept"))
    assert await received(env) == ["confirm:true", "prompt:Ada", "later:false", "alert:done"]
    # a Print button: with a window, Chromium's print preview held the click (and the run) until a person closed it
    assert "the page asked to print" in await click(env, *points["print"])
    assert (await received(env))[-1] == "printed"
    # (the settle wait's own in-page check tells it: a key that presses Print is told too)
    assert "the page asked to print" in (await env.perform(PressKeys(keys="Enter"))).detail

    assert "asked to print" not in await click(env, *points["guard"])  # told once
    outcome = await env.perform(Goto(url=env.page.url.replace("dialogs.html", "files.html")))
    assert "beforeunload" in outcome.detail and env.page.url.endswith("files.html")


async def test_a_wait_a_dialog_held_up_does_not_take_the_print_of_a_later_action(browser_env, pages):
    """A settle wait held up by a dialog goes on once the dialog is answered; when it ends after the next action's
    click (a loaded machine), that action's print is still told by the next action's own wait."""
    from surfer.tools.settle import WAIT_FOR_QUIET

    env = await browser_env(pages.url("widgets/dialogs.html"))
    page = env.page
    await page.evaluate("const d = document.body.appendChild(document.createElement('div'));"
                        "setInterval(() => { d.textContent = Date.now(); }, 20)")  # never quiet: both waits time out
    now = await page.evaluate("Date.now()")

    def wait(since: float, timeout: int) -> "asyncio.Future[Any]":
        return asyncio.ensure_future(page.evaluate(WAIT_FOR_QUIET, {"quiet": 80, "timeout": timeout, "since": since,
                                                                    "horizon": 1000, "ticking": 5000}))
    stale = wait(now - 5000, 300)  # the earlier action's wait, ending first
    await asyncio.sleep(0.05)
    latest = wait(now, 900)
    await page.evaluate("print()")
    assert (await stale)[4] is False and (await latest)[4] is True


# -- the whole loop: dialog text in the prompt, upload, download ----------------------


def _image_of(request: ModelRequest) -> bytes:
    parts = [p for m in request.messages if not isinstance(m.content, str) for p in m.content if isinstance(p, ImagePart)]
    return parts[-1].data


def locate_colour(rgb: tuple[int, int, int]):
    """A localizer answer found in the image it was sent (holo2: 0..1000)."""
    def answer(request: ModelRequest) -> dict:
        data = _image_of(request)
        width, height = Image.open(io.BytesIO(data)).size
        x, y = colour_centre(data, rgb, tolerance=40)
        return {"x": round(x / width * 1000), "y": round(y / height * 1000)}
    return answer


def at(point: tuple[float, float], viewport=(800, 600)) -> dict:
    return {"x": round(point[0] / viewport[0] * 1000), "y": round(point[1] / viewport[1] * 1000)}


def step(action: dict) -> dict:
    return {"thought": "", "notes": "", "action": action}


async def test_agent_sees_the_dialog_answers_it_uploads_and_downloads(shared_browser, pages, tmp_path):
    upload = tmp_path / "cv.txt"
    upload.write_text("hello upload\n")
    env = BrowserEnvironment(browser=shared_browser, viewport=(800, 600), screenshot_format="png", upload_files=[upload])
    await env.start(pages.url("widgets/dialogs.html"))
    confirm = await box_of(env, "#confirm")
    await env.page.goto(pages.url("widgets/files.html"))
    file_field, report, picker = [await box_of(env, s) for s in ("#file", "#report", "#pick")]
    await env.page.goto(pages.url("widgets/dialogs.html"))
    centre = lambda b: (b["x"] + b["width"] / 2, b["y"] + b["height"] / 2)  # noqa: E731
    model = ScriptedModel(
        policy=[
            step({"type": "click", "target": "the Confirm button"}),
            step({"type": "click", "target": "the dialog's OK button"}),
            step({"type": "goto", "url": pages.url("widgets/files.html")}),
            step({"type": "click", "target": "Choose a file…"}),
            step({"type": "upload", "target": "the Attachment field", "path": "cv.txt"}),
            step({"type": "upload", "target": "the Attachment field", "path": "/etc/passwd"}),
            step({"type": "click", "target": "Download the report"}),
            {"thought": "", "notes": "", "action": {"type": "answer", "text": "done"}},
        ],
        localizer=[at(centre(confirm)), locate_colour(BLUE), at(centre(picker)), at(centre(file_field)),
                   at(centre(file_field)), at(centre(report))],
        validator=[{"verdict": "accept", "reasons": "ok"}],
    )
    asked = []

    def person(request):  # type: ignore[no-untyped-def]
        asked.append(request.reason)
        return True

    agent = Agent(backend=model, environment=env, profile="holo2", confirm=person)
    try:
        result = await agent.run("confirm, upload and download", out_dir=tmp_path / "run")
    finally:
        await env.close()
    assert result.status == "success", result
    policy = [r for r in model.requests if r.schema_name == "policy"]
    second = json.dumps([p.text for m in policy[1].messages if not isinstance(m.content, str) for p in m.content if hasattr(p, "text")])
    assert "Open dialog: a confirm dialog" in second and "Delete the file?" in second
    assert "Files you may upload (upload action): " + str(upload.resolve()) in second
    steps = [json.loads(line) for line in (tmp_path / "run" / "trajectory.jsonl").read_text().splitlines()]
    assert "the page opened a confirm dialog" in steps[0]["outcome"]["detail"]
    assert "accepted (OK) the confirm dialog" in steps[1]["outcome"]["detail"]
    assert "error: the page opened a file chooser and nothing was chosen" in steps[3]["outcome"]["detail"]
    assert steps[4]["outcome"]["detail"].startswith("uploaded cv.txt (13 bytes)")
    assert "not an allowed upload file" in steps[5]["outcome"]["error"]
    assert steps[6]["outcome"]["downloads"][0]["path"] == "downloads/report.csv"
    assert "a file arrived: report.csv" in steps[6]["outcome"]["detail"]
    saved = tmp_path / "run" / "downloads" / "report.csv"
    assert saved.read_text() == (Path(__file__).parent / "pages" / "widgets" / "report.csv").read_text()
    assert result.downloads == [steps[6]["outcome"]["downloads"][0]]
    assert json.loads((tmp_path / "run" / "result.json").read_text())["downloads"][0]["status"] == "saved"
    # accepting "Delete the file?" and keeping the download each needed a yes
    assert asked == ["it may accept a dialog that mentions 'Delete'", "it downloads a file (report.csv from " + pages.url("widgets/report.csv") + ")"]
    assert steps[1]["confirmation"]["approved"] and steps[6]["confirmation"]["reason"].startswith("it downloads a file")


async def test_download_caps_and_context_menus(browser_env, pages, tmp_path):
    env = await browser_env(pages.url("widgets/files.html"), downloads_dir=tmp_path / "dl", max_download_bytes=10, max_downloads=1)
    report = await box_of(env, "#report")
    first = await env.perform(Click(target="t", point=CssPoint(x=report["x"] + 5, y=report["y"] + 5)))
    assert first.downloads[0]["status"] == "too_large" and "over the 10 bytes cap" in first.detail
    second = await env.perform(Click(target="t", point=CssPoint(x=report["x"] + 5, y=report["y"] + 5)))
    assert second.downloads[0]["status"] == "over_count"
    assert not (tmp_path / "dl").exists() or not any((tmp_path / "dl").iterdir())
    custom = await box_of(env, "#custom")
    detail = await click(env, custom["x"] + 10, custom["y"] + 10, button="right")
    assert "context menu" not in detail and await env.page.locator("#menu").is_visible()
    log = await box_of(env, "#log")
    assert "nothing usable opened" in await click(env, log["x"] + 2, log["y"] + 2, button="right")


async def test_a_goto_to_a_file_downloads_it_and_is_not_an_error(browser_env, pages, tmp_path):
    env = await browser_env(pages.url("widgets/files.html"), downloads_dir=tmp_path / "dl")
    await env.context.route("**/export.csv", lambda route: route.fulfill(
        body="a,b\n", headers={"Content-Type": "text/csv", "Content-Disposition": 'attachment; filename="export.csv"'}))
    outcome = await env.perform(Goto(url="/export.csv"))
    assert outcome.detail.startswith("/export.csv is a file, not a page: it downloads (the tab stays at ")
    assert env.page.url == pages.url("widgets/files.html")
    # a start URL that is itself a file: the first look says so (there is no action yet to report it), until an action
    started = await browser_env(pages.url("widgets/report.zip"), downloads_dir=tmp_path / "dl2")
    for _ in range(2):
        notices = (await started.observe()).notices
        assert notices[0].startswith("the start URL ") and "is a file, not a page" in notices[0], notices
        assert notices[1].startswith("a file arrived: report.zip"), notices
    await started.perform(Goto(url=pages.url("widgets/files.html")))
    assert (await started.observe()).notices == ()


async def test_a_tab_opened_only_to_download_is_closed(browser_env, pages, tmp_path):
    # the headless shell leaves the blank tab of a target=_blank link to a file open (Chromium closes it)
    env = await browser_env(pages.url("download_tab.html"), downloads_dir=tmp_path / "dl", settle=SettleConfig(timeout=0.3))
    await env.context.route("**/export.csv", lambda route: route.fulfill(
        body="a,b\n", headers={"Content-Type": "text/csv", "Content-Disposition": 'attachment; filename="export.csv"'}))
    outcome = await env.perform(Click(target="Export", point=CssPoint(x=100, y=20)))
    assert "the new tab only downloaded a file and was closed" in outcome.detail
    observation = await env.observe()
    assert observation.title == "Exports" and len(observation.tabs) == 1


def test_upload_file_flag_must_name_existing_files(tmp_path):
    result = CliRunner().invoke(app, ["run", "task", "--upload-file", str(tmp_path / "missing.pdf")], env={"COLUMNS": "200"})
    assert result.exit_code == 2 and "browser.upload_files" in result.output
    assert "missing.pdf does not exist" in " ".join(result.output.split())
    with pytest.raises(Exception, match="missing.pdf does not exist"):
        Agent(backend=ScriptedModel(), files=[tmp_path / "missing.pdf"])
    (tmp_path / "ok.txt").write_text("x")
    agent = Agent(backend=ScriptedModel(), files=[tmp_path / "ok.txt"], max_steps=3)
    assert agent.config.browser.upload_files == [str((tmp_path / "ok.txt").resolve())] and agent.config.max_steps == 3


async def test_upload_outside_the_allowed_list_is_refused_unread(browser_env, pages, tmp_path):
    env = await browser_env(pages.url("widgets/files.html"))
    field = await box_of(env, "#file")
    with pytest.raises(ActionFailed, match="no files are allowed"):
        await env.perform(Upload(target="f", path="/etc/hostname", point=CssPoint(x=field["x"] + 5, y=field["y"] + 5)))
    assert await received(env) == []


async def test_upload_target_that_opens_no_chooser_is_an_error(browser_env, pages, tmp_path, monkeypatch):
    monkeypatch.setattr("surfer.tools.browser.actions.FILE_CHOOSER_TIMEOUT_MS", 300)  # (none opens: no need to wait long)
    allowed = tmp_path / "a.txt"
    allowed.write_text("a")
    env = await browser_env(pages.url("widgets/files.html"), upload_files=[allowed])
    log = await box_of(env, "#log")
    with pytest.raises(ActionFailed, match="opened no file chooser"):
        await env.perform(Upload(target="the log", path="a.txt", point=CssPoint(x=log["x"] + 2, y=log["y"] + 2)))


async def test_a_file_chooser_or_download_reported_late_belongs_to_the_click_that_started_it(shared_browser, pages, tmp_path):
    """The browser reports a file chooser or a download on another channel than the
    page's own answers; on a loaded machine the report came after the click had
    settled and its notice landed on the next step. A late report is made here by
    holding the reports back for a moment, as load does."""
    import asyncio

    env = BrowserEnvironment(browser=shared_browser, viewport=(800, 600), screenshot_format="png", downloads_dir=tmp_path / "dl")
    late = lambda report: lambda item: asyncio.get_running_loop().call_later(0.4, report, item)  # noqa: E731
    env._on_file_chooser = late(env._on_file_chooser)  # type: ignore[method-assign]
    env._downloads.on_download = late(env._downloads.on_download)  # type: ignore[method-assign]
    await env.start(pages.url("widgets/files.html"))
    try:
        picker, field, log, report = [await box_of(env, s) for s in ("#pick", "#file", "#log", "#report")]
        # a button whose script clicks the hidden field, then the field itself
        for box in (picker, field):
            detail = await click(env, box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            assert "the page opened a file chooser, but no file is allowed" in detail, detail
        outcome = await env.perform(Click(target="t", point=CssPoint(x=report["x"] + 5, y=report["y"] + 5)))
        assert [d["status"] for d in outcome.downloads] == ["saved"] and (tmp_path / "dl" / "report.csv").is_file()
        # a click that activates no file field neither waits for nor reports one
        detail = await click(env, log["x"] + 2, log["y"] + 2)
        assert "file chooser" not in detail, detail
    finally:
        await env.close()
