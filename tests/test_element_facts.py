"""element_at on a real Chromium: the facts the commitment rules read, through
same-origin and cross-origin iframes and an open shadow root; never a typed
value; None (never an exception) from a closed, crashed or busy page."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from conftest import crash_page
from surfer.agent.commitments import DEFAULT, click_commitment, typing_commitment
from surfer.agent.confirm import SensitiveRules, acted_on
from surfer.core.actions import Click, PressKeys, TypeText
from surfer.apps.demo.static_site import StaticSite
from surfer.tools.element_facts import element_at, focused_element

pytestmark = pytest.mark.browser
PAGES = Path(__file__).with_name("pages")


@pytest.fixture(scope="module")
def other_origin():
    """tests/pages again, on another port: another origin for the cross-origin iframe."""
    with StaticSite(PAGES) as site:
        yield site


@pytest.fixture
async def page(shared_browser, pages, other_origin):
    context = await shared_browser.new_context(viewport={"width": 900, "height": 1100})
    page = await context.new_page()
    await page.goto(pages.url("sensitive.html") + "?cross=" + other_origin.url("sensitive_frame.html"))
    cross = page.frame_locator("#cross")
    await cross.locator("#pay-now").wait_for()
    await page.frame_locator("#same").locator("#pay-now").wait_for()
    yield page
    await context.close()


class Focus:
    """What `acted_on` asks of an environment, on a bare page."""

    def __init__(self, page) -> None:  # type: ignore[no-untyped-def]
        self.page = page

    async def focused_element(self):  # type: ignore[no-untyped-def]
        return await focused_element(self.page)


async def center(locator):
    box = await locator.bounding_box()  # relative to the main frame's viewport, in frames too
    assert box, "element not laid out"
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


async def facts(page, locator):
    return await element_at(page, *await center(locator))


async def test_links_tabs_and_filters(page, pages):
    orders = await facts(page, page.locator("#orders"))
    assert (orders.role, orders.name, orders.tag, orders.href, orders.group) == ("link", "Orders", "a", "/orders", "navigation")
    assert orders.origin == pages.base_url.rstrip("/") and orders.selector == "#orders"
    assert click_commitment(orders) is None
    tab = await facts(page, page.locator("#tab-orders"))
    assert (tab.role, tab.name, tab.group) == ("tab", "Order history", "tablist")
    sort = await facts(page, page.locator("#sort"))
    assert (sort.role, sort.name, sort.tag) == ("combobox", "Sort order", "select")
    chip = await facts(page, page.locator("#chip-x"))
    assert (chip.role, chip.name) == ("button", "Remove") and "Active filters" in chip.context
    assert click_commitment(chip) is None


async def test_a_cart_line_remove_button_from_its_icon(page):
    icon = page.locator("#cart-remove .icon")
    remove = await facts(page, icon)  # the point is on the icon: climbs to the button
    assert (remove.role, remove.tag, remove.type) == ("button", "button", "button")
    assert remove.name.endswith("Remove") and "AirPods" in remove.context
    assert click_commitment(remove)


async def test_a_commitment_in_another_language(page):
    """A German shop's order button (its verb last), a Chinese one (no spaces), a Chinese dialog's OK; their pages
    are not."""
    order = await facts(page, page.locator("#bestellen"))
    assert order.name == "Zahlungspflichtig bestellen"
    assert click_commitment(order) == "it presses the 'Zahlungspflichtig bestellen' button"
    assert click_commitment(await facts(page, page.locator("#kaufen-zh"))) == "it presses the '立即购买' button"
    assert click_commitment(await facts(page, page.locator("#history-ja"))) is None  # purchase history: a title
    assert click_commitment(await facts(page, page.locator("#bestellungen"))) is None
    ok = await facts(page, page.locator("#dlg-zh-ok"))  # "OK" under "Delete these 3 conversations?"
    assert ok.dialog.startswith("确定要删除这3个会话吗？") and click_commitment(ok) == "it presses '确定' in a dialog that mentions '删除'"


async def test_forms_login_and_payment(page, pages):
    signin = await facts(page, page.locator("#signin"))
    assert (signin.role, signin.name, signin.type) == ("button", "Sign in", "submit")
    form = signin.form
    assert form and form.method == "post" and form.submit_name == "Sign in" and form.has_current_password
    assert [(f.name, f.type, f.autocomplete) for f in form.fields] == [
        ("Email", "email", "username"), ("Password", "password", "current-password")]
    assert not form.has_payment_fields and click_commitment(signin) is None
    password = await facts(page, page.locator("#password"))
    assert (password.role, password.name, password.autocomplete) == ("textbox", "Password", "current-password")
    assert typing_commitment(password, pages.base_url) is None

    place = await facts(page, page.locator("#place"))
    assert (place.role, place.name, place.tag, place.type) == ("button", "Place order", "input", "submit")
    assert place.form.has_payment_fields and place.form.action_origin == "https://pay.example" and place.form.sends_to == ["https://pay.example"]
    assert place.form.name == "Payment"
    assert click_commitment(place) == "it submits a form with payment fields"
    card = await facts(page, page.locator("#cc"))
    assert (card.name, card.autocomplete, card.input_name) == ("Card number", "cc-number", "cardnumber")

    # A key acts on what has the focus: Enter in the card field submits the payment form, Enter or Space on
    # "Place order" presses it; Enter in the sign-in form's password field, or a Tab, commits nothing.
    env = Focus(page)
    assert await acted_on(env, PressKeys(keys="Enter")) is None  # nothing focused yet
    await page.focus("#cc")
    assert (await acted_on(env, PressKeys(keys="enter"))).autocomplete == "cc-number"
    assert (await acted_on(env, TypeText(text="4242 4242 4242 4242", submit=True))).autocomplete == "cc-number"
    assert await acted_on(env, PressKeys(keys="Tab")) is None  # (not asked: a Tab activates nothing)
    rules = SensitiveRules()
    assert rules.reason(PressKeys(keys="Enter"), pages.base_url, element=await focused_element(page)) == \
        "it submits a form with payment fields (Enter in its field)"
    assert rules.reason(TypeText(text="4242", submit=True), pages.base_url, element=await focused_element(page))
    await page.focus("#place")
    assert DEFAULT.key(await focused_element(page), "space") == \
        "it submits a form with payment fields (Space on the focused button)"
    await page.focus("#password")
    assert DEFAULT.key(await focused_element(page), "Enter") is None

    # a "button" drawn as a <div> with a click listener and no role: nothing actionable in the facts, so the
    # model's description of it is judged
    await page.evaluate("""() => { const d = document.createElement('div'); d.id = 'div-order'; d.textContent = 'Place order';
        d.style.cssText = 'position:fixed;left:600px;top:10px;width:160px;height:40px;cursor:pointer';
        d.addEventListener('click', () => {}); document.body.append(d); }""")
    div = await facts(page, page.locator("#div-order"))
    assert div.plain and div.name == "Place order"
    assert rules.reason(Click(target="the 'Place order' button", point=None), pages.base_url, element=div)
    assert rules.reason(Click(target="the order summary", point=None), pages.base_url, element=div) is None


async def test_a_dialog_is_named_by_its_title(page):
    ok = await facts(page, page.locator("#dlg-ok"))
    assert ok.name == "OK" and ok.dialog.startswith("Delete 3 conversations?")
    assert click_commitment(ok)
    assert click_commitment(await facts(page, page.locator("#dlg-cancel"))) is None


async def test_a_typed_password_never_appears_in_the_facts(page):
    secret = "hunter2-Zq9!sekret"
    await page.fill("#password", secret)
    await page.fill("#email", "me@example.com")
    await page.fill("#cc", "4242424242424242")
    for selector in ("#password", "#signin", "#email", "#cc", "#place"):
        data = json.dumps((await facts(page, page.locator(selector))).to_dict())
        assert secret not in data and "4242424242424242" not in data and "me@example.com" not in data, selector


async def test_an_open_shadow_root(page):
    delete = await facts(page, page.locator("#shadow-delete"))
    assert (delete.role, delete.name, delete.group) == ("button", "Delete message", "toolbar")
    assert click_commitment(delete)


async def test_a_same_origin_iframe(page, pages):
    frame = page.frame_locator("#same")
    pay = await facts(page, frame.locator("#pay-now"))
    assert (pay.role, pay.name, pay.type) == ("button", "Pay $42.10", "submit")
    assert pay.origin == pages.base_url.rstrip("/") and pay.form.has_payment_fields
    card = await facts(page, frame.locator("#card"))
    assert card.name == "Card number" and typing_commitment(card, pages.base_url) is None
    link = await facts(page, frame.locator("#frame-link"))
    assert (link.role, link.name) == ("link", "Orders")


async def test_a_cross_origin_iframe(page, pages, other_origin):
    frame = page.frame_locator("#cross")
    pay = await facts(page, frame.locator("#pay-now"))
    assert (pay.role, pay.name) == ("button", "Pay $42.10")
    assert pay.origin == other_origin.base_url.rstrip("/") != pages.base_url.rstrip("/")
    assert pay.form.has_payment_fields and click_commitment(pay)
    card = await facts(page, frame.locator("#card"))
    assert (card.name, card.autocomplete) == ("Card number", "cc-number")
    reason = typing_commitment(card, pages.base_url)
    assert reason and "card-number field" in reason and "not the task's start site" in reason
    await frame.locator("#card").focus()  # the focus inside a cross-origin frame is found where it is drawn
    focused = await focused_element(page)
    assert (focused.autocomplete, focused.origin) == ("cc-number", other_origin.base_url.rstrip("/"))
    assert DEFAULT.key(focused, "Enter") == "it submits a form with payment fields (Enter in its field)"
    link = await facts(page, frame.locator("#frame-link"))
    assert (link.role, link.href) == ("link", "/orders")
    # under CSS zoom (the frame's document drawn 1.5 times larger), where the button is drawn is the button
    await page.evaluate("document.documentElement.style.zoom = '1.5'")
    box = await page.locator("#cross").evaluate(
        "e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width / e.offsetWidth, e.clientLeft, e.clientTop]; }")
    inner = await frame.locator("#pay-now").evaluate("e => { const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }")
    left, top, zoom = box[0] + box[3] * box[2], box[1] + box[4] * box[2], box[2]
    drawn = await element_at(page, left + inner[0] * zoom, top + inner[1] * zoom)
    assert zoom == pytest.approx(1.5, abs=0.01) and (drawn.role, drawn.name) == ("button", "Pay $42.10")
    focused = await focused_element(page)  # (the card field still has the focus)
    assert focused is not None and focused.autocomplete == "cc-number"


async def test_nothing_there(page):
    assert await element_at(page, -50, -50) is None


async def test_a_closed_page_gives_none(shared_browser, pages):
    context = await shared_browser.new_context()
    page = await context.new_page()
    await page.goto(pages.url("sensitive.html"))
    await page.close()
    assert await element_at(page, 20, 20) is None
    await context.close()


async def test_a_crashed_page_gives_none(shared_browser, pages):
    context = await shared_browser.new_context()
    page = await context.new_page()
    await page.goto(pages.url("sensitive.html"))
    await crash_page(page)
    assert await element_at(page, 20, 20) is None
    await context.close()


@pytest.mark.serial  # a 0.4 s timeout checked against the wall clock
async def test_a_busy_page_times_out_with_none(shared_browser, pages):
    context = await shared_browser.new_context()
    page = await context.new_page()
    await page.goto(pages.url("sensitive.html"))
    await page.evaluate("setTimeout(() => { const end = Date.now() + 2500; while (Date.now() < end) {} }, 0)")
    await asyncio.sleep(0.05)
    started = time.monotonic()
    assert await element_at(page, 20, 20, timeout=0.4) is None
    assert time.monotonic() - started < 1.5
    await context.close()
