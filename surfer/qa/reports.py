"""What a QA run leaves for people and CI: JUnit XML (one testcase per case),
an HTML summary linking each case's report.html, and that case report
(attempts, steps with their run directories, expectations)."""

from __future__ import annotations

import html
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from surfer.agent.rundir import write_atomic

from .outcomes import AttemptReport, CaseReport, QaSummary


# characters XML 1.0 cannot hold, even escaped (control characters but tab, newline and carriage return)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml(value: Any) -> str:
    """Text as a JUnit attribute or element can hold it: a control character (in a model's reason, a page's text,
    a terminal colour code) is written as its escape (\\x1b), else the report is not XML that CI can read."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", str(value))


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _rel(target: str | Path, start: Path) -> str:
    return os.path.relpath(Path(target).resolve(), start.resolve()).replace(os.sep, "/")


def _properties(case: CaseReport) -> dict[str, str]:
    last = case.last
    props = {
        "status": case.status, "attempts": str(len(case.attempts)), "model_calls": str(case.model_calls),
        "cached_steps": str(last.cached_steps if last else 0),
        "healed_steps": ", ".join(f"step {s.index}" for s in last.healed_steps) if last else "",
        "tags": ", ".join(case.case.tags),
    }
    if case.status == "flaky":
        props["flaky"] = "true"
    if case.cache_dropped:
        props["cache_dropped"] = "true"
    return props


def failure_files(case: CaseReport) -> list[Path]:
    """What a failed case leaves for reading it: its last attempt's trace and videos, and its report."""
    last = case.last
    files: list[Path] = []
    if last is not None and Path(last.dir).is_dir():
        attempt = Path(last.dir)
        files += sorted(attempt.glob("trace.zip")) + sorted(attempt.rglob("video.mp4")) + sorted(attempt.rglob("video.webp"))
    if (case.dir / "report.html").exists():
        files.append(case.dir / "report.html")
    return files


def attachment_path(target: Path, root: Path) -> str:
    """How an `[[ATTACHMENT|...]]` line names `target`: relative to `root`, the directory the command runs in (a CI
    job's checkout: GitLab reads these paths against $CI_PROJECT_DIR, Jenkins against the workspace), or absolute
    when the file is outside it."""
    resolved, base = Path(target).resolve(), root.resolve()
    return resolved.relative_to(base).as_posix() if resolved.is_relative_to(base) else resolved.as_posix()


def junit_xml(summary: QaSummary, path: Path | None = None, base: Path | None = None) -> str:
    """The JUnit report; with `path` (where it is written), a failed case's files are attached as
    `[[ATTACHMENT|path]]` lines in its system-out (Jenkins, GitLab), relative to `base` (default: the working
    directory; see attachment_path)."""
    root = ET.Element("testsuites", name="surfer qa", **_counts(summary.cases), time=f"{summary.seconds:.3f}")
    by_suite: dict[str, list[CaseReport]] = {}
    for case in summary.cases:
        by_suite.setdefault(case.suite, []).append(case)
    for suite_name, cases in by_suite.items():
        suite = ET.SubElement(root, "testsuite", name=_xml(suite_name), **_counts(cases), time=f"{sum(c.seconds for c in cases):.3f}")
        # each case's properties on its testsuite, named `<case>.<key>`: Surefire's schema (which some CI tools
        # validate against) has no properties in a testcase
        props = ET.SubElement(suite, "properties")
        for case in cases:
            for name, value in _properties(case).items():
                ET.SubElement(props, "property", name=_xml(f"{case.case.name}.{name}"), value=_xml(value))
        for case in cases:
            element = ET.SubElement(suite, "testcase", classname=_xml(suite_name), name=_xml(case.case.name), time=f"{case.seconds:.3f}")
            if case.status in ("failed", "needs_approval", "needs_input", "error", "unfinished"):  # unfinished: it could not run (server gone)
                last = case.last
                message = (last.failure if last else None) or (f"not run: {summary.stopped}" if summary.stopped else "not run")
                tag = "error" if case.status in ("error", "unfinished") else "failure"
                kind = case.status if case.status in ("needs_approval", "needs_input") else (
                    last.error_kind if last else summary.stopped_kind) or tag
                ET.SubElement(element, tag, message=_xml(message), type=kind).text = _xml(_details(case) if last else message)
            elif not case.passed:  # (what attempts it made before the stop, and their reasons, are kept as its text)
                skipped = ET.SubElement(element, "skipped", message=_xml(f"not finished: the run stopped early ({summary.stopped or case.status})"))
                if case.attempts:
                    skipped.text = _xml(_details(case))
            earlier = case.attempts[:-1] if case.status == "flaky" else []  # Surefire's record of a flaky test: its
            for tag in ("flakyFailure", "flakyError"):  # schema's order (failures, then errors), each with a stackTrace
                for attempt in (a for a in earlier if (a.status == "error") == (tag == "flakyError")):
                    flaky = ET.SubElement(element, tag, message=_xml(attempt.failure or attempt.status), type=attempt.error_kind or attempt.status)
                    ET.SubElement(flaky, "stackTrace").text = _xml(f"attempt {attempt.number} ({attempt.kind}): {attempt.status}"
                                                                   + (f" — {attempt.failure}" if attempt.failure else ""))
            out = str(case.dir) if case.attempts else ""  # (a case that never ran has no directory)
            if path is not None and case.status in ("failed", "needs_approval", "needs_input", "error"):
                out += "".join(f"\n[[ATTACHMENT|{attachment_path(f, base or Path.cwd())}]]" for f in failure_files(case))
            if out:
                ET.SubElement(element, "system-out").text = _xml(out)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _counts(cases: list[CaseReport]) -> dict[str, str]:
    """A testsuite's (or all testsuites') tests, failures, errors and skipped, as its testcases say them."""
    return {
        "tests": str(len(cases)),
        "failures": str(sum(c.status in ("failed", "needs_approval", "needs_input") for c in cases)),
        "errors": str(sum(c.status in ("error", "unfinished") for c in cases)),
        "skipped": str(sum(c.status in ("queued", "running") for c in cases)),
    }


