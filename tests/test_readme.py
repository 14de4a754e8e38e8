"""The README's examples run as written (STYLE.md #13), against the stand-in
server and the demo site; only the example's placeholder URL is swapped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from surfer.apps.demo.oracle import DemoOracle, confirmation_code, EMAIL, NAME, frame_mapper, measure_targets

README = Path(__file__).resolve().parents[1] / "README.md"
PLACEHOLDER = "http://127.0.0.1:8080/index.html"


def example(name: str) -> str:
    match = re.search(rf"<!-- example: {name} -->\s*```python\n(.*?)```", README.read_text(), re.S)
    assert match, f"README has no example named {name}"
    return match.group(1)


@pytest.fixture(scope="module")
async def oracle_centres(demo_site):
    return await measure_targets(demo_site.base_url, (1280, 800))


def test_readme_examples_run(standin, demo_site, oracle_centres, monkeypatch, tmp_path, capsys):
    server = standin(DemoOracle(oracle_centres, frame_mapper("normalized_1000", (1280, 800), 1.0)))
    monkeypatch.setenv("SURFER_BASE_URL", server.base_url)
    monkeypatch.setenv("SURFER_MODEL", server.model)
    monkeypatch.setenv("SURFER_PROFILE", "holotron")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "readme_example"}
    for name in ("sdk", "scripted"):
        code = example(name)
        if name == "sdk":
            assert PLACEHOLDER in code
            code = code.replace(PLACEHOLDER, demo_site.url("index.html"))
        exec(compile(code, f"README:{name}", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == f"success {confirmation_code(NAME, EMAIL)}"
    assert printed[0].startswith("1 click(")
    assert (tmp_path / "runs" / "sdk-example" / "report.html").exists()
