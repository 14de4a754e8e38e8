"""examples/ci/: the GitHub Actions workflow and the GitLab CI job parse as
YAML, run the `surfer qa` command the README documents, and publish its
JUnit report and output directory (traces, videos, reports)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / "examples" / "ci"


def readme_command() -> str:
    match = re.search(r"<!-- ci-command -->\s*```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    assert match, "README has no ci-command block"
    return match.group(1).strip()


def qa_lines(scripts: list[str]) -> list[str]:
    return [line.strip() for script in scripts for line in script.splitlines() if line.strip().startswith("surfer qa ")]


def flag(command: str, name: str) -> str:
    words = shlex.split(command)
    return words[words.index(name) + 1]


def test_the_github_workflow_runs_the_documented_command_and_publishes_junit_and_artifacts():
    workflow = yaml.safe_load((CI / "github-actions.yml").read_text())
    steps = workflow["jobs"]["qa"]["steps"]
    (command,) = qa_lines([step.get("run", "") for step in steps])
    assert command == readme_command()
    junit, out = flag(command, "--junit"), flag(command, "--out")
    assert flag(command, "--trace") == "retain-on-failure" and flag(command, "--video") == "retain-on-failure"
    published = [s for s in steps if "junit" in s.get("uses", "")]
    assert published and published[0]["with"]["report_paths"] == junit and published[0]["if"] == "always()"
    uploaded = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploaded and f"{out}/" in uploaded[0]["with"]["path"].split() and uploaded[0]["if"] == "always()"
    assert any("surfer serve" in step.get("run", "") for step in steps)


def test_the_gitlab_job_runs_the_documented_command_and_reports_junit():
    job = yaml.safe_load((CI / "gitlab-ci.yml").read_text())["surfer-qa"]
    (command,) = qa_lines(job["script"])
    assert command == readme_command()
    artifacts = job["artifacts"]
    assert artifacts["reports"]["junit"] == flag(command, "--junit") and artifacts["when"] == "always"
    assert f"{flag(command, '--out')}/" in artifacts["paths"]
    assert any("surfer serve" in line for line in job["before_script"])