def _details(case: CaseReport) -> str:
    lines = []
    for attempt in case.attempts:
        lines.append(f"attempt {attempt.number} ({attempt.kind}): {attempt.status}" + (f" — {attempt.failure}" if attempt.failure else ""))
        for step in attempt.steps:
            lines.append(f"  step {step.index} [{step.source}] {step.status}: {step.goal}" + (f" — {step.reason}" if step.reason and step.status != "success" else ""))
        for result in attempt.expectations:
            lines.append(f"  {'✓' if result.passed else '✗'} {result.expectation}" + (f" — {result.detail}" if result.detail else ""))
    lines.append(f"report: {case.dir / 'report.html'}")
    return "\n".join(lines)


_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f5f5f7;color:#1d1d1f}
header{padding:16px 24px;background:#1d1d1f;color:#fff}header h1{margin:0 0 4px;font-size:18px}
main{padding:16px 24px}table{border-collapse:collapse;background:#fff;width:100%}
td,th{border-bottom:1px solid #e5e5ea;padding:6px 10px;text-align:left;vertical-align:top}
.passed{color:#1e8e3e}.flaky{color:#c77700}.failed,.error{color:#d70015}.needs_approval,.needs_input{color:#8250df}.muted{color:#6e6e73}
section{background:#fff;border-radius:10px;padding:12px 16px;margin:0 0 16px}
section video,section img{max-width:100%;max-height:60vh}
"""


def _page(title: str, header: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>{_e(title)}</title>'
            f"<style>{_STYLE}</style></head><body><header><h1>{_e(title)}</h1>{header}</header><main>{body}</main></body></html>\n")


def summary_html(summary: QaSummary, path: Path) -> str:
    rows = []
    for case in summary.cases:
        last = case.last
        link = f'<a href="{_e(_rel(case.dir / "report.html", path.parent))}">report</a>' if last else ""
        healed = ", ".join(f"step {s.index}" for s in last.healed_steps) if last else ""
        rows.append(
            f'<tr><td>{_e(case.suite)}</td><td>{_e(case.case.name)}</td><td class="{_e(case.status)}">{_e(case.status)}</td>'
            f"<td>{case.seconds:.1f} s</td><td>{len(case.attempts)}</td><td>{last.cached_steps if last else 0}</td>"
            f"<td>{_e(healed)}</td><td>{case.model_calls}</td><td>{_e(case.failure or '')}</td><td>{link}</td></tr>"
        )
    table = ("<table><tr><th>suite</th><th>case</th><th>status</th><th>time</th><th>attempts</th><th>steps from cache</th>"
             "<th>healed</th><th>model calls</th><th>failure</th><th></th></tr>" + "".join(rows) + "</table>")
    stopped = f'<p class="error">stopped: {_e(summary.stopped)}</p>' if summary.stopped else ""
    return _page("surfer qa", f"<div>{_e(summary.line())}</div>", stopped + table + _failure_videos(summary, path))


def _failure_videos(summary: QaSummary, path: Path) -> str:
    """Each failed case's video and trace, embedded under the table."""
    sections = []
    for case in summary.cases:
        if case.status not in ("failed", "needs_approval", "needs_input", "error"):
            continue
        files = failure_files(case)
        media = "".join(
            (f'<video controls muted src="{_e(_rel(f, path.parent))}"></video>' if f.suffix == ".mp4" else
             f'<img alt="video" src="{_e(_rel(f, path.parent))}">') for f in files if f.stem == "video")
        traces = " ".join(f'<a href="{_e(_rel(f, path.parent))}">trace</a>' for f in files if f.name == "trace.zip")
        if media or traces:
            sections.append(f'<section><h3 class="{_e(case.status)}">{_e(case.suite)} · {_e(case.case.name)}</h3>'
                            f'{media}<p>{traces}</p></section>')
    return "".join(sections)


def _attempt_html(attempt: AttemptReport, case_dir: Path) -> str:
    steps = "".join(
        f"<tr><td>{s.index}</td><td>{_e(s.goal)}</td><td>{_e(s.source)}</td><td class=\"{'passed' if s.status == 'success' else 'failed'}\">{_e(s.status)}</td>"
        f"<td>{_e(s.answer or '')}</td><td>{_e('; '.join(s.healed))}</td><td>"
        + " ".join(f'<a href="{_e(_rel(Path(d) / "report.html", case_dir))}">run</a>' for d in s.run_dirs) + "</td></tr>"
        for s in attempt.steps
    )
    expectations = "".join(
        f"<tr><td class=\"{'passed' if r.passed else 'failed'}\">{'pass' if r.passed else 'fail'}</td><td>{_e(r.expectation)}</td>"
        f"<td>{_e(r.judged_by)}</td><td>{_e(r.detail)}</td></tr>"
        for r in attempt.expectations
    )
    failure = f'<p class="failed">{_e(attempt.failure)}</p>' if attempt.failure else ""
    return (f'<section><h2>Attempt {attempt.number} ({_e(attempt.kind)}): <span class="{_e(attempt.status)}">{_e(attempt.status)}</span></h2>'
            f'<p class="muted">{attempt.seconds:.1f} s · {attempt.model_calls} model call(s) · {attempt.cached_steps} step(s) from the cache</p>{failure}'
            f"<table><tr><th>#</th><th>step</th><th>source</th><th>status</th><th>answer</th><th>healed</th><th>run</th></tr>{steps}</table>"
            + (f"<h3>Expectations</h3><table>{expectations}</table>" if expectations else "") + "</section>")


def write_case_report(case: CaseReport, status: str | None = None) -> None:
    """The case's report.html; `status`: what its header says instead of the case's (a stopped run's case,
    still running, is "interrupted")."""
    case.dir.mkdir(parents=True, exist_ok=True)
    status = status or case.status
    header = f'<div><span class="{_e(status)}">{_e(status)}</span> · {_e(case.suite)} · {case.seconds:.1f} s</div>'
    body = "".join(_attempt_html(a, case.dir) for a in case.attempts)
    write_atomic(case.dir / "report.html", _page(case.case.name, header, body))


_MARK = {"passed": "✅", "flaky": "⚠️", "failed": "❌", "error": "❌", "unfinished": "⏹️", "needs_approval": "✋", "needs_input": "✋"}


def _cell(value: Any) -> str:
    """Text as one cell of a Markdown table: on one line, its pipes escaped."""
    return " ".join(str(value).split()).replace("|", "\\|")


def summary_markdown(summary: QaSummary) -> str:
    """The summary as Markdown (a CI job's summary page: GitHub's $GITHUB_STEP_SUMMARY): the totals, then a row a
    case, the cases that did not pass first."""
    order = sorted(summary.cases, key=lambda c: c.passed)  # (a stable sort: the suite's order otherwise)
    rows = [f"| {_MARK.get(c.status, '·')} | {_cell(c.suite)} | {_cell(c.case.name)} | {c.status} | {c.seconds:.1f} s | "
            f"{len(c.attempts)} | {_cell(c.failure or '')} |" for c in order]
    stopped = f"\n**Stopped:** {_cell(summary.stopped)}\n" if summary.stopped else ""
    return (f"### surfer qa\n\n{_cell(summary.line())}\n{stopped}\n| | suite | case | status | time | attempts | failure |\n"
            "|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


def write_reports(summary: QaSummary, junit: Path, html_path: Path, markdown: Path | None = None) -> None:
    for path in (junit, html_path, *([markdown] if markdown else [])):
        path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(junit, junit_xml(summary, junit))
    write_atomic(html_path, summary_html(summary, html_path))
    if markdown is not None and _step_summary(markdown):  # what the step's other commands wrote there stays
        with markdown.open("a", encoding="utf-8") as summary_file:
            summary_file.write(("\n" if summary_file.tell() else "") + summary_markdown(summary))
    elif markdown is not None:
        write_atomic(markdown, summary_markdown(summary))


def _step_summary(path: Path) -> bool:
    """`path` is GitHub Actions' job summary file of this step ($GITHUB_STEP_SUMMARY), which collects the Markdown of
    every command of the step (each appends, `>>`): written over, it lost theirs, and an earlier suite's."""
    named = os.environ.get("GITHUB_STEP_SUMMARY")
    try:
        return bool(named) and Path(named).resolve() == path.resolve()
    except OSError:
        return False
