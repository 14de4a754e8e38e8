"""The replay environment: recorded screenshots as observations, every action
accepted and recorded, the episode over after the recorded length; `run` and
`batch` over it through the real HTTP model path, with no Chromium at all."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading

import pytest
from PIL import Image

from surfer.agent.config import AgentConfig
from surfer.fleet.batch import Batch, BatchTask
from surfer.apps.options import DEMO_RECORDINGS
from surfer.core.actions import Click, CssPoint
from surfer.core.errors import ConfigError, EnvironmentFailure
from surfer.tools.replay import ReplayEnvironment, load_recording, load_recordings, read_screenshots


class Clicker:
    """A model that always clicks the middle of the screen; remembers which images it was sent."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.policy_images: list[list[str]] = []

    def __call__(self, request):  # type: ignore[no-untyped-def]
        if request.role == "localizer":
            return {"x": 500, "y": 500}
        with self.lock:
            self.policy_images.append([hashlib.sha1(image).hexdigest() for image in request.images])
        return {"thought": "click", "notes": "", "action": {"type": "click", "target": "the middle"}}


def test_shipped_recordings_play_back_in_order_and_end_after_their_length():
    recordings = load_recordings(DEMO_RECORDINGS)
    assert [r.name for r in recordings] == ["demo-1024x768", "demo-1204x1204", "demo-1280x800"]
    assert sum(f.path.stat().st_size for r in recordings for f in r.frames) < 600_000

    async def play() -> list[tuple[str, tuple[int, int], str]]:
        env = ReplayEnvironment(DEMO_RECORDINGS / "demo-1204x1204")
        await env.start("http://ignored.example/")
        seen = []
        while True:
            observation = await env.observe()
            shot = observation.screenshot
            with Image.open(__import__("io").BytesIO(shot.data)) as image:
                assert image.size == (shot.size.width, shot.size.height) == (1204, 1204)
            outcome = await env.perform(Click(target="x", point=CssPoint(x=10, y=10)))
            seen.append((observation.title, (shot.size.width, shot.size.height), outcome.detail))
            if await env.episode_end():
                break
        end = await env.episode_end()
        assert end is not None and end.status == "limit" and "5 screenshots" in end.reason
        await env.close()
        return seen

    import asyncio

    seen = asyncio.run(play())
    assert len(seen) == 5
    assert seen[0][0] == "Acme Library — Home" and "Welcome" in seen[-1][0]
    assert "replayed, not performed: click" in seen[0][2] and "screenshot 2/5" in seen[0][2]


async def test_marked_variants_differ_from_each_other_but_keep_size():
    a, b = ReplayEnvironment(DEMO_RECORDINGS / "demo-1280x800", variant=1), ReplayEnvironment(
        DEMO_RECORDINGS / "demo-1280x800", variant=2)
    await a.start()
    await b.start()
    shot_a, shot_b = (await a.observe()).screenshot, (await b.observe()).screenshot
    assert shot_a.data != shot_b.data and shot_a.size == shot_b.size
    assert shot_a.mime == "image/jpeg"


