"""`surfer bench throughput` runs real sessions against the instant stand-in
model and writes its figures (no speed assertions: benchmarks are not tests)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from surfer.apps.cli import app
from surfer.apps.throughput import parse_levels, process_tree_memory
from surfer.core.errors import ConfigError


def test_throughput_command_writes_figures_per_level(tmp_path):
    out = tmp_path / "tp.json"
    result = CliRunner().invoke(app, ["bench", "throughput", "--concurrency", "1,2", "--steps", "3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["benchmark"] == "throughput" and report["steps_per_session"] == 3
    assert [r["concurrency"] for r in report["levels"]] == [1, 2]
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
    assert "steps/s" in result.output and "wrote" in result.output


def test_levels_and_memory_helpers():
    assert parse_levels("1, 8,32") == [1, 8, 32]
    with pytest.raises(ConfigError, match="1,8,32,64"):
        parse_levels("1,x")
    rss, pss = process_tree_memory()
    assert rss >= pss > 0


def test_bad_levels_exit_2():
    result = CliRunner().invoke(app, ["bench", "throughput", "--concurrency", "0"])
    assert result.exit_code == 2 and "positive integers" in result.output
