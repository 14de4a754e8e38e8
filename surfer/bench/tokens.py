"""`surfer bench tokens`: what token capture (`--record-tokens`) costs and how well
a session's calls chain, on CPU: the shipped demo task in real Chromium, the
stand-in server answering in a child process with vLLM's token fields (its
deterministic tokenizer, each profile's turn shape).

- capture's cost: the same task run with capture on and off, turn about;
  steps per second of each (medians of the runs) and their ratio, and the
  client's CPU time to store one call (the run's calls replayed);
- bytes per step: tokens.jsonl as stored (each call against the one it follows)
  against the same ids stored in full, and beside the run's screenshots
  (the record with and without images);
- chaining: per profile and prompt layout, the share of calls that extend the
  call they follow token for token, and where the others break (the ids
  decoded), with and without the profile's `reply_prefix`.

Prints figures and writes JSON (default benchmarks/tokens-cpu/tokens.json).
"""

from __future__ import annotations

import dataclasses
import json
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import typer

from surfer.apps.demo.oracle import DemoOracle, frame_mapper
from surfer.apps.signals import run_command

LAYOUTS = ("window", "blocks", "conversation")
PROFILES = ("holotron", "holo2", "holo1.5")
_PAGE = re.compile(r"(\S+)\n(?:Decide the next action|The step or time limit)")


@dataclasses.dataclass
class ConversationDemoOracle(DemoOracle):
    """The demo's oracle, also reading a conversation (the page it is on now is the last one named)."""

    def policy(self, request: Any) -> dict[str, Any]:
        if "Current page:" not in request.text:
            pages = _PAGE.findall(request.text)
            request = dataclasses.replace(request, text=f"History: {request.text}\nCurrent page: {pages[-1] if pages else ''}")
        return super().policy(request)


def conversation_oracle(centres: Any, frame: str, viewport: tuple[int, int], scale: float = 1.0) -> ConversationDemoOracle:
    """A picklable factory (StandInProcess)."""
    return ConversationDemoOracle(centres, frame_mapper(frame, viewport, scale))


def _full_bytes(calls: list[Any]) -> int:
    """The bytes of the same calls with every prompt stored in full (no shared prefixes, no runs)."""
    return sum(len(json.dumps({"prompt_ids": c.prompt_ids, "completion_ids": c.completion_ids, "logprobs": c.logprobs},
                              separators=(",", ":"))) + 1 for c in calls)


def _log_ms_per_call(calls: list[Any], tmp: Path, repeats: int = 5) -> float:
    """The client's CPU time to store one call (TokenLog: the shared prefix found, the line written), replaying
    the run's calls; the best of `repeats` passes."""
    from surfer.agent.tokens_record import TokenLog
    from surfer.models.backend import Tokens

    tokens = [Tokens(tuple(c.prompt_ids), tuple(c.completion_ids), tuple(c.logprobs), c.finish_reason, c.cached_tokens,
                     c.policy, c.policy_version, c.sampling) for c in calls]
    best = float("inf")
    for n in range(repeats):
        log = TokenLog(tmp / f"replay-{n}")
        log.path.parent.mkdir(parents=True, exist_ok=True)
        started = time.process_time()
        for call, token in zip(calls, tokens):
            log.add(call.call, call.step, call.role, call.accepted, token)
        best = min(best, time.process_time() - started)
    return 1000 * best / max(1, len(calls))


def _run_figures(run_dir: Path, steps: int) -> dict[str, Any]:
    from surfer.agent.tokens_record import TOKENS_FILE, read_calls

    calls = read_calls(run_dir)
    stored = (run_dir / TOKENS_FILE).stat().st_size if (run_dir / TOKENS_FILE).exists() else 0
    shots = sum(p.stat().st_size for p in (run_dir / "screenshots").glob("*"))
    per = max(1, steps)
    return {
        "steps": steps, "calls": len(calls),
        "ids_per_step": round(sum(len(c.prompt_ids) + len(c.completion_ids) for c in calls) / per),
        "tokens_bytes_per_step": round(stored / per), "full_bytes_per_step": round(_full_bytes(calls) / per),
        "screenshot_bytes_per_step": round(shots / per),
        "trajectory_bytes_per_step": round((run_dir / "trajectory.jsonl").stat().st_size / per),
        "store_ms_per_call": round(_log_ms_per_call(calls, run_dir), 3),
    }


async def _one_run(config: Any, site: Any, run_dir: Path, profile: Any = None) -> tuple[Any, float]:
    from surfer.agent.loop import Agent
    from surfer.apps.demo.oracle import DEMO_TASK

    agent = Agent(config, profile=profile)
    started = time.perf_counter()
    try:
        result = await agent.run(DEMO_TASK, site.url("index.html"), out_dir=run_dir)
    finally:
        await agent.aclose()
    return result, time.perf_counter() - started


