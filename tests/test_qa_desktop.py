"""`surfer qa` on the desktop: a real Tk app on Xvfb, the stand-in model over
real HTTP; the second run replays from the cache (image-crop anchors) with
no model call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest
from conftest import private_xvfb
from inprocess import surfer

from test_desktop import TASK, FormResponder, TkForm, is_event


@pytest.fixture
def form_factory(xvfb: str) -> Iterator:  # type: ignore[type-arg]
    forms: list[TkForm] = []

    def make() -> TkForm:
        for form in forms:
            form.close()
        forms.append(TkForm(xvfb))
        return forms[-1]

    yield make
    forms[-1].close()


def test_a_desktop_suite_runs_then_replays_from_the_cache(xvfb, form_factory, standin, tmp_path: Path):
    form = form_factory()
    server = standin(FormResponder(form))
    suite = tmp_path / "desktop.yaml"
    suite.write_text(f"name: desktop\nenvironment: desktop\ncases:\n  - name: multiply\n    steps: [\"{TASK}\"]\n")
    args = ["qa", str(suite), "--cache", str(tmp_path / "cache"), "--quiet",
            "--base-url", server.base_url, "--model", server.model, "--profile", "holotron"]

    # No display, or one that does not answer: refused once before anything runs (each case was an 'internal error').
    unused = next(n for n in range(4000, 4100) if not Path(f"/tmp/.X11-unix/X{n}").exists())
    for display, said in ((None, "no display: DISPLAY is not set"), (f":{unused}", f"cannot reach the X server at DISPLAY=:{unused}")):
        refused = surfer(*args, "--out", str(tmp_path / "o0"), env={"DISPLAY": display})
        assert refused.returncode == 2 and said in refused.stderr and not (tmp_path / "o0").exists(), refused.stderr

    first = surfer(*args, "--out", str(tmp_path / "o1"), env={"DISPLAY": xvfb})  # (in this process: tests/inprocess.py)
    assert first.returncode == 0, first.stderr
    entry = json.loads((tmp_path / "cache" / "desktop" / "multiply.json").read_text())
    actions = entry["steps"][0]["actions"]
    assert [a["action"]["type"] for a in actions] == ["type", "type", "click", "click"]
    assert all(a["element"] is None and a["crop"] for a in actions)  # the desktop anchors on the image alone

    form = form_factory()  # a fresh app: empty fields, the same layout
    server.respond = FormResponder(form)
    before = len(server.requests)
    second = surfer(*args, "--out", str(tmp_path / "o2"), env={"DISPLAY": xvfb})
    assert second.returncode == 0, second.stderr
    assert len(server.requests) == before  # no model call
    computed = form.wait_for(is_event("computed"))
    assert (computed["first"], computed["second"], computed["multiply"], computed["result"]) == ("6", "7", True, "42")
    record = json.loads((tmp_path / "o2" / "results.jsonl").read_text())
    assert record["cached_steps"] == 1 and record["model_calls"] == 0

    # A case whose desktop cannot start (here: another display than the one this process's pyautogui drives) stops
    # the run, exit 2, as a model server that is gone does; it was an 'internal error' per case.
    with private_xvfb(64, 48) as display:
        stopped = surfer(*args, "--out", str(tmp_path / "o3"), env={"DISPLAY": display})
    assert stopped.returncode == 2 and "stopped: pyautogui in this process already drives display" in stopped.stderr
    assert json.loads((tmp_path / "o3" / "attempts.jsonl").read_text())["status"] == "unfinished"
