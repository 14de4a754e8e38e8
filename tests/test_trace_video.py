"""Reading a run the way people already do: Playwright's trace (trace.zip with
one group per step, screenshots, DOM snapshots and the page's requests), a
video made from the step screenshots, and failures attached to JUnit."""

from __future__ import annotations

import hashlib
import json
import zipfile

import pytest

from surfer.agent.config import load_config
from surfer.agent.loop import Agent
from surfer.bench.responder import StepResponder, measure_centres


def _trace_events(path):  # type: ignore[no-untyped-def]
    """Every JSON line of the trace's *.trace and *.network files, by file kind."""
    events: dict[str, list[dict]] = {"trace": [], "network": []}
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            kind = name.rsplit(".", 1)[-1]
            if kind in events:
                events[kind] += [json.loads(line) for line in archive.read(name).decode().splitlines() if line.strip()]
        return events, archive.namelist()


@pytest.fixture
async def form_model(demo_site, standin, shared_browser):  # type: ignore[no-untyped-def]
    return standin(StepResponder(await measure_centres(demo_site.base_url, browser=shared_browser), "normalized_1000"))


def _config(server, **extra):  # type: ignore[no-untyped-def]
    return load_config(overrides={"base_url": server.base_url, "model": server.model, "max_steps": 3,
                                  "validate_answers": False, "max_repeats": 10, **extra})


async def test_a_traced_run_holds_its_steps_screenshots_and_requests(demo_site, form_model, tmp_path):
    config = _config(form_model, browser={"trace": "on", "viewport": (1280, 800)})
    result = await Agent(config).run("Fill in the form.", demo_site.url("register.html"), out_dir=tmp_path / "run")
    assert result.status == "success" and result.artifacts["trace"] == "trace.zip"
    events, names = _trace_events(tmp_path / "run" / "trace.zip")
    groups = [e.get("title") or e.get("apiName") for e in events["trace"] if e.get("type") == "before"
              and (e.get("method") == "tracingGroup" or e.get("apiName", "").startswith("step "))]
    titles = " | ".join(str(g) for g in groups)
    for step, action in ((1, "type"), (2, "type"), (3, "click")):
        assert f"step {step}: {action}" in titles, titles
    assert any(e.get("type") == "screencast-frame" for e in events["trace"])  # screenshots
    assert any(e.get("type") == "frame-snapshot" for e in events["trace"])  # DOM snapshots
    urls = [e.get("snapshot", {}).get("request", {}).get("url", "") for e in events["network"]]
    assert any(u.endswith("/register.html") for u in urls), urls[:5]
    assert any(n.startswith("resources/") for n in names)
    assert "trace.zip" in (tmp_path / "run" / "report.html").read_text()


class GivesUp(StepResponder):
    """Fills in the first field, then gives up: a run that ends `failed` after one step."""

    def __call__(self, request):  # type: ignore[no-untyped-def]
        if request.role == "policy" and "Step 1:" in request.text:
            return {"thought": "No.", "notes": "", "action": {"type": "fail", "reason": "the form cannot be sent"}}
        return super().__call__(request)


async def test_retain_on_failure_keeps_the_trace_of_a_failed_run_only(demo_site, form_model, standin, shared_browser, tmp_path):
    config = _config(form_model, browser={"trace": "retain-on-failure"})
    passed = await Agent(config).run("Fill in the form.", demo_site.url("register.html"), out_dir=tmp_path / "ok")
    assert passed.status == "success" and not (tmp_path / "ok" / "trace.zip").exists() and "trace" not in passed.artifacts
    quitter = standin(GivesUp(await measure_centres(demo_site.base_url, browser=shared_browser), "normalized_1000"))
    failed = await Agent(_config(quitter, browser={"trace": "retain-on-failure"})).run(
        "Fill in the form.", demo_site.url("register.html"), out_dir=tmp_path / "bad")
    assert failed.status == "failed"
    assert (tmp_path / "bad" / "trace.zip").exists() and failed.artifacts["trace"] == "trace.zip"


def test_a_trace_mode_that_does_not_exist_is_a_usage_error():
    from typer.testing import CliRunner

    from surfer.apps.cli import app

    result = CliRunner().invoke(app, ["run", "x", "--trace", "sometimes", "--base-url", "http://127.0.0.1:9/v1"])
    assert result.exit_code == 2 and "--trace must be one of off, on, retain-on-failure" in " ".join(result.output.split())


async def test_a_video_has_a_frame_per_step_at_the_viewport_size(demo_site, form_model, tmp_path):
    import imageio_ffmpeg

    config = _config(form_model, video="on", browser={"viewport": (1024, 640)})
    result = await Agent(config).run("Fill in the form.", demo_site.url("register.html"), out_dir=tmp_path / "run")
    assert result.artifacts["video"] == "video.mp4"
    video = tmp_path / "run" / "video.mp4"
    reader = imageio_ffmpeg.read_frames(str(video))
    meta = next(reader)
    frames = list(reader)
    steps = [line for line in (tmp_path / "run" / "trajectory.jsonl").read_text().splitlines() if line.strip()]
    assert len(frames) == len(steps) == result.steps
    width, height = meta["size"]
    assert width == 1024 and height >= 640  # the screenshot, with its caption band underneath
    assert len(frames[0]) == width * height * 3  # the first frame decodes, RGB
    report = (tmp_path / "run" / "report.html").read_text()
    assert '<video controls muted src="video.mp4">' in report
    assert json.loads((tmp_path / "run" / "result.json").read_text())["artifacts"]["video"] == "video.mp4"


