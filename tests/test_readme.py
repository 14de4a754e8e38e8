"""The README stays short and points at what exists, its test command is the one
CI runs, and the SDK guide's examples run as written (STYLE.md #13), against the
stand-in server and the demo site; only the example's placeholder URL is
swapped. The run they make is checked against the file-format models the
reference documents (surfer/agent/formats.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from surfer.apps.demo.oracle import DemoOracle, confirmation_code, EMAIL, NAME, frame_mapper

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SDK_GUIDE = ROOT / "docs" / "guides" / "sdk.md"
PLACEHOLDER = "http://127.0.0.1:8080/index.html"
MAX_LINES = 250


def example(name: str) -> str:
    match = re.search(rf"<!-- example: {name} -->\s*```python\n(.*?)```", SDK_GUIDE.read_text(), re.S)
    assert match, f"docs/guides/sdk.md has no example named {name}"
    return match.group(1)


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; move the detail to docs/"


def test_the_readme_shows_the_test_command_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    [command] = re.findall(r"^(bash scripts/test\.sh)\b.*$", ci, re.M)
    assert f"```bash\n{command}\n```" in README.read_text()


def test_the_readme_links_point_at_files_that_exist():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert len(local) > 10
    assert [link for link in local if not (ROOT / link).exists()] == []


def test_the_readme_shows_a_task_a_suite_the_sdk_a_batch_serving_and_mcp():
    text = README.read_text()
    for shown in ("surfer demo", "surfer run ", "surfer qa ", "from surfer import Agent", "surfer batch ",
                  "surfer serve ", "surfer mcp "):
        assert shown in text, shown


def test_the_readme_sdk_example_is_valid_python():
    [code] = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    compile(code, "README:sdk", "exec")
    assert "from surfer import Agent" in code


def test_the_readme_sdk_example_records_its_run(standin, demo_site, monkeypatch, tmp_path, capsys):
    """The README's SDK example, run as written (its endpoint, model and URL swapped for the
    stand-in and the demo site) in a fresh working directory, with the real default folder:
    the run directory it prints exists, under runs/, like `surfer run`'s."""
    from surfer.agent import rundir

    def respond(request):  # type: ignore[no-untyped-def]
        if request.role == "validator":
            return {"verdict": "accept", "reasons": "The heading reads Acme Library."}
        return {"thought": "The page's main heading reads 'Acme Library'.", "notes": "",
                "action": {"type": "answer", "text": "Acme Library"}}

    server = standin(respond)
    [code] = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    for shown, actual in (("http://127.0.0.1:8000/v1", server.base_url), ("Hcompany/Holotron-12B", server.model),
                          ("https://example.org", demo_site.url("index.html"))):
        assert shown in code, shown
        code = code.replace(shown, actual)
    monkeypatch.setattr(rundir, "RUNS_ROOT", Path("runs"), raising=False)  # the real default (conftest moves it for other tests)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README:sdk", "exec"), {"__name__": "readme_example"})
    printed = capsys.readouterr().out.splitlines()[-1]  # print(result.status, result.answer, result.run_dir)
    assert printed.startswith("success Acme Library "), printed
    run_dir = tmp_path / printed.rsplit(" ", 1)[1]
    assert run_dir.parent == tmp_path / "runs", printed
    assert (run_dir / "report.html").exists()
    check_run_directory(run_dir)


@pytest.fixture(scope="module")
async def oracle_centres(demo_site, measure):
    return await measure(demo_site.base_url, (1280, 800))


def test_sdk_guide_examples_run(standin, demo_site, oracle_centres, monkeypatch, tmp_path, capsys):
    server = standin(DemoOracle(oracle_centres, frame_mapper("normalized_1000", (1280, 800), 1.0)))
    monkeypatch.setenv("SURFER_BASE_URL", server.base_url)
    monkeypatch.setenv("SURFER_MODEL", server.model)
    monkeypatch.setenv("SURFER_PROFILE", "holotron")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "docs_example"}
    for name in ("sdk", "scripted"):
        code = example(name)
        if name == "sdk":
            assert PLACEHOLDER in code
            code = code.replace(PLACEHOLDER, demo_site.url("index.html"))
        exec(compile(code, f"docs/guides/sdk.md:{name}", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == f"success {confirmation_code(NAME, EMAIL)}"
    assert printed[0].startswith("1 click(")
    run_dir = tmp_path / "runs" / "sdk-example"
    assert (run_dir / "report.html").exists()
    check_run_directory(run_dir)
    scripted = Path(namespace["result"].run_dir)  # the scripted example's run, recorded by default
    assert (scripted / "report.html").exists() and scripted.name.endswith("-open-the-registration-form")
    exec(compile(example("backend"), "docs/guides/sdk.md:backend", "exec"), namespace)  # (it makes the agent)
    assert type(namespace["agent"].policy.client.backend).__name__ == "MyModel"


def check_run_directory(run_dir: Path) -> None:
    """Every file of a run directory is what docs/reference/formats.md says (generated from these models)."""
    from surfer.agent.formats import RunMeta, TrajectoryLine
    from surfer.agent.result import RunResult

    RunMeta.model_validate_json((run_dir / "run.json").read_text())
    lines = (run_dir / "trajectory.jsonl").read_text().splitlines()
    assert lines
    for line in lines:
        TrajectoryLine.model_validate_json(line)  # extra keys are refused: a new field needs its description
    result = json.loads((run_dir / "result.json").read_text())
    assert set(result) == {name for name, field in RunResult.model_fields.items() if not field.exclude}  # (storage_state: memory only)
    RunResult.model_validate(result)
