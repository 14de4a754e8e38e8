"""Every action in real Chromium, checked by what the page itself recorded."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from surfer.core.actions import (
    Answer, Back, Click, CloseTab, CssPoint, Drag, Forward, Goto, Hover, PressKeys, Refresh, Scroll, SwitchTab,
    TypeText, Wait,
)
from surfer.core.errors import ActionFailed, ActionNotSupported

BTN = CssPoint(x=160, y=120)
FIELD = CssPoint(x=250, y=215)


async def page_log(env) -> list[str]:  # type: ignore[no-untyped-def]
    return await env.page.evaluate("window.__log")


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (Click(target="button", point=BTN), ["click:0"]),
        (Click(target="button", point=BTN, double=True), ["click:0", "click:0", "dblclick"]),
        (Click(target="button", point=BTN, button="right"), ["contextmenu", "auxclick:2"]),
        (Click(target="button", point=BTN, button="middle"), ["auxclick:1"]),
        (Hover(target="grey box", point=CssPoint(x=360, y=120)), ["hover"]),
        (PressKeys(keys="Control+K"), ["key:Control+K"]),
        (Drag(target="red square", point=CssPoint(x=130, y=330), to_target="dashed box", to_point=CssPoint(x=460, y=360)), ["dropped"]),
    ],
    ids=["click", "double", "right", "middle", "hover", "press-combo", "drag"],
)
async def test_pointer_and_key_actions(browser_env, pages, action, expected):
    env = await browser_env(pages.url("actions.html"))
    outcome = await env.perform(action)
    assert await page_log(env) == expected
    assert outcome.detail
    assert outcome.settle_reason
    if action.type == "hover":  # the tooltip Chromium draws outside the page, never on a screenshot, is told
        assert outcome.detail.endswith('; its tooltip reads "Shows the menu"')


async def test_type_clears_then_types_and_submits(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    outcome = await env.perform(TypeText(text="hello world", target="field", point=FIELD, clear=True, submit=True))
    assert await env.page.input_value("#field") == "hello world"
    assert [e for e in await page_log(env) if e.startswith("submit")] == ["submit:hello world"]
    assert outcome.detail == "typed 11 characters and pressed Enter"
    # a click that missed the field: the model is told the text went into no field
    outcome = await env.perform(TypeText(text="lost", target="field", point=CssPoint(x=700, y=600)))
    assert await env.page.input_value("#field") == "hello world"
    assert outcome.detail == (
        "typed 4 characters; the click at (700, 600) focused no text field, so the keys went to the page, not into a field"
    )
    assert await env.page.evaluate("getSelection().toString()") == ""  # no select-all of the page to "clear" it
    # a search button whose field appears and takes the focus a moment after the click: the text goes into it whole
    outcome = await env.perform(TypeText(text="shoes", target="Search", point=CssPoint(x=160, y=535)))
    assert await env.page.input_value("#late") == "shoes" and outcome.detail == "typed 5 characters"


async def test_type_without_clear_appends_into_focused_field(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    await env.page.focus("#field")
    await env.page.keyboard.press("End")
    outcome = await env.perform(TypeText(text="!", clear=False))
    assert await env.page.input_value("#field") == "old text!"
    assert "typed 1 characters" in outcome.detail


async def test_scroll_page_and_inside_element(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    outcome = await env.perform(Scroll(direction="up", amount=1))  # at the top already: the model is told
    assert outcome.detail == "scrolling up at (640, 400) moved nothing: already at the top there"
    outcome = await env.perform(Scroll(direction="down", amount=3))
    assert await env.page.evaluate("window.scrollY") == 300
    assert outcome.detail == "scrolled the page down 300 px at (640, 400)"
    await env.perform(Scroll(direction="up", amount=1))
    assert await env.page.evaluate("window.scrollY") == 200
    outcome = await env.perform(Scroll(direction="down", amount=50))  # 2000 px of room left: as far as it goes
    assert outcome.detail == "scrolled the page down 2000 px at (640, 400) (now at its bottom)"
    await env.page.evaluate("window.scrollTo(0, 0)")
    outcome = await env.perform(Scroll(direction="down", amount=2, target="box", point=CssPoint(x=600, y=150)))
    assert await env.page.evaluate("document.getElementById('box').scrollTop") == 200
    assert await env.page.evaluate("window.scrollY") == 0
    assert outcome.detail == "scrolled the scrolling area down 200 px at (600, 150)"


async def test_goto_back_forward_refresh(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    await env.perform(Goto(url=pages.url("page2.html")))
    assert env.page.url.endswith("page2.html")
    await env.perform(Back())
    assert env.page.url.endswith("actions.html")
    await env.perform(Forward())
    assert env.page.url.endswith("page2.html")
    await env.page.evaluate("window.marker = 1")
    await env.perform(Refresh())
    assert await env.page.evaluate("window.marker === undefined")
    outcome = await env.perform(Forward())
    assert "no page in that direction" in outcome.detail
    # the browser's own keys reach no page through the DevTools protocol: surfer does what the browser would
    await env.page.evaluate("window.marker = 1")
    outcome = await env.perform(PressKeys(keys="F5"))
    assert await env.page.evaluate("window.marker === undefined")
    assert outcome.detail.startswith("F5 is the browser's key to reload the page: now at")
    with pytest.raises(ActionFailed, match=r"Control\+l opens the browser's address bar.*use the goto action"):
        await env.perform(PressKeys(keys="ctrl+l"))


async def test_the_start_url_waits_for_a_timer_its_page_started(browser_env, pages):
    # a page that moves on by itself 300 ms after it loads: the first screenshot shows where it went
    env = await browser_env(pages.url("redirect_soon.html"))
    assert env.page.url.endswith("page2.html")


async def test_a_page_whose_document_never_ends_is_shown_as_far_as_it_came(browser_env):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from surfer.tools.settle import SettleConfig

    done = threading.Event()

    class Streaming(BaseHTTPRequestHandler):  # a server that sends the top of the page, then holds the rest
        def log_message(self, *args):  # type: ignore[no-untyped-def]
            pass

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<title>Streaming</title><h1>The first part</h1>" + b" " * 2048)
            self.wfile.flush()
            done.wait(10)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Streaming)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:  # (it failed the run: "could not open ...: Timeout exceeded", with the page there)
        env = await browser_env(url, navigation_timeout=0.5, settle=SettleConfig(timeout=0.2))
        seen = await env.observe()
        assert seen.title == "Streaming" and seen.notices == (f"{url} was still loading after 0.5 s: what arrived of it is shown",)
    finally:
        done.set()
        server.shutdown()
        server.server_close()


async def test_back_through_a_single_page_apps_history(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    await env.page.evaluate("history.pushState({}, '', 'next-view')")  # a view of the app, the same document
    outcome = await env.perform(Back())
    assert env.page.url == pages.url("actions.html")
    assert outcome.detail == f"now at {pages.url('actions.html')}"


async def test_click_that_opens_a_tab_makes_it_current_then_switch_and_close(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    popup = await env.page.locator("#popup").bounding_box()
    await env.perform(Click(target="link", point=CssPoint(x=popup["x"] + 5, y=popup["y"] + 5)))
    assert env.page.url.endswith("page2.html")
    observation = await env.observe()
    assert len(observation.tabs) == 2 and observation.active_tab == 1
    assert observation.title == "Page two"
    await env.perform(SwitchTab(index=0))
    assert env.page.url.endswith("actions.html")
    await env.perform(CloseTab(index=1))
    assert len((await env.observe()).tabs) == 1
    async with env.context.expect_page() as opened:  # the page opens a tab by itself (a timer, no click): closed
        await env.page.evaluate("setTimeout(() => window.open('page2.html'), 0)")
    tab = await opened.value
    if not tab.is_closed():
        await tab.wait_for_event("close")
    outcome = await env.perform(Wait(seconds=0.05))
    assert "opened a tab by itself (" in outcome.detail and "closed, as a browser's popup blocker would" in outcome.detail
    assert env.page.url.endswith("actions.html") and len((await env.observe()).tabs) == 1
    await env.perform(CloseTab())  # closing the last tab leaves a blank one
    assert env.page.url == "about:blank"


async def test_a_tab_that_closes_itself_hands_back_to_the_tab_left_open(browser_env, pages):
    # a sign-in popup that calls window.close() when it is done: the run goes on in its opener
    env = await browser_env(pages.url("popup_closes.html"))
    outcome = await env.perform(Click(target="Sign in", point=CssPoint(x=100, y=20)))
    # the popup's page request is never reported finished (its tab closed): not waited for until the timeout
    assert "network-timeout" not in outcome.settle_reason, outcome
    if "closed itself" not in outcome.detail:  # (a loaded machine: the popup closed after the click's settle)
        await env.page.wait_for_event("close")
        outcome = await env.perform(Wait(seconds=0.1))
    assert env.page.url.endswith("popup_closes.html")
    assert "closes_itself.html closed itself; the current tab is now" in outcome.detail
    observation = await env.observe()
    assert observation.title == "Opener" and len(observation.tabs) == 1


async def test_a_self_signed_test_server_opens_only_where_https_errors_are_ignored(browser_env):
    from surfer.apps.demo.static_site import StaticSite

    data = Path(__file__).with_name("data")
    tls = (data / "self-signed-test-only.crt", data / "self-signed-test-only.key")  # 127.0.0.1, for these tests only
    with StaticSite(Path(__file__).with_name("pages"), tls=tls) as site:
        env = await browser_env(ignore_https_errors=True)
        await env.perform(Goto(url=site.url("page2.html")))
        assert await env.page.text_content("h1") == "Page two"
        with pytest.raises(ActionFailed, match="certificate is not trusted: for a test server of yours, --ignore-https-errors"):
            await (await browser_env()).perform(Goto(url=site.url("page2.html")))


async def test_wait_action_waits(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    outcome = await env.perform(Wait(seconds=0.2))
    assert outcome.action_seconds >= 0.2
    assert outcome.detail == "waited 0.2 s"


async def test_unsupported_and_failing_actions_give_clear_errors(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    with pytest.raises(ActionNotSupported, match="cannot perform 'answer'"):
        await env.perform(Answer(text="42"))
    with pytest.raises(ActionFailed, match=re.escape("cannot press 'Control+Nope': unknown key 'Nope'; use key names")):
        await env.perform(PressKeys(keys="Control+Nope"))
    outcome = await env.perform(PressKeys(keys="ctrl+k"))  # as models often write it (the desktop took it already)
    assert await page_log(env) == ["key:Control+k"] and outcome.detail == "pressed Control+k"
    await env.perform(PressKeys(keys="cmd+k"))  # a Mac's shortcut: Control here (it was Super, which the page saw bare)
    assert (await page_log(env))[-1] == "key:Control+k"
    with pytest.raises(ActionFailed, match="could not open"):
        await env.perform(Goto(url="http://127.0.0.1:1/unreachable"))
    with pytest.raises(ActionFailed, match="no tab 5"):
        await env.perform(SwitchTab(index=5))
    with pytest.raises(ValueError, match="needs a localized point"):
        await env.perform(Click(target="button"))


async def test_observation_geometry_with_scale_factor_2(browser_env, pages):
    env = await browser_env(pages.url("actions.html"), viewport=(900, 600), device_scale_factor=2)
    observation = await env.observe()
    shot = observation.screenshot
    assert (shot.size.width, shot.size.height) == (1800, 1200)
    assert shot.scale == 2 and shot.mime == "image/jpeg"
    assert observation.url.endswith("actions.html") and observation.title == "Actions"


def test_key_names_as_models_write_them():
    from surfer.tools.keys import playwright_keys

    assert playwright_keys("ctrl+shift+k") == "Control+Shift+k"
    assert [playwright_keys(k) for k in ("enter", "esc", "cmd+a", "down", "pgdn", " ", "Control++", "F5", "a")] == [
        "Enter", "Escape", "ControlOrMeta+a", "ArrowDown", "PageDown", "Space", "Control++", "F5", "a"]
    assert playwright_keys("Control+Nope") == "Control+Nope"  # left for Playwright to refuse
    # Modifiers joined by spaces or '-' (xdotool's 'ctrl k'), a name of several words: they were unknown keys.
    assert [playwright_keys(k) for k in ("ctrl k", "Ctrl-Shift-K", "ctrl + k", "Page Down", "Alt-F4")] == [
        "Control+k", "Control+Shift+K", "Control+k", "PageDown", "Alt+F4"]
    from surfer.tools.keys import browser_shortcut

    assert [browser_shortcut(playwright_keys(k)) for k in ("shift+ctrl+tab", "Control+R", "ctrl+a", "F6", "Enter", "ctrl w")] == [
        "previous_tab", "refresh", None, "address bar", None, "close_tab"]
    # 'cmd' as models trained on Mac screens write it: the platform's primary modifier (Super does no shortcut here)
    assert [playwright_keys(k) for k in ("cmd+c", "Command-V", "win+e")] == ["ControlOrMeta+c", "ControlOrMeta+V", "Meta+e"]
    assert [browser_shortcut(playwright_keys(k)) for k in ("cmd+r", "cmd+w", "cmd+l")] == ["refresh", "close_tab", "address bar"]


def test_urls_are_normalized():
    from surfer.tools.browser import normalize_url

    assert normalize_url("example.com") == "https://example.com"
    assert normalize_url("/a/b?c=1", "http://127.0.0.1:8000/x/y.html") == "http://127.0.0.1:8000/a/b?c=1"
    assert normalize_url("../z.html", "http://h/x/y/w.html") == "http://h/x/z.html"
    assert normalize_url("about:blank") == "about:blank"
    # as an address bar reads them: a local path is a file, a bare loopback host is served over http
    assert normalize_url("/tmp/a b.html") == "file:///tmp/a%20b.html"
    assert normalize_url("~/x.html") == Path("~/x.html").expanduser().as_uri()
    assert normalize_url("localhost:8000/x") == "http://localhost:8000/x"
    assert normalize_url("127.0.0.1:8765") == "http://127.0.0.1:8765"
    assert normalize_url("localhost.example.com") == "https://localhost.example.com"


def test_a_start_url_is_a_page_a_browser_opens_and_a_local_path_is_a_file_url(tmp_path, monkeypatch):
    from surfer.core.errors import ConfigError
    from surfer.tools.url_policy import UrlPolicy, check_start_url

    with pytest.raises(ConfigError, match="start URL /tmp/page.html is refused: file: URLs are refused"):
        check_start_url("/tmp/page.html", UrlPolicy())
    # how to allow them, as the caller says it: Python code is told of no command-line flag
    with pytest.raises(ConfigError, match=r'allow them with Agent\(browser=\{"allow_file_urls": True\}\)$'):
        check_start_url("file:///tmp/page.html", UrlPolicy())
    from surfer.core.surface import calling_from_cli

    with calling_from_cli(), pytest.raises(ConfigError, match=r"with --allow-file-urls \(config: \[browser\] allow_file"):
        check_start_url("file:///tmp/page.html", UrlPolicy())
    (tmp_path / "page.html").write_text("<h1>x</h1>")
    check_start_url(str(tmp_path / "page.html"), UrlPolicy(allow_file_urls=True))
    # a local path to no file, and a file of this folder named without ./, were opened as https://page.html
    # or left to the browser's net::ERR_FILE_NOT_FOUND (exit 1, after the browser and the model server started)
    with pytest.raises(ConfigError, match=f"start URL ./nope.html is a local path, and there is no such file: {tmp_path}/nope.html$"):
        monkeypatch.chdir(tmp_path)
        check_start_url("./nope.html", UrlPolicy(allow_file_urls=True))
    with pytest.raises(ConfigError, match=r"start URL page.html is a file in this folder, .* give ./page.html to open the file"):
        check_start_url("page.html", UrlPolicy(allow_file_urls=True))
    with pytest.raises(ConfigError, match=r"start URL ftp://files.example/a is not a web page: .* not ftp:$"):
        check_start_url("ftp://files.example/a", UrlPolicy())
    for fine in ("localhost:8000/x", "example.com", "about:blank", "data:text/html,<p>x</p>"):
        check_start_url(fine, UrlPolicy())


async def test_a_local_path_opens_the_file_where_file_urls_are_allowed(browser_env):
    page = Path(__file__).with_name("pages") / "page2.html"
    env = await browser_env(str(page), allow_file_urls=True)
    assert env.page.url == page.as_uri()
    assert await env.page.text_content("h1") == "Page two"


async def test_goto_relative_url_resolves_against_the_current_page(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    await env.perform(Goto(url="/page3.html"))
    assert env.page.url == pages.url("page3.html")


def test_a_gone_browser_is_named_as_the_user_could_have_ended_it():
    """A headful window a person closed (in a take-over, say) was called a crash."""
    from surfer.tools.browser import BrowserEnvironment

    assert BrowserEnvironment(headless=False)._gone_reason() == (
        "the browser is gone: its window was closed, or the Chromium process died")
    assert BrowserEnvironment()._gone_reason() == "the browser crashed (the Chromium process died)"