def test_folder_of_images_and_bad_sources(tmp_path):
    images = tmp_path / "shots"
    images.mkdir()
    for name, colour in (("b.png", "red"), ("a.png", "blue")):
        Image.new("RGB", (64, 48), colour).save(images / name)
    (images / "notes.txt").write_text("not an image")
    recording = load_recording(images)
    assert [f.path.name for f in recording.frames] == ["a.png", "b.png"]
    assert load_recordings(images)[0].frames == recording.frames
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no recordings"):
        load_recordings(tmp_path / "empty")
    with pytest.raises(ConfigError, match="not a directory"):
        load_recordings(tmp_path / "missing")
    broken = tmp_path / "broken-run"
    broken.mkdir()
    (broken / "trajectory.jsonl").write_text(json.dumps({"index": 1, "screenshot": "screenshots/step-001.jpg"}) + "\n")
    with pytest.raises(ConfigError, match="trajectory.jsonl:1: screenshot .* is missing"):
        load_recording(broken)
    # a run a person took over: their steps are not screens the agent looked at (no model request was made on them)
    taken = tmp_path / "taken-over"
    (taken / "screenshots").mkdir(parents=True)
    lines = [{"index": 1, "screenshot": "screenshots/step-001.png"},
             {"index": 1, "actor": "human", "human": 1, "screenshot": "screenshots/human-001-before.png",
              "screenshot_after": "screenshots/human-001-after.png"},
             {"index": 2, "screenshot": "screenshots/step-002.png"}]
    for name in ("step-001", "human-001-before", "human-001-after", "step-002"):
        Image.new("RGB", (64, 48), "green").save(taken / "screenshots" / f"{name}.png")
    (taken / "trajectory.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert [f.path.name for f in load_recording(taken).frames] == ["step-001.png", "step-002.png"]
    # the runs/ folder `surfer run` fills: a terminal session's folder (a run directory per task), a run whose page
    # never opened (no screenshot), a batch's --out (its runs/, not the view's live/ thumbnails): each was refused
    runs = tmp_path / "runs"
    shutil.copytree(DEMO_RECORDINGS / "demo-1024x768", runs / "20260101-session" / "01-register")
    (runs / "20260101-session" / "session.json").write_text("{}")
    (runs / "20260101-no-page" / "screenshots").mkdir(parents=True)
    (runs / "20260101-no-page" / "trajectory.jsonl").write_text("")
    shutil.copytree(DEMO_RECORDINGS / "demo-1280x800", runs / "batch" / "runs" / "t0")
    shutil.copytree(images, runs / "batch" / "live", ignore=shutil.ignore_patterns("*.txt"))
    (runs / "batch" / "results.jsonl").write_text("")
    assert [r.name for r in load_recordings(runs)] == ["20260101-session/01-register", "batch/runs/t0"]
    assert [r.name for r in load_recordings(runs / "batch")] == ["runs/t0"]
    with pytest.raises(ConfigError, match="no recordings"):
        load_recordings(runs / "20260101-no-page" / "screenshots")
    # a file named as an image that is none: named plainly (PIL's message named its in-memory buffer, 0x... and all)
    (images / "c.png").write_text("not a PNG")
    with pytest.raises(EnvironmentFailure, match=r"c.png is not a readable image: not an image format PIL reads$"):
        read_screenshots(load_recording(images))


def test_run_command_replays_a_recording_through_the_http_model_path(standin, tmp_path):
    from typer.testing import CliRunner

    from surfer.apps.cli import app

    model = Clicker()
    server = standin(model)
    out = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "run", "Register Ada", "--env", "replay", "--replay", str(DEMO_RECORDINGS / "demo-1024x768"),
        "--base-url", server.base_url, "--model", server.model, "--out", str(out), "--json",
    ])
    assert result.exit_code == 1, result.output  # the recording ended without an answer: status limit
    final = json.loads(result.stdout.strip().splitlines()[-1])
    assert final["status"] == "limit" and final["steps"] == 5, final
    steps = [json.loads(line) for line in (out / "trajectory.jsonl").read_text().splitlines()]
    assert [s["action"]["type"] for s in steps] == ["click"] * 5
    assert all("replayed, not performed" in s["outcome"]["detail"] for s in steps)
    assert steps[0]["screen"]["width"] == 1024 and steps[0]["url"].endswith("/index.html")
    assert [len(images) for images in model.policy_images] == [1, 2, 3, 3, 3]  # the last 3 screenshots

    wrong = CliRunner().invoke(app, ["run", "x", "--replay", "demo", "--base-url", server.base_url])
    assert wrong.exit_code == 2 and "--replay applies to --env replay only" in wrong.output
    missing = CliRunner().invoke(app, ["run", "x", "--env", "replay", "--base-url", server.base_url])
    assert missing.exit_code == 2 and "needs --replay" in missing.output


