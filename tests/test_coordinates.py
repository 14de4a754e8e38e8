"""The one coordinate module: model frame → sent image → screenshot → CSS."""

from __future__ import annotations

import math

import pytest

from surfer.core.actions import CssPoint
from surfer.core.coordinates import ImageGeometry, Size, css_to_model, fit_max_side, model_to_css, smart_resize
from surfer.core.errors import CoordinateError, ModelOutputError


def test_models_md_worked_example_holo2():
    # A 1204x1204 viewport is sent as 1216x1216; x=500 is pixel 608 of the sent image, CSS ~602.
    sent = smart_resize(1204, 1204, factor=32, min_pixels=65_536, max_pixels=16_777_216)
    assert sent == Size(1216, 1216)
    geometry = ImageGeometry(sent=sent, screenshot=Size(1204, 1204), scale=1.0)
    point = model_to_css(500, 500, "normalized_1000", geometry)
    assert point == CssPoint(x=602, y=602)
    absolute = model_to_css(608, 608, "absolute", geometry)
    assert absolute == CssPoint(x=602, y=602)


def test_non_square_viewport_at_scale_2_normalized():
    # 1280x720 CSS at scale 2 -> 2560x1440 screenshot, resized to 1280x736 for the model.
    geometry = ImageGeometry(sent=Size(1280, 736), screenshot=Size(2560, 1440), scale=2.0)
    point = model_to_css(250, 750, "normalized_1000", geometry)
    assert point.x == pytest.approx(320.0)
    assert point.y == pytest.approx(540.0)


def test_absolute_frame_on_a_resized_image_at_scale_2():
    geometry = ImageGeometry(sent=Size(1000, 500), screenshot=Size(2000, 1000), scale=2.0)
    # pixel (100, 400) of the sent image = pixel (200, 800) of the screenshot = CSS (100, 400)
    assert model_to_css(100, 400, "absolute", geometry) == CssPoint(x=100, y=400)


def test_origin_offsets_cropped_or_secondary_screens():
    geometry = ImageGeometry(sent=Size(480, 630), screenshot=Size(480, 630), scale=3.0, origin_x=8, origin_y=60)
    assert model_to_css(0, 0, "absolute", geometry) == CssPoint(x=8, y=60)
    assert model_to_css(480, 630, "absolute", geometry) == CssPoint(x=168, y=270)


@pytest.mark.parametrize("frame", ["normalized_1000", "absolute"])
@pytest.mark.parametrize("scale", [1.0, 2.0])
def test_round_trip_through_the_inverse(frame, scale):
    geometry = ImageGeometry(sent=Size(1008, 644), screenshot=Size(int(1600 * scale), int(1000 * scale)), scale=scale)
    for css in (CssPoint(x=0, y=0), CssPoint(x=799.5, y=333.25), CssPoint(x=1599, y=999)):
        x, y = css_to_model(css, frame, geometry)
        back = model_to_css(x, y, frame, geometry)
        # one unit of the model frame is at most ~1.6 CSS px here
        assert abs(back.x - css.x) <= 1.6 and abs(back.y - css.y) <= 1.6


@pytest.mark.parametrize(
    ("x", "y", "frame"),
    [(1001, 5, "normalized_1000"), (-1, 5, "normalized_1000"), (5, 1e9, "normalized_1000"),
     (math.nan, 5, "normalized_1000"), (5, math.inf, "absolute"), (1009, 5, "absolute")],
)
def test_out_of_range_is_an_error_never_a_clamp(x, y, frame):
    geometry = ImageGeometry(sent=Size(1008, 644), screenshot=Size(1600, 1000))
    with pytest.raises(CoordinateError) as info:
        model_to_css(x, y, frame, geometry)
    assert isinstance(info.value, ModelOutputError)  # so the role retries with feedback
    assert "outside the image" in str(info.value)


def test_smart_resize_bounds_and_factor():
    big = smart_resize(2160, 3840, factor=28, min_pixels=3_136, max_pixels=1_003_520)
    assert big.width % 28 == 0 and big.height % 28 == 0
    assert big.width * big.height <= 1_003_520
    assert abs(big.width / big.height - 3840 / 2160) < 0.05
    small = smart_resize(20, 30, factor=28, min_pixels=3_136, max_pixels=1_003_520)
    assert small.width * small.height >= 3_136
    with pytest.raises(ValueError):
        smart_resize(0, 10, 28, 1, 10)


def test_fit_max_side():
    assert fit_max_side(Size(2560, 1440), 1280) == Size(1280, 720)
    assert fit_max_side(Size(800, 600), 1280) == Size(800, 600)
    assert fit_max_side(Size(800, 600), None) == Size(800, 600)
