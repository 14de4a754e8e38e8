"""report.html: one self-contained page (screenshots inlined) showing each
step's screenshot with the click point marked, the thought, the action, the
model's raw answers (open where one was rejected) and the timings."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from .rundir import read_trajectory

_MIME = {"jpg": "image/jpeg", "png": "image/png", "webp": "image/webp"}

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f5f5f7;color:#1d1d1f}
.artifacts{padding:12px 24px}.artifacts video,.artifacts img{max-width:100%;max-height:70vh}
header{padding:16px 24px;background:#1d1d1f;color:#fff}header h1{margin:0 0 4px;font-size:18px}
.status-success{color:#34c759}.status-failed,.status-error{color:#ff453a}.status-limit,.status-stuck,.status-needs_approval,.status-needs_input,.status-interrupted{color:#ff9f0a}
main{padding:16px 24px;display:grid;gap:16px}
.step{background:#fff;border-radius:10px;padding:12px;display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:16px}
.shot{position:relative;align-self:start}.shot img{width:100%;display:block;border:1px solid #ddd;border-radius:6px}
.mark{position:absolute;width:18px;height:18px;margin:-9px 0 0 -9px;border:3px solid #ff2d55;border-radius:50%;box-shadow:0 0 0 2px #fff}
.mark.to{border-color:#0a84ff}
.step.human{border-left:6px solid #ff9f0a}.actor{background:#ff9f0a;color:#fff;border-radius:4px;padding:1px 6px;font-size:12px}
pre{white-space:pre-wrap;word-break:break-word;background:#f0f0f3;padding:6px 8px;border-radius:6px;margin:4px 0}
details.calls summary{cursor:pointer;color:#6e6e73}details.calls pre{max-height:24em;overflow:auto}
.err{color:#c4001a}.muted{color:#6e6e73}table{border-collapse:collapse}td{padding:1px 8px 1px 0}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _image(run_dir: Path, step: dict[str, Any]) -> str:
    name = step.get("screenshot")
    if not name or not (run_dir / name).exists():
        return '<p class="muted">(no screenshot)</p>'
    mime = _MIME.get(name.rsplit(".", 1)[-1], "image/png")
    data = base64.b64encode((run_dir / name).read_bytes()).decode("ascii")
    screen = step.get("screen") or {}
    marks = ""
    if screen.get("width") and screen.get("height"):
        scale = screen.get("scale") or 1
        ox, oy = (screen.get("origin") or [0, 0])[:2]
        css_w, css_h = screen["width"] / scale, screen["height"] / scale
        for i, point in enumerate(step.get("points") or []):
            left, top = (point["x"] - ox) / css_w * 100, (point["y"] - oy) / css_h * 100
            marks += f'<div class="mark{" to" if i else ""}" style="left:{left:.3f}%;top:{top:.3f}%" title="({point["x"]}, {point["y"]})"></div>'
    return f'<div class="shot"><img alt="step {step.get("index")}" src="data:{mime};base64,{data}">{marks}</div>'


def _artifacts(artifacts: dict[str, str]) -> str:
    """The run's video (embedded) and Playwright trace (linked), files beside the report."""
    parts = []
    video = artifacts.get("video")
    if video:
        tag = f'<img alt="video of the run" src="{_e(video)}">' if video.endswith(".webp") else \
            f'<video controls muted src="{_e(video)}"></video>'
        parts.append(f'<div class="video">{tag}<p class="muted"><a href="{_e(video)}">{_e(video)}</a></p></div>')
    trace = artifacts.get("trace")
    if trace:
        parts.append(f'<p>Playwright trace: <a href="{_e(trace)}">{_e(trace)}</a> — '
                     f'open it with <code>python -m playwright show-trace {_e(trace)}</code></p>')
    return f'<section class="artifacts">{"".join(parts)}</section>' if parts else ""


