"""The desktop environment on a real X server (Xvfb, started here) driving a
real Tk application (tests/apps/tk_form.py), with the agent talking to the
stand-in model server over real HTTP."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from conftest import private_xvfb

from surfer.agent.loop import Agent
from surfer.core.actions import (
    Back, Click, CssPoint, Drag, Goto, Hover, PressKeys, Scroll, SwitchTab, TypeText,
)
from surfer.core.coordinates import Size, model_to_css
from surfer.core.errors import ActionFailed, ActionNotSupported, ConfigError, EnvironmentFailure
from surfer.core.observation import Screenshot
from surfer.models.imaging import ImagePolicy, prepare_image
from surfer.models.standin import ChatRequest
from surfer.tools.desktop import DesktopEnvironment, _load_pyautogui, split_keys
from surfer.tools.settle import ScreenSettleConfig, settle_screen, tile_digests, tiles_changed

ROOT = Path(__file__).resolve().parents[1]
TK_FORM = Path(__file__).with_name("apps") / "tk_form.py"
SCREEN = (1024, 768)  # the xvfb fixture's screen (conftest.XVFB_SCREEN)


# -- fixtures ---------------------------------------------------------------------


class TkForm:
    """The running Tk app: its widget boxes and the events it printed."""

    def __init__(self, display: str) -> None:
        env = {**os.environ, "DISPLAY": display}
        self.process = subprocess.Popen([sys.executable, str(TK_FORM)], stdout=subprocess.PIPE, text=True, env=env)
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        ready = self.wait_for(lambda e: e["event"] == "ready")
        self.widgets: dict[str, dict[str, int]] = ready["widgets"]
        self.screen: tuple[int, int] = tuple(ready["screen"])  # type: ignore[assignment]

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.events.append(json.loads(line))
                self._changed.notify_all()

    def find(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        with self._changed:
            return next((e for e in self.events if predicate(e)), None)

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = next((e for e in self.events if predicate(e)), None)
                if found is not None:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    raise AssertionError(f"the app never reported it; events so far: {self.events[-8:]}")
                self._changed.wait(remaining)

    async def event(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        return await asyncio.to_thread(self.wait_for, predicate)

    def forget_events(self) -> None:
        with self._changed:
            self.events.clear()

    def centre(self, name: str) -> CssPoint:
        box = self.widgets[name]
        return CssPoint(x=box["x"] + box["width"] / 2, y=box["y"] + box["height"] / 2)

    def close(self) -> None:
        self.process.kill()
        self.process.wait(10)


@pytest.fixture
def tk_form(xvfb: str) -> Iterator[TkForm]:
    form = TkForm(xvfb)
    yield form
    form.close()


@pytest.fixture
async def desktop(xvfb: str, tk_form: TkForm) -> Any:
    env = DesktopEnvironment(display=xvfb)
    await env.start()
    yield env
    await env.close()


@pytest.fixture
async def bare_desktop(xvfb: str) -> Any:
    """The desktop with no application of ours started (for tests that act on nothing, or on a bare X window)."""
    env = DesktopEnvironment(display=xvfb)
    await env.start()
    yield env
    await env.close()


def is_event(name: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["event"] == name and all(e.get(k) == v for k, v in fields.items())


# -- the agent end to end ------------------------------------------------------------

TASK = "In the Surfer test form, multiply 6 by 7 with the Compute button and report the result."
TARGETS = {
    "the 'First number' entry field": "first",
    "the 'Second number' entry field": "second",
    "the 'Multiply' checkbox": "multiply",
    "the 'Compute' button": "compute",
}


class FormResponder:
    """Answers like a perfect model: the policy from the history in its
    prompt, the localizer from the widget boxes (normalised 0..1000 of the
    screen, the holotron frame), the answer from what the app shows."""

    def __init__(self, form: TkForm) -> None:
        self.form = form
        self.image_sizes: list[tuple[int, int]] = []

    def __call__(self, request: ChatRequest) -> dict[str, Any]:
        return getattr(self, request.role)(request)

    def policy(self, request: ChatRequest) -> dict[str, Any]:
        history = request.text.split("History:", 1)[-1]
        steps = [
            ("text='6'", {"type": "type", "text": "6", "target": "the 'First number' entry field"}),
            ("text='7'", {"type": "type", "text": "7", "target": "the 'Second number' entry field"}),
            ("Multiply", {"type": "click", "target": "the 'Multiply' checkbox"}),
            ("Compute", {"type": "click", "target": "the 'Compute' button"}),
        ]
        for marker, action in steps:
            if marker not in history:
                return {"thought": "Filling the form.", "notes": "", "action": action}
        shown = self.form.wait_for(is_event("computed"))["result"]  # what the result label shows
        return {"thought": "The result label shows the product.", "notes": "", "action": {"type": "answer", "text": shown}}

    def localizer(self, request: ChatRequest) -> dict[str, int]:
        target = re.search(r"Target: (.+)", request.text).group(1).strip()  # type: ignore[union-attr]
        box = self.form.widgets[TARGETS[target]]
        self.image_sizes.append(request.image_size(-1))
        width, height = self.form.screen
        # The widget's centre as a fraction of the screen, in thousandths.
        return {"x": round((box["x"] + box["width"] / 2) * 1000 / width),
                "y": round((box["y"] + box["height"] / 2) * 1000 / height)}

    def validator(self, request: ChatRequest) -> dict[str, str]:
        shown = self.form.wait_for(is_event("computed"))["result"]
        accepted = f'"{shown}"' in request.text
        return {"verdict": "accept" if accepted else "reject", "reasons": f"the result label shows {shown}"}


async def test_agent_fills_the_form_on_the_desktop(desktop: DesktopEnvironment, tk_form: TkForm, standin: Any, tmp_path: Path) -> None:
    responder = FormResponder(tk_form)
    server = standin(responder)
    agent = Agent(environment=desktop, base_url=server.base_url, model=server.model, profile="holotron", max_steps=10)
    try:
        result = await agent.run(TASK, out_dir=tmp_path / "run")
    finally:
        await agent.aclose()

    assert result.status == "success", result.reason
    assert result.answer == "42"
    # the policy is offered the desktop's actions only (a browser action offered would cost a step, refused)
    system = next(r for r in server.requests if r.role == "policy").body["messages"][0]["content"]
    assert '{"type": "click"' in system and '{"type": "answer"' in system, system
    assert '"goto"' not in system and '"switch_tab"' not in system and '"upload"' not in system, system
    computed = tk_form.wait_for(is_event("computed"))
    assert (computed["first"], computed["second"], computed["multiply"]) == ("6", "7", True)
    assert responder.image_sizes and set(responder.image_sizes) == {SCREEN}

    run_dir = tmp_path / "run"
    assert json.loads((run_dir / "result.json").read_text())["status"] == "success"
    steps = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    assert [s["action"]["type"] for s in steps] == ["type", "type", "click", "click", "answer"]
    assert len(list((run_dir / "screenshots").glob("step-*.jpg"))) == len(steps)
    assert json.loads((run_dir / "run.json").read_text())["config"]["environment"] == "desktop"
    # The agent did not close an environment it was given.
    assert (await desktop.observe()).screenshot.size == Size(*SCREEN)


# -- each action kind on the real app -------------------------------------------------


async def test_clicks_left_double_right_and_middle(desktop: DesktopEnvironment, tk_form: TkForm) -> None:
    # (with a spinner turning from the first click on: it holds neither that click's wait nor the next ones')
    desktop.settle_config = ScreenSettleConfig(ticking=0.3)
    outcome = await desktop.perform(Click(target="Busy", point=tk_form.centre("busy")))
    await tk_form.event(is_event("busy"))
    assert outcome.settle_reason == "stable" and outcome.settle_seconds < 1.5, outcome
    outcome = await desktop.perform(Click(target="Multiply", point=tk_form.centre("multiply")))
    assert (await tk_form.event(is_event("checkbox")))["multiply"] is True
    assert outcome.settle_reason == "stable" and outcome.settle_seconds < 0.8, outcome
    await desktop.perform(Click(target="result", point=tk_form.centre("result"), double=True))
    await tk_form.event(is_event("double-click", widget="result"))
    for button in ("right", "middle"):
        outcome = await desktop.perform(Click(target="pad", point=tk_form.centre("pad"), button=button))
        await tk_form.event(is_event("click", widget="pad", button=button))
        assert outcome.settle_reason == "unchanged" and outcome.settle_seconds < 0.8, outcome


async def test_hover_moves_the_pointer_onto_a_widget(desktop: DesktopEnvironment, tk_form: TkForm) -> None:
    outcome = await desktop.perform(Hover(target="hover area", point=tk_form.centre("hover")))
    await tk_form.event(is_event("hover", widget="hover"))
    assert outcome.detail.startswith("hover at")


async def test_drag_drops_the_token_on_the_target(desktop: DesktopEnvironment, tk_form: TkForm) -> None:
    await desktop.perform(Drag(
        target="orange square", point=tk_form.centre("canvas_token"),
        to_target="green box", to_point=tk_form.centre("canvas_target"),
    ))
    assert (await tk_form.event(is_event("drop")))["in_target"] is True


async def test_type_clears_appends_and_submits(xvfb: str, desktop: DesktopEnvironment, tk_form: TkForm) -> None:
    """Text is typed by the display's keymap: '<' is the <> key's first level (pyautogui's Shift made it '>'); é, €,
    日本 are on no key (spare keys are mapped for them: the Cyrillic needs more than they hold one each, and those of
    the text before give way; more of them than the spare keys hold are typed in parts); a control character is refused
    before anything is typed."""
    field = tk_form.centre("first")
    # A process that typed characters on no key and ended without closing its environment (killed, or its script
    # never closed it) left every spare keycode mapped: the next ones could type no character on no key.
    from Xlib import display as xdisplay

    from surfer.tools.x11_keys import X11Keyboard

    gone = xdisplay.Display(xvfb)
    X11Keyboard(gone).plan("".join(chr(0x4E00 + i) for i in range(38)))  # every spare keycode, never given back
    marker = gone.screen().root.create_window(0, 0, 1, 1, 0, 0)
    gone.close()
    conn = xdisplay.Display(xvfb)
    try:  # (the X server destroys the closed connection's windows when it reads its end)
        for _ in range(500):
            conn.create_resource_object("window", marker.id).get_geometry()
            await asyncio.sleep(0.01)
    except Exception:  # noqa: BLE001 - BadDrawable: gone
        pass
    finally:
        conn.close()
    fresh = DesktopEnvironment(display=xvfb)
    await fresh.start()
    try:
        await fresh.perform(TypeText(text="Ωμέγα", target="First number", point=field, submit=True))  # (room for 0)
    finally:
        await fresh.close()
    await tk_form.event(is_event("submit", field="first", value="Ωμέγα"))
    await desktop.perform(TypeText(text="12", target="First number", point=field, submit=True))
    await tk_form.event(is_event("submit", field="first", value="12"))
    await desktop.perform(TypeText(text="<3", target="First number", point=field, clear=False, submit=True))
    await tk_form.event(is_event("submit", field="first", value="12<3"))
    for key in ("<", "€", "A", "b"):  # a lone character pressed is the one typed ('>', an unknown key, and 'a')
        await desktop.perform(PressKeys(keys=key))
    await tk_form.event(is_event("text", field="first", value="12<3<€Ab"))
    text = "Hi 9! if a<b: café Grüße 5€ 日本"
    await desktop.perform(TypeText(text=text, target="First number", point=field, clear=True, submit=True))
    await tk_form.event(is_event("submit", field="first", value=text))
    # Without a target, typing goes to the focused field.
    text = "Съешь же ещё этих мягких французских булок, да выпей чаю. ÜÉ"
    await desktop.perform(TypeText(text=text, submit=True))
    await tk_form.event(is_event("submit", field="first", value=text))
    # More characters on no key than the spare keys hold (38 on Xvfb; it was refused): typed in parts.
    text = "".join(chr(0x4E00 + 7 * i) for i in range(50))
    outcome = await desktop.perform(TypeText(text=text, target="First number", point=field, submit=True))
    await tk_form.event(is_event("submit", field="first", value=text))
    assert outcome.detail.startswith("typed 50 characters in 3 parts into"), outcome.detail
    tk_form.forget_events()  # a Windows line end is one Enter (it was two: '\r' and '\n'); Escape marks the end
    await desktop.perform(TypeText(text="8\r\n", target="First number", point=field))
    await desktop.perform(PressKeys(keys="Escape"))
    await tk_form.event(is_event("key", keys="Escape"))
    assert [e["value"] for e in tk_form.events if e["event"] == "submit"] == ["8"]
    with pytest.raises(ActionFailed, match=r"cannot type the control character '\\x07'"):
        await desktop.perform(TypeText(text="ding\x07", target="First number", point=field))


async def test_press_key_combinations(desktop: DesktopEnvironment, tk_form: TkForm) -> None:
    await desktop.perform(Hover(target="form", point=tk_form.centre("pad")))  # keys go where the pointer is (no WM)
    # (and as models write them: modifiers joined by spaces or '-', as xdotool's 'ctrl s'; they were refused)
    for keys, pressed in (("Control+S", "Control+S"), ("Control+Shift+Z", "Control+Shift+Z"), ("Escape", "Escape"),
                          ("ctrl s", "Control+S"), ("control-shift-z", "Control+Shift+Z")):
        tk_form.forget_events()
        await desktop.perform(PressKeys(keys=keys))
        await tk_form.event(is_event("key", keys=pressed))
    # Every name of the keys vocabulary (keys.py) as models write it, and X keysyms (models trained on xdotool);
    # `command` is the platform's primary modifier (a Mac's shortcuts are Control's here), Super_L the Super key.
    names = "command+opt+ins+menu+ContextMenu+Page_Down+Prior+KP_Enter+Caps_Lock+comma+Super_L+Control_L+ArrowUp+F5+A"
    assert desktop._key_names(names) == ["ctrl", "alt", "insert", "apps", "apps", "pagedown", "pageup", "enter",
                                         "capslock", ",", "win", "ctrl", "up", "f5", "a"]
    with pytest.raises(ActionFailed, match="unknown key 'Hyper7' in 'Control\\+Hyper7'"):
        await desktop.perform(PressKeys(keys="Control+Hyper7"))


def test_split_keys_handles_the_plus_key() -> None:
    assert split_keys("Control+Shift+A") == ["Control", "Shift", "A"]
    assert split_keys("Control++") == ["Control", "+"]
    assert split_keys("+") == ["+"]
    from surfer.tools.keys import key_name

    assert [key_name(k) for k in ("Page_Down", "next", "KP_Enter", "super_r", "period", "esc", "x", "Hyper7")] == [
        "PageDown", "PageDown", "Enter", "Meta", ".", "Escape", "x", "Hyper7"]
    # Modifiers joined by spaces or '-' (xdotool's 'ctrl c'); a name of several words is one key; two combinations in
    # one press are no key (refused, never typed as text).
    assert [split_keys(k) for k in ("ctrl c", "Ctrl-C", "ctrl + c", "cmd shift t", "Alt-F4", "ctrl--")] == [
        ["ctrl", "c"], ["Ctrl", "C"], ["ctrl", "c"], ["cmd", "shift", "t"], ["Alt", "F4"], ["ctrl", "-"]]
    assert [key_name(k) for k in ("Page Down", "page-down", "num lock", "arrow_down")] == [
        "PageDown", "PageDown", "NumLock", "ArrowDown"]
    assert split_keys("ctrl+a ctrl+c") == ["ctrl", "a ctrl", "c"] and split_keys("hello world") == ["hello world"]


async def test_scroll_down_and_up_at_a_point(desktop: DesktopEnvironment, tk_form: TkForm) -> None:
    where = tk_form.centre("list")
    await desktop.perform(Scroll(direction="down", amount=3, target="list", point=where))
    await tk_form.event(lambda e: e["event"] == "scroll" and e["first"] >= 0.15)
    tk_form.forget_events()
    await desktop.perform(Scroll(direction="up", amount=3, target="list", point=where))
    await tk_form.event(lambda e: e["event"] == "scroll" and e["first"] == 0.0)


async def test_horizontal_scroll_sends_wheel_buttons_6_and_7_and_a_cancelled_type_stops_typing(
        bare_desktop: DesktopEnvironment, xvfb: str) -> None:
    """Tk 8.6 ignores buttons 6/7, so a bare X window records what arrives. It records keys too: a `type` cancelled
    half-way (a run stopped, timed out) stops typing before the cancel returns; its worker thread typed on."""
    from Xlib import X, XK, display as xdisplay

    conn = xdisplay.Display(xvfb)
    try:
        window = conn.screen().root.create_window(
            600, 100, 200, 200, 0, conn.screen().root_depth, override_redirect=True,
            event_mask=X.ButtonPressMask | X.ExposureMask | X.KeyPressMask)
        window.map()
        conn.sync()
        while (await asyncio.to_thread(conn.next_event)).type != X.Expose:
            pass
        await bare_desktop.perform(Scroll(direction="left", amount=2, target="box", point=CssPoint(x=700, y=200)))
        await bare_desktop.perform(Scroll(direction="right", amount=1, target="box", point=CssPoint(x=700, y=200)))
        buttons = []
        while len(buttons) < 3:
            event = await asyncio.to_thread(conn.next_event)
            if event.type == X.ButtonPress:
                buttons.append(event.detail)
        assert buttons == [6, 6, 7]

        async def keys(count: int) -> list[int]:  # the keysyms of the next `count` key presses
            pressed = []
            while len(pressed) < count:
                event = await asyncio.to_thread(conn.next_event)
                if event.type == X.KeyPress:
                    pressed.append(conn.keycode_to_keysym(event.detail, 0))
            return pressed

        window.set_input_focus(X.RevertToPointerRoot, X.CurrentTime)
        conn.sync()
        typing = asyncio.create_task(bare_desktop.perform(TypeText(text="x" * 3000, clear=False)))  # (into the focused window)
        assert set(await keys(20)) == {XK.XK_x}
        typing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await typing
        bare_desktop.settle_config = ScreenSettleConfig(timeout=0)
        await bare_desktop.perform(PressKeys(keys="Escape"))
        await bare_desktop.perform(PressKeys(keys="Tab"))
        pressed = await keys(1)
        while pressed[-1] != XK.XK_Tab:
            pressed += await keys(1)
        assert pressed[-2:] == [XK.XK_Escape, XK.XK_Tab]  # nothing typed between the two keys pressed after the cancel
        assert len(pressed) < 3000 - 20
    finally:
        conn.close()


# -- geometry -------------------------------------------------------------------------


async def test_hidpi_scale_and_origin_map_through_the_coordinates_module() -> None:
    """A 2x screenshot of a monitor whose top-left is (1280, 100) in input
    coordinates: the model's answer lands in input coordinates."""
    shot = Screenshot(b"", "image/png", Size(2048, 1600), scale=2.0, origin=(1280.0, 100.0))
    prepared = await prepare_image(shot, ImagePolicy(resize="none"))
    assert model_to_css(500, 500, "normalized_1000", prepared.geometry) == CssPoint(x=1280 + 512, y=100 + 400)
    assert model_to_css(0, 1000, "normalized_1000", prepared.geometry) == CssPoint(x=1280, y=100 + 800)
    assert model_to_css(1024, 800, "absolute", prepared.geometry) == CssPoint(x=1280 + 512, y=100 + 400)


async def test_region_screenshot_carries_its_origin(xvfb: str, tk_form: TkForm) -> None:
    box = tk_form.widgets["multiply"]
    env = DesktopEnvironment(display=xvfb, region=(100, 80, 400, 300), settle=ScreenSettleConfig(quiet=0.02, grace=0))
    await env.start()
    try:
        shot = (await env.observe()).screenshot
        assert (shot.size, shot.scale, shot.origin) == (Size(400, 300), 1.0, (100.0, 80.0))
        prepared = await prepare_image(shot, ImagePolicy(resize="none"))
        # A perfect model's answer for the checkbox, in pixels of the region image.
        point = model_to_css(box["x"] - 100 + box["width"] / 2, box["y"] - 80 + box["height"] / 2, "absolute", prepared.geometry)
        await env.perform(Click(target="Multiply", point=point))
        await tk_form.event(is_event("checkbox", multiply=True))
        # The image's right edge (x = its width, a normalised model's 1000) is the region's last pixel, not the next one.
        await env.perform(Hover(target="right edge", point=model_to_css(400, 150, "absolute", prepared.geometry)))
        assert held_down(xvfb)[2] == (499, 230)
    finally:
        await env.close()


# -- refusals and dry run ---------------------------------------------------------------


async def test_no_display_is_a_clear_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    with pytest.raises(ConfigError, match="DISPLAY is not set.*Xvfb :99"):
        await DesktopEnvironment().start()


async def test_unreachable_display_is_a_clear_config_error() -> None:
    unused = next(n for n in range(4000, 4100) if not Path(f"/tmp/.X11-unix/X{n}").exists())
    with pytest.raises(ConfigError, match=f"cannot reach the X server at DISPLAY=:{unused}.*xvfb-run"):
        await DesktopEnvironment(display=f":{unused}").start()


async def test_a_display_that_goes_away_is_an_environment_failure(xvfb: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from surfer.tools import desktop as desktop_module

    gui = _load_pyautogui(xvfb)  # (bound to the session's display: this one is watched, not typed on)
    monkeypatch.setattr(desktop_module, "_load_pyautogui", lambda display: gui)
    with private_xvfb(64, 48) as display:  # stopped on leaving: the display goes away under the environment
        env = DesktopEnvironment(display=display)
        await env.start()
        assert (await env.observe()).screenshot.size == Size(64, 48) and env.alive
    with pytest.raises(EnvironmentFailure, match=f"^the screenshot of the desktop failed: the X display {display} went away"):
        await env.observe()
    with pytest.raises(EnvironmentFailure, match=f"^watching the screen failed: the X display {display} went away"):
        await env.perform(Click(target="x", point=CssPoint(x=5, y=5)))
    assert not env.alive
    await env.close()  # (it raised the X connection's error)


SECOND_SCREEN = """
import asyncio, select, sys, surfer, surfer.tools
assert 'pyautogui' not in sys.modules and 'mss' not in sys.modules, 'eager import'
from surfer.tools import DesktopEnvironment
assert DesktopEnvironment.kind == 'desktop'
assert 'pyautogui' not in sys.modules and 'mss' not in sys.modules, 'eager import'
from Xlib import X, display as xdisplay
from surfer.core.actions import Click, CssPoint

async def main(name):
    conn = xdisplay.Display(name)  # a bare window on the second screen records the button that reaches it
    window = conn.screen().root.create_window(100, 100, 200, 200, 0, conn.screen().root_depth,
                                              event_mask=X.ButtonPressMask | X.ExposureMask, override_redirect=True)
    window.map()
    conn.sync()
    while conn.next_event().type != X.Expose:
        pass
    desktop = DesktopEnvironment(display=name, settle=None)
    desktop.settle_config.timeout = 0
    await desktop.start()
    shot = (await desktop.observe()).screenshot
    await desktop.perform(Click(target="box", point=CssPoint(x=200, y=200)))
    if conn.pending_events() or select.select([conn], [], [], 10)[0]:  # (a click sent elsewhere never comes)
        event = conn.next_event()
        print(shot.size, event.type == X.ButtonPress, event.event_x, event.event_y)
    else:
        print(shot.size, "no click reached the window")
    await desktop.close()

asyncio.run(main(sys.argv[1]))
"""


def test_a_display_of_two_screens_is_driven_on_the_screen_it_names() -> None:
    """':N.1' is the second X screen: input goes where the screenshot comes from (XTest moved the pointer on the
    first screen, where it was). pyautogui binds one display a process, so this one runs in its own, which
    first checks that `import surfer` (and naming DesktopEnvironment) loads no desktop extra."""
    from surfer.tools.desktop_display import check_display

    with private_xvfb(800, 600, "-screen", "1", "640x480x24", "-screen", "2", "64x48x16") as display:
        completed = subprocess.run([sys.executable, "-c", SECOND_SCREEN, f"{display}.1"], capture_output=True,
                                   text=True, cwd=ROOT, timeout=60)
        # A screen mss cannot grab (16 bits) on an X server that answers is no unreachable server (it was said to be).
        with pytest.raises(ConfigError, match=f"^cannot take screenshots of the X display {display}.2: .* not 16; "
                                              "start it with a 24-bit screen"):
            check_display(f"{display}.2")
    assert completed.stdout.split() == ["640x480", "True", "100", "100"], completed.stderr[-2000:]


async def test_pyautogui_stays_on_its_first_display(bare_desktop: DesktopEnvironment) -> None:
    with pytest.raises(ConfigError, match="already drives display"):
        _load_pyautogui(":4242")


async def test_bad_monitor_and_url_are_refused(xvfb: str) -> None:
    with pytest.raises(ConfigError, match="there is no monitor 5; monitors are 0: 1024x768"):
        await DesktopEnvironment(display=xvfb, monitor=5).start()
    with pytest.raises(ConfigError, match="does not open URLs"):
        await DesktopEnvironment(display=xvfb).start("https://example.com")
    with pytest.raises(ConfigError, match=r"region 400x400\+900\+700 reaches beyond the screen, 1024x768\+0\+0"):
        await DesktopEnvironment(display=xvfb, region=(900, 700, 400, 400)).start()  # (was an X protocol error)
    with pytest.raises(ConfigError, match="in whole pixels"):
        DesktopEnvironment(display=xvfb, region=(0, 0, 10.5, 10))  # type: ignore[arg-type]


def held_down(display: str) -> tuple[list[int], int, tuple[int, int]]:
    """What the X server holds pressed now (keycodes, the pointer's button and modifier mask) and where the pointer is."""
    from Xlib import display as xdisplay

    conn = xdisplay.Display(display)
    try:
        keys = [i * 8 + bit for i, byte in enumerate(conn.query_keymap()) for bit in range(8) if byte >> bit & 1]
        pointer = conn.screen().root.query_pointer()
        return keys, pointer.mask, (pointer.root_x, pointer.root_y)
    finally:
        conn.close()


def person_moves_the_mouse_to(display: str, x: int, y: int) -> None:
    from Xlib import display as xdisplay

    conn = xdisplay.Display(display)
    conn.screen().root.warp_pointer(x, y)
    conn.sync()
    conn.close()


async def test_failsafe_stops_the_run_unless_turned_off(
    xvfb: str, desktop: DesktopEnvironment, tk_form: TkForm, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The agent's own points never pull the brake: a Shift+click at the top-left corner, a drag to the bottom-right
    # one (a model's 1000, 1000) land one pixel in, and nothing stays held.
    desktop.settle_config, desktop.drag_seconds = ScreenSettleConfig(quiet=0.02, grace=0), 0.02  # (what lands is read)
    outcome = await desktop.perform(Click(target="top-left corner", point=CssPoint(x=0, y=0), modifiers=["Shift"]))
    assert held_down(xvfb) == ([], 0, (1, 1)) and outcome.detail == "Shift+left click at (1, 1)"  # (where it clicked)
    await desktop.perform(Drag(target="pad", point=tk_form.centre("pad"), to_target="corner", to_point=CssPoint(x=SCREEN[0], y=SCREEN[1])))
    assert held_down(xvfb) == ([], 0, (SCREEN[0] - 2, SCREEN[1] - 2))
    # A person who moves the mouse into a corner in the middle of a Shift+click stops it, and Shift is let go.
    click = desktop._gui.click
    monkeypatch.setattr(desktop._gui, "click", lambda *a, **k: (person_moves_the_mouse_to(xvfb, 0, 0), click(*a, **k)))
    with pytest.raises(EnvironmentFailure, match=r"fail-safe: the mouse pointer is in a corner of the screen at \(0, 0\), "
                       r".* before running again; .*`failsafe = false` in the \[desktop\] section"):  # (the CLI's way too)
        await desktop.perform(Click(target="Multiply", point=tk_form.centre("multiply"), modifiers=["Shift"]))
    monkeypatch.undo()
    assert held_down(xvfb) == ([], 0, (0, 0))
    with pytest.raises(EnvironmentFailure, match="fail-safe: the mouse pointer is in a corner"):
        await desktop.perform(Click(target="Multiply", point=tk_form.centre("multiply")))
    assert tk_form.find(is_event("checkbox")) is None
    # The brake stays pulled for the runs after it: one does not start (a QA suite stops there; each case started,
    # asked the model and stopped at its first action).
    with pytest.raises(ConfigError, match=r"fail-safe: the mouse pointer is in a corner of the screen at \(0, 0\), .* "
                                          "so the run cannot start"):
        await DesktopEnvironment(display=xvfb).start()
    unsafe = DesktopEnvironment(display=xvfb, failsafe=False)
    await unsafe.start()
    try:
        await unsafe.perform(Click(target="Multiply", point=tk_form.centre("multiply")))
        await tk_form.event(is_event("checkbox", multiply=True))
    finally:
        await unsafe.close()


@pytest.mark.parametrize("action", [Goto(url="https://example.com"), Back(), SwitchTab(index=1)])
async def test_browser_actions_are_not_supported(bare_desktop: DesktopEnvironment, action: Any) -> None:
    with pytest.raises(ActionNotSupported, match=f"'{action.type}' is a browser action: the desktop has no pages"):
        await bare_desktop.perform(action)


async def test_dry_run_logs_and_does_nothing(xvfb: str, tk_form: TkForm, desktop: DesktopEnvironment, caplog: pytest.LogCaptureFixture) -> None:
    dry = DesktopEnvironment(display=xvfb, dry_run=True)
    await dry.start()
    try:
        with caplog.at_level(logging.INFO, logger="surfer.desktop"):
            click = await dry.perform(Click(target="Multiply", point=tk_form.centre("multiply")))
            typed = await dry.perform(TypeText(text="9s3cret", target="First number", point=tk_form.centre("first"), submit=True))
            scrolled = await dry.perform(Scroll(direction="left", amount=2))
    finally:
        await dry.close()
    assert click.detail.startswith("dry run, not performed: left click at")
    assert "write('9s3cret')" in typed.detail and "press('enter')" in typed.detail
    assert "hscroll(-2, None, None)" in scrolled.detail
    assert click.settle_reason == "dry-run"
    logged = [r.getMessage() for r in caplog.records if "dry run" in r.getMessage()]
    assert len(logged) == 3
    # The log leaves typed text out (it may be a secret's value; the agent masks the outcome's, not a log's).
    assert "write(<7 characters>)" in logged[1] and not any("s3cret" in line for line in logged)
    # A real click afterwards arrives; nothing the dry run "did" arrived before it.
    await desktop.perform(Click(target="pad", point=tk_form.centre("pad")))
    await tk_form.event(is_event("click", widget="pad"))
    assert tk_form.find(lambda e: e["event"] in ("checkbox", "submit", "text")) is None


# -- settle by screen stability (fake probes) -------------------------------------------


def probe_of(frames: list[str]) -> Callable[[], Any]:
    async def probe() -> str:
        return frames.pop(0) if len(frames) > 1 else frames[0]
    return probe


async def test_settle_screen_reasons() -> None:
    fast = ScreenSettleConfig(timeout=2.0, quiet=0.02, interval=0.005, grace=0.05)
    assert await settle_screen(probe_of(["a", "b", "c", "c"]), "a", fast) == "stable"
    assert await settle_screen(probe_of(["a"]), "a", fast) == "unchanged"
    assert await settle_screen(probe_of(["a", "a", "a", "b"]), "a", fast) == "stable"  # a late change is waited for
    counter = iter(range(10**9))

    async def always_changing() -> int:
        return next(counter)
    assert await settle_screen(always_changing, None, ScreenSettleConfig(timeout=0.1, quiet=0.05, interval=0.01)) == "timeout"

    async def spinner() -> tuple[int, int]:  # frames as tiles: tile 0 turns forever, tile 1 stays
        return (next(counter), 7)
    assert await settle_screen(spinner, (0, 7), fast, ambient=frozenset({0})) == "unchanged"  # turning before the action
    seen: dict[str, Any] = {}
    ticking = ScreenSettleConfig(timeout=2.0, quiet=0.02, interval=0.005, grace=0.05, ticking=0.1)
    assert await settle_screen(spinner, (0, 7), ticking, seen=seen) == "unchanged" and seen["ticking"] == {0}  # (only it changed)
    assert tiles_changed((1, 2, 3), (1, 5, 3)) == {1} and tile_digests(bytes(8 * 4 * 4), 8, 4, tile=4) == tile_digests(bytes(128), 8, 4, tile=4)


# -- CLI and SDK surface ------------------------------------------------------------------


def test_cli_rejects_url_and_desktop_flags_in_the_wrong_place(xvfb: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from surfer.apps.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["run", "--env", "desktop", "--url", "https://example.com", "task"])
    assert result.exit_code == 2 and "--url is for the browser" in result.output
    result = runner.invoke(app, ["run", "--display", ":5", "task"])
    assert result.exit_code == 2 and "apply to --env desktop only" in result.output
    # No X server at the display, or no such monitor: refused before the run, one line, no run directory written.
    server = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--profile", "holotron", "--out", str(tmp_path / "run")]
    for flags, said in ((["--display", ":7391"], "cannot reach the X server at DISPLAY=:7391"),
                        (["--display", xvfb, "--monitor", "5"], "there is no monitor 5; monitors are 0: 1024x768+0+0")):
        result = runner.invoke(app, ["run", "--env", "desktop", *flags, *server, "task"])
        assert result.exit_code == 2 and said in result.output, result.output
        assert result.output.startswith("error:") and not (tmp_path / "run").exists()


def test_cli_runs_a_desktop_task(xvfb: str, tk_form: TkForm, standin: Any, tmp_path: Path) -> None:
    server = standin(FormResponder(tk_form))
    config = tmp_path / "surfer.toml"  # the desktop's settle wait and fail-safe are configured in its own section
    config.write_text("[desktop]\nsettle_timeout = 0.0\nfailsafe = false\n")
    person_moves_the_mouse_to(xvfb, 0, 0)  # (the fail-safe off: the run goes on; a CLI user could not turn it off)
    completed = subprocess.run(
        [sys.executable, "-c", "from surfer.apps.cli import main; main()", "run", "--env", "desktop", "--display", xvfb,
         "--base-url", server.base_url, "--model", server.model, "--profile", "holotron", "--config", str(config),
         "--out", str(tmp_path / "cli-run"), "--json", TASK],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    result = json.loads(completed.stdout)
    assert result["answer"] == "42"
    assert tk_form.wait_for(is_event("computed"))["multiply"] is True
    steps = [json.loads(line) for line in (Path(result["run_dir"]) / "trajectory.jsonl").read_text().splitlines()]
    assert {s["outcome"]["settle_reason"] for s in steps if s.get("outcome")} == {"timeout"}  # (no time to settle)


# -- dialog windows ------------------------------------------------------------------


def _changed_pixels(before: bytes, after: bytes) -> int:
    from PIL import Image, ImageChops

    with Image.open(io.BytesIO(before)) as a, Image.open(io.BytesIO(after)) as b:
        return sum(ImageChops.difference(a.convert("L"), b.convert("L")).histogram()[25:])


# Serial: the settle wait's screenshot is checked for a window the app draws a moment after the click; beside
# other tests on two cores Tk's file chooser took longer than the settle's quiet window to appear.
@pytest.mark.serial
async def test_dialog_windows_are_seen_and_answered(desktop: DesktopEnvironment, tk_form: TkForm, tmp_path: Path) -> None:
    before = (await desktop.observe()).screenshot.data
    outcome = await desktop.perform(Click(target="Ask", point=tk_form.centre("ask")))
    shown = await tk_form.event(is_event("dialog"))
    assert outcome.settle_reason != "timeout"  # settle waited for the window to be drawn, then saw it stay
    assert _changed_pixels(before, (await desktop.observe()).screenshot.data) > 2000  # the question is on screen
    yes = shown["buttons"]["yes"]
    await desktop.perform(Click(target="Yes", point=CssPoint(x=yes["rootx"] + yes["width"] / 2, y=yes["rooty"] + yes["height"] / 2)))
    assert (await tk_form.event(is_event("answer")))["yes"] is True

    chosen = tmp_path / "notes.txt"
    chosen.write_text("x")
    before = (await desktop.observe()).screenshot.data
    await desktop.perform(Click(target="Open file…", point=tk_form.centre("open_file")))
    assert _changed_pixels(before, (await desktop.observe()).screenshot.data) > 2000  # the chooser window
    await desktop.perform(TypeText(text=str(chosen), submit=True))  # its file name field has the focus
    assert (await tk_form.event(is_event("chosen")))["path"] == str(chosen)
