"""`surfer bench throughput` runs real sessions against the instant stand-in
model and writes its figures (no speed assertions: benchmarks are not tests)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from surfer.apps.cli import app
from surfer.bench.sampler import TreeSampler
from surfer.bench.throughput import parse_levels
from surfer.fleet.resources import process_tree_memory
from surfer.core.errors import ConfigError


# not `serial`: the figures checked are the process tree's own (its CPU, its memory, every session's steps), which
# hold beside other tests; the benchmark's speed figures are not asserted
def test_throughput_command_writes_figures_per_level(tmp_path):
    out = tmp_path / "tp.json"
    result = CliRunner().invoke(app, ["bench", "throughput", "--concurrency", "1,2", "--steps", "3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["benchmark"] == "throughput" and report["steps_per_session"] == 3
    assert [r["concurrency"] for r in report["levels"]] == [1, 2]
    chart = (tmp_path / "tp.html").read_text()  # the picture beside the figures: self-contained, one point per level
    assert chart.count("<svg") == 2 and "Steps per second" in chart and "overhead" in chart
    assert chart.count('<circle') == 2 + 2 * 2 and "<script" not in chart and "src=" not in chart
    for level in report["levels"]:
        assert level["steps"] == 3 * level["concurrency"]  # every session did all its steps
        assert level["statuses"] == {"success": level["concurrency"]}
        assert level["steps_per_s"] > 0 and level["speedup_vs_1"] > 0 and level["efficiency"] > 0
        assert set(level["seconds_per_step"]) == {
            "overhead",
            "screenshot",
            "encode",
            "action",
            "settle",
            "model",
            "total",
        }
        assert level["peak_rss_mib"] >= level["peak_pss_mib"] > 50  # the browser is in the tree
        # the tree's CPU while steps ran: Chromium, the driver and the harness all work
        assert 0 < level["cpu_seconds"] and 0 < level["cores_busy"] <= report["cpus"] + 0.5
        assert level["cpu_ms_per_step"] > 5 and level["speedup_ceiling"] > 0
        assert level["system_memory_growth_mib"] is not None
    assert "steps/s" in result.output and "wrote" in result.output


# the model latency's lower bound and the trace's bytes hold on a loaded machine too: not `serial`
def test_model_latency_is_waited_for_and_reported(tmp_path):
    out = tmp_path / "tp.json"
    args = ["bench", "throughput", "-c", "2", "--steps", "2", "--model-latency", "0.3", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["model_latency"] == 0.3
    (level,) = report["levels"]
    assert level["seconds_per_step"]["model"]["p50"] >= 0.6  # policy + localizer, 0.3 s each
    assert CliRunner().invoke(app, ["bench", "throughput", "--model-latency", "-1"]).exit_code == 2


def test_cpu_between_interpolates_samples():
    sampler = TreeSampler()
    sampler.samples = [(10.0, 0.0), (11.0, 2.0), (13.0, 3.0)]
    assert sampler.cpu_between(10.5, 12.0) == pytest.approx(2.5 - 1.0)
    assert sampler.cpu_between(9.0, 20.0) == pytest.approx(3.0)  # clamped to the samples
    assert TreeSampler().cpu_between(0, 1) == 0.0  # nothing sampled yet


def test_levels_and_memory_helpers():
    assert parse_levels("1, 8,32") == [1, 8, 32]
    with pytest.raises(ConfigError, match="1,8,32,64"):
        parse_levels("1,x")
    with pytest.raises(ConfigError, match="--levels must list positive integers"):
        parse_levels("0,2", "--levels")
    rss, pss = process_tree_memory()
    assert rss >= pss > 0


def test_bad_levels_exit_2():
    result = CliRunner().invoke(app, ["bench", "throughput", "--concurrency", "0"])
    assert result.exit_code == 2 and "positive integers" in result.output


def test_trace_on_measures_each_level_traced_beside_untraced(tmp_path):
    out = tmp_path / "tp.json"
    result = CliRunner().invoke(app, ["bench", "throughput", "-c", "1", "--steps", "2", "--trace", "on", "--out", str(out)])
    assert result.exit_code == 0, result.output
    plain, traced = json.loads(out.read_text())["levels"]
    assert (plain["trace"], traced["trace"]) == ("off", "on")
    assert plain["trace_bytes_per_step"] is None and traced["trace_bytes_per_step"] > 10_000  # screenshots, snapshots
    assert traced["cpu_ms_per_step"] > 0 and traced["statuses"] == {"success": 1}
    assert "KiB of trace per step" in result.output
    assert CliRunner().invoke(app, ["bench", "throughput", "--trace", "sometimes"]).exit_code == 2