def _calls(step: dict[str, Any]) -> str:
    """The step's model calls, each role's raw answer as the server sent it: folded, open where one was rejected
    (the reason it was retried, or the step failed, is then beside what the model said)."""
    calls = [call for role_calls in (step.get("calls") or {}).values() if isinstance(role_calls, list)
             for call in role_calls if isinstance(call, dict)]
    if not calls:
        return ""
    rejected = sum(1 for call in calls if call.get("error"))
    items = "".join(
        f'<p>{_e(call.get("role", "?"))} · {float(call.get("seconds") or 0):.2f} s'
        + (f' · <span class="err">rejected: {_e(call["error"])}</span>' if call.get("error") else "")
        + f'</p><pre>{_e(call.get("completion") or "")}</pre>'
        for call in calls
    )
    summary = f"model answers ({len(calls)}" + (f", {rejected} rejected)" if rejected else ")")
    return f'<details class="calls"{" open" if rejected else ""}><summary>{summary}</summary>{items}</details>'


def _step(run_dir: Path, step: dict[str, Any]) -> str:
    timings = step.get("timings") or {}
    rows = "".join(f"<tr><td>{_e(k)}</td><td>{v:.3f} s</td></tr>" for k, v in timings.items() if isinstance(v, (int, float)))
    verdicts = "".join(
        f'<p>validator: <b>{"accepted" if v.get("accepted") else "rejected"}</b> — {_e(v.get("reasons", ""))}</p>'
        for v in step.get("verdicts") or []
    )
    action = json.dumps(step.get("action"), ensure_ascii=False) if step.get("action") else "(none)"
    points = ", ".join(f'({p["x"]:.0f}, {p["y"]:.0f})' for p in step.get("points") or [])
    error = f'<p class="err">error: {_e(step["error"])}</p>' if step.get("error") else ""
    outcome = (step.get("outcome") or {}).get("detail", "")
    if (step.get("outcome") or {}).get("refused"):  # not performed: a sensitive action, a bound secret sent elsewhere
        error += f'<p class="err">refused: {_e(step["outcome"].get("error", ""))}</p>'
    if step.get("actor") == "human":  # what a person did after taking over (agent/handover.py)
        after = {"screenshot": step.get("screenshot_after")}
        return f"""<section class="step human" id="human-{_e(step.get('human'))}">
<div>{_image(run_dir, step)}<p class="muted">before · after</p>{_image(run_dir, after)}</div>
<div><h3><span class="actor">person</span> Human step {_e(step.get('human'))} (after step {_e(step.get('index'))})</h3>
<p class="muted">{_e(step.get('url', ''))}</p><p><b>Action</b></p><pre>{_e(action)}</pre>
{f'<p>point (CSS px): {_e(points)}</p>' if points else ''}{f'<p>outcome: {_e(outcome)}</p>' if outcome else ''}</div></section>"""
    return f"""<section class="step" id="step-{_e(step.get('index'))}">
{_image(run_dir, step)}
<div><h3>Step {_e(step.get('index'))}</h3><p class="muted">{_e(step.get('url', ''))}</p>
<p><b>Thought</b></p><pre>{_e(step.get('thought') or '')}</pre>
<p><b>Action</b></p><pre>{_e(action)}</pre>
{f'<p>point (CSS px): {_e(points)}</p>' if points else ''}{f'<p>outcome: {_e(outcome)}</p>' if outcome else ''}
{verdicts}{error}{_calls(step)}<table>{rows}</table></div></section>"""


def render_report(run_dir: str | Path) -> str:
    run_dir = Path(run_dir)
    steps = read_trajectory(run_dir)
    result: dict[str, Any] = {}
    if (run_dir / "result.json").exists():
        result = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    meta: dict[str, Any] = {}
    if (run_dir / "run.json").exists():
        meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    status = result.get("status", "unknown")
    task = result.get("task") or meta.get("task", "")
    human = sum(1 for step in steps if step.get("actor") == "human")
    summary = f'<span class="status-{_e(status)}">{_e(status)}</span> · {len(steps) - human} step(s)'
    if human:
        summary += f" · {human} human step(s)"
    if result.get("answer"):
        summary += f" · answer: <b>{_e(result['answer'])}</b>"
    if result.get("reason"):
        summary += f' · <span class="muted">{_e(result["reason"])}</span>'
    body = _artifacts(result.get("artifacts") or {}) + "\n".join(_step(run_dir, step) for step in steps)
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>surfer · {_e(task)}</title>
<style>{_STYLE}</style></head><body><header><h1>{_e(task)}</h1><div>{summary}</div>
<div class="muted">{_e(meta.get('url') or '')}</div></header><main>{body}</main></body></html>"""
