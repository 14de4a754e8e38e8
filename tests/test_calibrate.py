"""`surfer calibrate` against the stand-in server, whose localizer answers
in normalised 0..1000 for the calibration targets: the right frame is found,
and a profile that assumes absolute pixels is flagged."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from surfer.apps.calibrate import TARGETS, calibrate
from surfer.apps.cli import app
from surfer.models.standin import ChatRequest

pytestmark = pytest.mark.browser

POSITIONS = {label: (fx, fy) for label, fx, fy in TARGETS}


def normalised_oracle(request: ChatRequest) -> dict:
    """A Holo2-like localizer: the target's centre in 0..1000 of the image."""
    label = re.search(r"labelled '(\w+)'", request.text).group(1)
    fx, fy = POSITIONS[label]
    return {"x": round(fx * 1000), "y": round(fy * 1000)}


async def test_calibrate_finds_the_normalised_frame(standin) -> None:
    server = standin(normalised_oracle)
    report = await calibrate(server.base_url, server.model, "holo2", viewport=(1280, 800))
    n = len(TARGETS)
    assert report["hits"]["normalized_1000"] == n
    assert report["hits"]["absolute"] < n
    assert report["best_frames"] == ["normalized_1000"]
    assert report["profile_fits"] and report["better_frames"] == []
    assert len([r for r in server.requests if r.role == "localizer"]) == n  # one attempt per target
    assert all(r.images for r in server.requests)  # the real screenshot went over HTTP


def test_calibrate_flags_a_profile_with_the_wrong_frame(standin) -> None:
    server = standin(normalised_oracle)
    result = CliRunner().invoke(app, [
        "calibrate", "--base-url", server.base_url, "--model", server.model, "--profile", "openai", "--viewport", "1024x768",
        "--json",
    ])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["profile_frame"] == "absolute" and report["better_frames"] == ["normalized_1000"]
    assert report["hits"]["normalized_1000"] == len(TARGETS) > report["hits"]["absolute"]
    assert report["advice"].startswith("WARNING: frame 'normalized_1000' fits better")
    assert "holo2" in report["advice"] and "holotron" in report["advice"]


def test_calibrate_text_report_marks_the_profile_row(standin) -> None:
    server = standin(normalised_oracle)
    result = CliRunner().invoke(app, ["calibrate", "--base-url", server.base_url, "--model", server.model, "--profile", "holotron"])
    assert result.exit_code == 0, result.output
    assert re.search(r"normalized_1000\s+8/8 hits  <- profile", result.stdout)
    assert "OK: frame 'normalized_1000' of profile 'holotron' fits best (8/8)" in result.stdout



def test_calibrate_takes_profile_auto_as_the_suggestion_from_the_name(standin) -> None:
    """`--profile auto` (the docs' and `surfer run`'s word for it) was "unknown profile 'auto'"."""
    server = standin(normalised_oracle)  # serving another model: the profile is chosen before the server says so
    result = CliRunner().invoke(app, ["calibrate", "--base-url", server.base_url, "--model", "Hcompany/Holo2-8B",
                                      "--profile", "auto"])
    assert "using profile 'holo2'" in result.output and "unknown profile" not in result.output
    assert result.exit_code == 2 and "does not serve model 'Hcompany/Holo2-8B'" in result.output, result.output
    # a factor `surfer run` refuses was taken (and a screenshot 5x the viewport asked of the browser)
    result = CliRunner().invoke(app, ["calibrate", "--base-url", server.base_url, "--model", "m", "--device-scale-factor", "5"])
    assert result.exit_code == 2 and "--device-scale-factor 5: give a factor above 0 and at most 4" in result.output