def test_without_an_encoder_the_video_is_an_animated_webp(tmp_path, monkeypatch):
    from PIL import Image

    from surfer.agent import video

    (tmp_path / "screenshots").mkdir()
    lines = []
    for i in (1, 2):
        Image.new("RGB", (320, 200), (i * 60, 90, 120)).save(tmp_path / f"screenshots/step-00{i}.png")
        lines.append(json.dumps({"index": i, "screenshot": f"screenshots/step-00{i}.png",
                                 "screen": {"width": 320, "height": 200, "scale": 1.0, "origin": [0, 0]},
                                 "action": {"type": "click", "target": "the OK button"}, "points": [{"x": 100, "y": 50}]}))
    (tmp_path / "trajectory.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(video, "_ffmpeg", lambda: None)
    made = video.make_video(tmp_path)
    assert made == tmp_path / "video.webp"
    with Image.open(made) as animation:
        assert animation.n_frames == 2 and animation.size == (320, 200 + video.CAPTION_HEIGHT)
        first = animation.convert("RGB")
        assert first.getpixel((100, 50 - 7)) != (60, 90, 120)  # the click point is marked

    def caption_band(error: str) -> bytes:
        image = video.frame(tmp_path, {"index": 1, "screenshot": "screenshots/step-001.png", "error": error})
        return hashlib.sha1(image.crop((0, 200, image.width, image.height)).tobytes()).digest()

    # letters beyond ASCII are drawn as letters, not as the box of a letter no font has
    assert caption_band("Crème brûlée") != caption_band("Cr\U0010fffdme br\U0010fffdl\U0010fffde")


def test_the_ci_examples_run_the_documented_qa_command():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[1]
    guide = root / "docs" / "guides" / "qa.md"
    documented = "surfer qa examples/qa/library.yaml --var demo_url=http://127.0.0.1:8080/ --out qa-out --junit qa-out/junit.xml " \
                 "--html qa-out/index.html --trace retain-on-failure --video retain-on-failure --quiet"
    assert documented in " ".join(guide.read_text().split())
    # the command loads its suite (without the --var it was refused, exit 2: {{demo_url}} is not defined), and the job
    # serves the app at that address before it
    from surfer.qa.suite import load_suite, parse_vars

    flags = documented.split()
    variables = parse_vars([flags[i + 1] for i, flag in enumerate(flags) if flag == "--var"])
    assert load_suite(root / "examples/qa/library.yaml", variables, {"LIBRARY_PASSWORD": "x"}).base_url == "http://127.0.0.1:8080/"
    serve = "python -m http.server 8080 -d surfer/apps/demo/demo_site > /dev/null 2>&1 &"
    github = yaml.safe_load((root / "examples/ci/github-actions.yml").read_text())
    steps = github["jobs"]["qa"]["steps"]
    commands = [" ".join(str(s.get("run", "")).split()) for s in steps]
    assert documented in commands and commands.index(serve) < commands.index(documented)
    assert any(s.get("uses", "").startswith("actions/upload-artifact") and s["with"]["path"] == "qa-out/" for s in steps)
    gitlab = yaml.safe_load((root / "examples/ci/gitlab-ci.yml").read_text())["surfer-qa"]
    assert [" ".join(c.split()) for c in gitlab["script"]] == [serve, documented]
    assert gitlab["artifacts"]["reports"]["junit"] == "qa-out/junit.xml" and gitlab["artifacts"]["when"] == "always"


def _synthetic_run(run_dir, steps: int, size=(320, 200)):  # type: ignore[no-untyped-def]
    """A run directory with `steps` screenshots and their trajectory lines."""
    from PIL import Image

    (run_dir / "screenshots").mkdir(parents=True)
    lines = []
    for i in range(1, steps + 1):
        Image.new("RGB", size, (i * 30 % 255, 90, 120)).save(run_dir / f"screenshots/step-{i:03}.png")
        lines.append(json.dumps({"index": i, "screenshot": f"screenshots/step-{i:03}.png",
                                 "screen": {"width": size[0], "height": size[1], "scale": 1.0, "origin": [0, 0]},
                                 "action": {"type": "click", "target": f"button {i}"}, "points": [{"x": 10, "y": 10}]}))
    (run_dir / "trajectory.jsonl").write_text("\n".join(lines) + "\n")


def test_frames_are_piped_one_at_a_time_never_all_in_memory(tmp_path, monkeypatch):
    import gc
    import weakref

    import imageio_ffmpeg

    from surfer.agent import video

    _synthetic_run(tmp_path, 8)
    made_frames, freed = [0], [0]
    original = video.frame

    def counted(run_dir, step):  # type: ignore[no-untyped-def]
        image = original(run_dir, step)
        made_frames[0] += 1
        weakref.finalize(image, lambda: freed.__setitem__(0, freed[0] + 1))
        peak[0] = max(peak[0], made_frames[0] - freed[0])
        return image

    peak = [0]
    monkeypatch.setattr(video, "frame", counted)
    gc.disable()  # only reference counting frees a frame: what streaming gives back at once
    try:
        made = video.make_video(tmp_path)
    finally:
        gc.enable()
    assert made == tmp_path / "video.mp4" and made_frames[0] == 8
    assert peak[0] <= 3, peak  # the first frame (its size) and the one being written, not all eight
    reader = imageio_ffmpeg.read_frames(str(made))
    next(reader)
    assert sum(1 for _ in reader) == 8


def test_an_ffmpeg_that_fails_leaves_a_webp_and_no_broken_mp4(tmp_path, monkeypatch):
    from PIL import Image

    from surfer.agent import video

    _synthetic_run(tmp_path, 3)
    monkeypatch.setattr(video, "_ffmpeg", lambda: "/bin/false")  # exits at once: a broken pipe or status 1
    made = video.make_video(tmp_path)
    assert made == tmp_path / "video.webp" and not (tmp_path / "video.mp4").exists()
    with Image.open(made) as animation:
        assert animation.n_frames == 3