async def measure_tokens(runs: int = 3, viewport: tuple[int, int] = (1280, 800), chains: bool = True) -> dict[str, Any]:
    from surfer.agent.config import AgentConfig, BrowserSettings
    from surfer.apps.demo.oracle import DEMO_SITE, measure_targets
    from surfer.apps.demo.static_site import StaticSite
    from surfer.models.profiles import get_profile
    from surfer.models.standin import StandInProcess
    from surfer.models.standin_tokenizer import PROFILE_TEMPLATES

    report: dict[str, Any] = {"benchmark": "tokens", "runs": runs, "viewport": list(viewport)}
    with StaticSite(DEMO_SITE) as site, tempfile.TemporaryDirectory() as tmp:
        centres = await measure_targets(site.base_url, viewport, 1.0)
        cost: dict[str, Any] = {}
        for layout in ("window", "conversation"):
            frame = get_profile("holotron").frame
            options = {"template": PROFILE_TEMPLATES["holotron"]}
            with StandInProcess(conversation_oracle, centres, frame, viewport, options=options) as server:
                rates: dict[str, list[float]] = {"off": [], "on": []}
                figures: list[dict[str, Any]] = []
                for i in range(2 * runs + 2):  # the first pair warms Chromium and the server up, uncounted
                    mode = ("off", "on")[i % 2]
                    config = AgentConfig(base_url=server.base_url, model=server.model, profile="holotron", prompt_layout=layout,
                                         record_tokens=mode == "on", browser=BrowserSettings(viewport=viewport))
                    run_dir = Path(tmp) / f"cost-{layout}-{i}"
                    result, seconds = await _one_run(config, site, run_dir)
                    if result.status != "success":
                        raise RuntimeError(f"the demo task ended {result.status}: {result.reason}")
                    if i >= 2:
                        rates[mode].append(result.steps / seconds)
                        if mode == "on":
                            figures.append(_run_figures(run_dir, result.steps))
            on, off = statistics.median(rates["on"]), statistics.median(rates["off"])
            cost[layout] = {
                "steps_per_second": {"on": round(on, 3), "off": round(off, 3), "ratio": round(on / off, 3)},
                **{key: round(statistics.median(f[key] for f in figures), 3 if key.endswith("_ms_per_call") else None)
                   for key in figures[0]},
            }
        report["capture"] = cost
        if chains:
            report["chains"] = await _chains(site, centres, viewport, Path(tmp))
    return report


async def _chains(site: Any, centres: Any, viewport: tuple[int, int], tmp: Path) -> list[dict[str, Any]]:
    """One run per profile, layout and reply_prefix (the profile's, and none): the share of calls that extend
    the one they follow, per role, and the first break of each role decoded."""
    from surfer.agent.config import AgentConfig, BrowserSettings
    from surfer.agent.tokens_record import chain_report, read_calls
    from surfer.models.profiles import get_profile
    from surfer.models.standin import StandInServer
    from surfer.models.standin_tokenizer import PROFILE_TEMPLATES

    rows = []
    for name in PROFILES:
        profile = get_profile(name)
        variants = [("profile's", profile)]
        if profile.reply_prefix:
            variants.append(("none", dataclasses.replace(profile, reply_prefix="")))
        with StandInServer(conversation_oracle(centres, profile.frame, viewport), template=PROFILE_TEMPLATES[name]) as server:
            for layout in LAYOUTS:
                for prefix, used in variants:
                    config = AgentConfig(base_url=server.base_url, model=server.model, profile=name, prompt_layout=layout,
                                         record_tokens=True, browser=BrowserSettings(viewport=viewport))
                    run_dir = tmp / f"chain-{name}-{layout}-{prefix}"
                    result, _ = await _one_run(config, site, run_dir, profile=used)
                    report = chain_report(read_calls(run_dir))
                    roles = {}
                    for role, entry in report.items():
                        first = entry["breaks"][0] if entry["breaks"] else None
                        roles[role] = {"calls": entry["calls"], "extend": entry["extends"], "share": entry["share"],
                                       "extend_prompt": entry["extends_prompt"],
                                       "first_break": None if first is None else {
                                           "expected": server.tokenizer.decode(first["expected"]),
                                           "found": server.tokenizer.decode(first["found"])}}
                    rows.append({"profile": name, "template": PROFILE_TEMPLATES[name], "layout": layout,
                                 "reply_prefix": prefix, "status": result.status, "steps": result.steps, "roles": roles})
    return rows


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("tokens")
    def tokens(
        runs: int = typer.Option(3, "--runs", min=1, help="Measured runs of the demo task with capture on, and as many off."),
        no_chains: bool = typer.Option(False, "--no-chains", help="Skip the chaining runs per profile and layout."),
        out: Optional[Path] = typer.Option(None, "--out", help="JSON file to write (default benchmarks/tokens-cpu/tokens.json)."),
    ) -> None:
        """Token capture on CPU: its cost on steps/s, bytes per step, and how each profile's calls chain."""
        report = run_command(measure_tokens(runs=runs, chains=not no_chains))
        target = out or Path("benchmarks/tokens-cpu/tokens.json")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(report, indent=2))
        for layout, figures in report["capture"].items():
            rate = figures["steps_per_second"]
            print(f"{layout:<13} steps/s on {rate['on']:.2f}  off {rate['off']:.2f}  ratio {rate['ratio']:.3f}   "
                  f"bytes/step: tokens.jsonl {figures['tokens_bytes_per_step']:,}  in full {figures['full_bytes_per_step']:,}  "
                  f"screenshots {figures['screenshot_bytes_per_step']:,}  ({figures['ids_per_step']:,} ids/step, "
                  f"{figures['store_ms_per_call']:.2f} ms CPU to store a call)")
        for row in report.get("chains", []):
            shares = "  ".join(f"{role} {entry['extend']}/{entry['calls']} (prompt {entry['extend_prompt']})"
                               for role, entry in row["roles"].items())
            print(f"{row['profile']:<9} {row['layout']:<13} reply_prefix {row['reply_prefix']:<9} {shares}")
        print(f"wrote {target}")
