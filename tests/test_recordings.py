"""Traces and videos of runs (issue 25): a traced run on the demo site through
the stand-in server, its trace.zip opened and its JSON lines read (step
groups, screenshots, the page's requests); retain-on-failure keeping only a
failed run's; the video decoded (one frame per step, the viewport's size);
QA's JUnit attachments; bad modes refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import imageio_ffmpeg
import pytest
from junitparser import JUnitXml
from PIL import Image

from surfer import Agent, ScriptedModel
from surfer.agent.config import AgentConfig, BrowserSettings
from surfer.agent.video import make_video
from surfer.apps.demo.oracle import DEMO_TASK, DemoOracle, frame_mapper, measure_targets
from surfer.apps.demo.qa_oracle import measure_qa_targets, qa_oracle
from surfer.apps.view.state import OutDir
from surfer.models.profiles import get_profile
from surfer.tools.browser import BrowserEnvironment

VIEWPORT = (1024, 700)


def trace_events(path: Path) -> tuple[list[dict], list[dict], list[str]]:
    """(actions and groups, network entries, screencast file names) of a Playwright trace zip."""
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        events = [json.loads(line) for name in names if name.endswith(".trace")
                  for line in archive.read(name).decode().splitlines() if line.strip()]
        network = [json.loads(line) for name in names if name.endswith(".network")
                   for line in archive.read(name).decode().splitlines() if line.strip()]
    return events, network, [n for n in names if n.startswith("resources/") or "screencast" in n]


def groups(events: list[dict]) -> list[str]:
    return [e["title"] for e in events if e.get("type") == "before" and e.get("method") == "tracingGroup"]


@pytest.fixture(scope="module")
async def centres(demo_site):  # type: ignore[no-untyped-def]
    return await measure_targets(demo_site.base_url, VIEWPORT)


async def test_a_traced_run_holds_its_steps_screens_and_requests_and_a_video_of_its_steps(demo_site, standin, centres, tmp_path):
    server = standin(DemoOracle(centres, frame_mapper("normalized_1000", VIEWPORT, 1.0)))
    config = AgentConfig(base_url=server.base_url, model=server.model, profile="holotron", max_steps=10,
                         browser=BrowserSettings(viewport=VIEWPORT, trace="on"), video="on")
    agent = Agent(config)  # the agent's own browser, traced as configured
    try:
        result = await agent.run(DEMO_TASK, demo_site.url("index.html"), out_dir=tmp_path / "run")
    finally:
        await agent.aclose()
    assert result.status == "success" and result.steps >= 4
    run = tmp_path / "run"
    events, network, shots = trace_events(run / "trace.zip")
    steps = [json.loads(line) for line in (run / "trajectory.jsonl").read_text().splitlines()]
    # one group per step, named by its action, in order
    assert groups(events) == [f"step {s['index']}: " + label for s, label in zip(steps, [
        "click \"the 'Register as a member' link\"", "type 'Ada Lovelace' into \"the 'Full name' text field\"",
        "type 'ada@example.com' into \"the 'Email address' text field\"", "click \"the green 'Create account' button\"",
        f"answer {result.answer!r}"])]
    # each acting step's click inside its group; screenshots and DOM snapshots; the start page's request and the form's
    calls = [e for e in events if e.get("type") == "before"]
    for group in [e for e in calls if e.get("method") == "tracingGroup"][:4]:
        assert "mouseClick" in [e["method"] for e in calls if e.get("parentId") == group["callId"]], group["title"]
    assert shots and any(e.get("type") == "frame-snapshot" for e in events)
    urls = [n["snapshot"]["request"]["url"] for n in network if n.get("type") == "resource-snapshot"]
    assert demo_site.url("index.html") in urls and any("register.html" in u for u in urls)
    # the video: one frame per step, at the viewport's size
    frames, _ = imageio_ffmpeg.count_frames_and_secs(str(run / "video.mp4"))
    assert frames == result.steps
    reader = imageio_ffmpeg.read_frames(str(run / "video.mp4"))
    meta = next(reader)
    first = next(reader)
    assert tuple(meta["size"]) == VIEWPORT and len(first) == VIEWPORT[0] * VIEWPORT[1] * 3
    reader.close()
    report = (run / "report.html").read_text()
    assert 'href="trace.zip"' in report and 'src="video.mp4"' in report and "show-trace" in report


def test_the_video_falls_back_to_animated_webp(tmp_path):
    run = tmp_path / "run"
    (run / "screenshots").mkdir(parents=True)
    lines = []
    for index, colour in enumerate(("red", "green", "blue"), 1):
        Image.new("RGB", (321, 200), colour).save(run / "screenshots" / f"step-{index:03d}.png")
        lines.append(json.dumps({"index": index, "screenshot": f"screenshots/step-{index:03d}.png",
                                 "action": {"type": "click", "target": "the button"}, "points": [{"x": 100, "y": 50}],
                                 "screen": {"width": 321, "height": 200, "scale": 1, "origin": [0, 0]}}))
    (run / "trajectory.jsonl").write_text("\n".join(lines) + "\n")
    video = make_video([run], run, encoder="webp")
    assert video == run / "video.webp"
    with Image.open(video) as image:
        assert image.n_frames == 3 and image.size == (322, 200)  # evened for H.264 alike
        image.seek(0)
        assert image.convert("RGB").getpixel((10, 10))[0] > 200  # the red step first, its caption at the bottom
        assert image.convert("RGB").getpixel((100, 50)) != image.convert("RGB").getpixel((10, 10))  # the click marked


def answer(text: str) -> dict:
    return {"thought": "done", "notes": "", "action": {"type": "answer", "text": text}}


async def test_retain_on_failure_keeps_the_trace_and_video_of_a_failed_run_only(shared_browser, demo_site, tmp_path):
    kept = {}
    for name, policy in (("passed", answer("done")), ("failed", {"thought": "no", "action": {"type": "fail", "reason": "cannot"}})):
        env = BrowserEnvironment(browser=shared_browser, viewport=VIEWPORT, trace="retain-on-failure")
        agent = Agent(backend=ScriptedModel(policy=[policy]), environment=env, profile="holo2", validate_answers=False,
                      video="retain-on-failure")
        try:
            result = await agent.run("look at the page", demo_site.url("index.html"), out_dir=tmp_path / name)
        finally:
            await env.close()
        assert result.status == ("success" if name == "passed" else "failed")
        kept[name] = sorted(p.name for p in (tmp_path / name).iterdir() if p.name in ("trace.zip", "video.mp4", "video.webp"))
    assert kept == {"passed": [], "failed": ["trace.zip", "video.mp4"]}
    # surfer view over these run directories links the failed run's recordings
    rows = {row["id"]: row for row in OutDir(tmp_path).snapshot()["finished"]}
    assert (rows["failed"]["trace"], rows["failed"]["video"]) == ("failed/trace.zip", "failed/video.mp4")
    assert "trace" not in rows["passed"] and "video" not in rows["passed"]
    events, network, _ = trace_events(tmp_path / "failed" / "trace.zip")
    assert groups(events) == ["step 1: fail 'cannot'"]
    assert demo_site.url("index.html") in [n["snapshot"]["request"]["url"] for n in network if "snapshot" in n]


def surfer(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    for key in ("SURFER_BASE_URL", "SURFER_MODEL", "SURFER_API_KEY", "SURFER_PROFILE"):
        env.pop(key, None)
    return subprocess.run([sys.executable, "-m", "surfer", *args], capture_output=True, text=True, timeout=180, env=env, cwd=cwd)


def test_a_mode_that_is_not_one_is_refused_clearly(tmp_path):
    for command in (["run", "a task", "--trace", "sometimes"], ["qa", "missing.yaml", "--video", "always"],
                    ["batch", "tasks.jsonl", "--out", str(tmp_path), "--trace", "yes"]):
        proc = surfer(*command)
        assert proc.returncode == 2, proc.stderr
        flag, value = command[-2:]
        assert f"{flag} must be one of on, retain-on-failure, off; got {value!r}" in proc.stdout + proc.stderr
    config = tmp_path / "c.toml"
    config.write_text('[browser]\ntrace = "sometimes"\n')
    proc = surfer("run", "a task", "--config", str(config))
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "browser.trace" in output and "retain-on-failure" in output


def test_failed_qa_cases_attach_their_trace_video_and_report_to_junit(standin, demo_site, tmp_path):
    import asyncio

    centres = asyncio.run(measure_qa_targets(demo_site.base_url))
    server = standin(qa_oracle(centres, get_profile("holotron").frame))
    sign_in = "  - name: {name}\n    url: login.html\n    steps:\n      - Sign in as alice with the password secret\n    expect: {expect}\n"
    suite = tmp_path / "checks.yaml"
    suite.write_text(f"name: checks\nbase_url: {demo_site.base_url}\nconcurrency: 2\ncases:\n"
                     + sign_in.format(name="signs in", expect='[{text: "794.36"}]')
                     + sign_in.format(name="wrong page", expect='[{url: "/login\\\\.html$"}]'))
    out, junit = tmp_path / "out", tmp_path / "ci" / "junit.xml"
    proc = surfer("qa", str(suite), "--out", str(out), "--junit", str(junit), "--html", str(tmp_path / "ci" / "qa.html"),
                  "--no-cache", "--retries", "0", "--trace", "retain-on-failure", "--video", "retain-on-failure", "--quiet",
                  "--base-url", server.base_url, "--model", server.model, "--profile", "holotron")
    assert proc.returncode == 1, proc.stderr
    cases = {case.name: case for suite_ in JUnitXml.fromfile(str(junit)) for case in suite_}
    attached = {name: [line[len("[[ATTACHMENT|"):-2] for line in case.system_out.splitlines() if line.startswith("[[ATTACHMENT|")]
                for name, case in cases.items()}
    case_dir = "../out/cases/checks/wrong-page"
    assert attached["wrong page"] == [f"{case_dir}/attempt-1/trace.zip", f"{case_dir}/attempt-1/video.mp4", f"{case_dir}/report.html"]
    assert attached["signs in"] == ["../out/cases/checks/signs-in/report.html"]  # passed: nothing retained
    assert all((junit.parent / path).is_file() for paths in attached.values() for path in paths)
    events, _, _ = trace_events(junit.parent / attached["wrong page"][0])
    assert groups(events)[0].startswith("step 1: type 'alice'")  # the agent's steps in the case's one trace
    assert f'<video class="video" controls muted preload="metadata" src="{case_dir}/attempt-1/video.mp4"' in (
        tmp_path / "ci" / "qa.html").read_text()