async def test_batch_over_replay_needs_no_browser_and_gives_each_task_its_own_images(standin, tmp_path):
    model = Clicker()
    server = standin(model)
    config = AgentConfig(base_url=server.base_url, model=server.model, profile="holotron", max_steps=20,
                         validate_answers=False)
    recordings = load_recordings(DEMO_RECORDINGS)
    tasks = [BatchTask(id=f"t{k}", task="Register Ada", group=f"t{k}") for k in range(4)]
    tasks.append(BatchTask(id="named", task="Register Ada", group="named", metadata={"replay": "demo-1280x800"}))
    batch = Batch(config, tasks, tmp_path / "out", concurrency=3, replay=recordings)
    summary = await batch.run()
    assert batch._browser.browser is None  # no Chromium was started
    assert summary.statuses == {"limit": 5} and summary.finished == 5
    records = {r["id"]: r for r in batch.index.read()}
    assert {k: r["steps"] for k, r in records.items()} == {"t0": 5, "t1": 5, "t2": 5, "t3": 5, "named": 5}
    assert len(model.policy_images) == 25
    first_images = {images[0] for images in model.policy_images if len(images) == 1}
    assert len(first_images) == 5  # t0 and t3 replay one recording, yet send different images
    run_json = json.loads((tmp_path / "out" / "runs" / "named" / "run.json").read_text())
    assert run_json["config"]["environment"] == "replay"

    bad = [BatchTask(id="x", task="t", group="x", metadata={"replay": "nope"})]
    with pytest.raises(ConfigError, match="recording 'nope'"):
        Batch(config, bad, tmp_path / "bad", replay=recordings)


def test_batch_command_takes_env_replay(standin, tmp_path):
    from typer.testing import CliRunner

    from surfer.apps.cli import app

    server = standin(Clicker())
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"s{k}", "task": "Register Ada"}) + "\n" for k in range(3)))
    args = ["batch", str(tasks), "--out", str(tmp_path / "out"), "-c", "3", "--quiet", "--env", "replay",
            "--replay", "demo", "--base-url", server.base_url, "--model", server.model, "--no-validator"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "statuses: {'limit': 3}" in result.output
    bad = CliRunner().invoke(app, [*args[:-1], "--env", "desktop"])
    assert bad.exit_code == 2


async def test_read_replays_reads_every_screenshot_before_the_sessions_start(standin, tmp_path):
    """After `read_replays` the batch needs the recordings' files no more: each
    session plays the screenshots read (and marked) beforehand."""
    import shutil

    model = Clicker()
    server = standin(model)
    config = AgentConfig(base_url=server.base_url, model=server.model, profile="holotron", max_steps=20,
                         validate_answers=False)
    copy = tmp_path / "recordings"
    shutil.copytree(DEMO_RECORDINGS, copy)
    tasks = [BatchTask(id=f"t{k}", task="Register Ada", group=f"t{k}") for k in range(3)]
    batch = Batch(config, tasks, tmp_path / "out", concurrency=3, replay=load_recordings(copy))
    await batch.read_replays()
    shutil.rmtree(copy)  # a session that read its screenshots now would fail
    summary = await batch.run()
    assert summary.statuses == {"limit": 3}
    assert {r["steps"] for r in batch.index.read()} == {5}
    assert len({images[0] for images in model.policy_images if len(images) == 1}) == 3  # still marked per session


def test_a_reply_holding_half_a_surrogate_pair_is_kept_with_the_run(standin, tmp_path):
    """A model may write half of a UTF-16 pair as a JSON escape (`"\\udeaa"`; seen from Holotron's random
    weights on SGLang): parsed, it is a string no UTF-8 file takes, and the step's record could not be
    written (the session ended with an internal error). Each half becomes U+FFFD; a whole pair stays."""
    import asyncio

    from surfer.agent.loop import Agent

    def model(request):  # type: ignore[no-untyped-def]
        if request.role == "localizer":
            return {"x": 500, "y": 500}
        if request.role == "validator":
            return {"verdict": "accept", "reasons": "shown \udc80"}
        if sum(r.role == "policy" for r in server.requests) > 1:
            return {"thought": "done", "notes": "", "action": {"type": "answer", "text": "code \ud83d\ude00 \ud800"}}
        return {"thought": "click \udeaa", "notes": "}}bo \udeaa", "action": {"type": "click", "target": "the \udfff link"}}

    server = standin(model)
    out = tmp_path / "run"
    agent = Agent(base_url=server.base_url, model=server.model, environment=ReplayEnvironment(DEMO_RECORDINGS / "demo-1024x768"),
                  max_steps=3)
    result = asyncio.run(agent.run("Register Ada", out_dir=out))
    assert result.status == "success", result.reason
    assert result.answer == "code \U0001f600 \ufffd"  # the pair is one character; the half is replaced
    (step, *_) = [json.loads(line) for line in (out / "trajectory.jsonl").read_text(encoding="utf-8").splitlines()]
    assert step["thought"] == "click \ufffd" and step["notes"] == "}}bo \ufffd"
    assert step["action"]["target"] == "the \ufffd link"
    assert json.loads((out / "result.json").read_text(encoding="utf-8"))["answer"] == result.answer


def test_a_full_disk_under_surfer_run_is_one_line(standin, tmp_path, monkeypatch):
    """`surfer run` whose disk fills up mid-run: one line naming the run directory and what to do, exit 1, where a
    traceback of some 260 lines came out (a write cut short names no file)."""
    from typer.testing import CliRunner

    from surfer.agent.trajectory import TrajectoryWriter
    from surfer.apps.cli import app

    write_step = TrajectoryWriter._step

    def disk_full(self, event):  # type: ignore[no-untyped-def]
        if event.record.index == 1:
            raise OSError(28, "No space left on device")
        return write_step(self, event)

    monkeypatch.setattr(TrajectoryWriter, "_step", disk_full)
    server, out = standin(Clicker()), tmp_path / "run"
    result = CliRunner().invoke(app, [
        "run", "Register Ada", "--env", "replay", "--replay", str(DEMO_RECORDINGS / "demo-1024x768"),
        "--base-url", server.base_url, "--model", server.model, "--out", str(out),
    ], env={"COLUMNS": "300", "NO_COLOR": "1"})
    assert isinstance(result.exception, SystemExit) and result.exit_code == 1, result.output[-3000:]
    assert f"error: cannot write {out}: No space left on device; what was written before is kept" in result.output
    assert (out / "run.json").is_file() and not list(out.glob("*.tmp")) and "Traceback" not in result.output


async def test_a_full_disk_stops_the_batch_and_records_no_task_as_failed(standin, tmp_path, monkeypatch):
    """The disk fills up under a run (its step cannot be written): that is no task's fault. The batch stops, the
    task has no results line (it was recorded as an internal error, never run again), and a rerun finishes it."""
    from surfer.agent.trajectory import TrajectoryWriter

    server = standin(Clicker())
    config = AgentConfig(base_url=server.base_url, model=server.model, profile="holotron", max_steps=1,
                         validate_answers=False)
    tasks = [BatchTask(id=i, task="Register Ada", group=i) for i in ("full", "later")]
    write_step = TrajectoryWriter._step

    def disk_full(self, event):  # type: ignore[no-untyped-def]
        if ".tmp-full-" in str(self.run_dir):
            raise OSError(28, "No space left on device", str(self.run_dir / "trajectory.jsonl"))
        return write_step(self, event)

    monkeypatch.setattr(TrajectoryWriter, "_step", disk_full)
    batch = Batch(config, tasks, tmp_path, concurrency=1, replay=load_recordings(DEMO_RECORDINGS))
    summary = await batch.run()
    assert summary.stopped_kind == "storage" and "No space left on device" in summary.stopped, summary.stopped
    assert batch.index.read() == [] and summary.statuses == {}  # not an error of the task: no line, nothing counted
    assert [t.id for t in batch.pending()] == ["full", "later"]  # (the batch started no task after it)
    monkeypatch.setattr(TrajectoryWriter, "_step", write_step)  # room made: the same batch again finishes it
    summary = await Batch(config, tasks, tmp_path, concurrency=1, replay=load_recordings(DEMO_RECORDINGS)).run()
    assert summary.stopped is None and [(r["id"], r["status"]) for r in batch.index.read()] == [("full", "limit"), ("later", "limit")]
