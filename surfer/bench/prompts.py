"""`surfer bench prompts [RUNS]`: what surfer would send the GPU, counted on CPU.

    surfer bench prompts                         # the recorded set shipped for `--replay demo`
    surfer bench prompts out/ --json prompts.json --image-budget 4000
    surfer bench prompts --tokenizer holo2=models/holo2

Replays recorded runs (a batch output, a `runs/` folder or run directories)
through every profile, prompt layout and role-continuation mode: each step's
policy request, one localizer request per target of the recorded action, and
a validator request for an answer, built by the roles themselves. With
continuation on, the localizer and validator continue the policy's request
(its messages, its reply rebuilt from the recorded thought, notes and action,
then their instruction); the reply is counted as uncached, since a chat
template may render it differently from the tokens the model generated. Per role it counts per agent
step the prompt tokens, the tokens that repeat a prefix of an earlier request
of the same session (what a prefix cache can reuse; whole 16-token blocks,
as vLLM caches them) and the uncached tokens left, and the screenshots and
image tokens per request.

Images are counted with each profile's image-token rule (ImagePolicy.image_tokens:
exact for the Qwen-VL patch rule and Nemotron's tiling, OpenAI's published
rule for the generic profile). Text is counted with a tokenizer when
`--tokenizer PROFILE=DIR` names a model directory with a tokenizer.json
(e.g. one written by `surfer bench gpu make-model`), else estimated at
4 characters per token (the usual figure for English BPE vocabularies); the
chat template's few tokens per message are counted as a 4-token header.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

import typer

from surfer.core.errors import ConfigError

BLOCK = 16  # vLLM caches prefixes in whole blocks of this many tokens
CHARS_PER_TOKEN = 4
HEADER_TOKENS = 4
ROLES = ("policy", "localizer", "validator")


@dataclass(frozen=True)
class RecordedStep:
    index: int
    screenshot: Path
    width: int
    height: int
    scale: float
    url: str
    title: str
    notes: str
    action: dict[str, Any] | None
    outcome: str
    thought: str = ""


@dataclass(frozen=True)
class RecordedRun:
    name: str
    task: str
    steps: tuple[RecordedStep, ...]


def lengthened(run: RecordedRun, steps: int | None) -> RecordedRun:
    """`run` as a session of `steps` steps: its steps played in order, then again from
    the first (renumbered), so that short recordings show a long session's steady state."""
    if not steps or steps <= len(run.steps):
        return run
    import dataclasses

    played = [dataclasses.replace(run.steps[k % len(run.steps)], index=k + 1) for k in range(steps)]
    for k, step in enumerate(played[:-1]):  # an answer before the end would have ended the run
        if step.action and step.action.get("type") == "answer":
            played[k] = dataclasses.replace(step, action={"type": "wait", "seconds": 1}, outcome="waited 1 s")
    return RecordedRun(run.name, run.task, tuple(played))


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Run directories under each path: itself, its `runs/` folder, or its subdirectories."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            raise ConfigError(f"{path} is not a directory (give a batch output, a runs/ folder or run directories)")
        if (path / "trajectory.jsonl").is_file():
            found.append(path)
            continue
        base = path / "runs" if (path / "runs").is_dir() else path
        runs = sorted(p for p in base.iterdir() if p.is_dir() and (p / "trajectory.jsonl").is_file())
        if not runs:
            raise ConfigError(f"{path} holds no run directories (trajectory.jsonl + screenshots/)")
        found += runs
    return found


def load_run(run_dir: Path) -> RecordedRun:
    meta_path = run_dir / "run.json"
    task = ""
    if meta_path.is_file():
        task = json.loads(meta_path.read_text(encoding="utf-8")).get("task", "")
    from surfer.tools.replay import recorded_steps

    steps = []
    for number, step, path in recorded_steps(run_dir):
        screen = step.get("screen") or {}
        if not screen.get("width") or not screen.get("height"):
            raise ConfigError(f"{run_dir}/trajectory.jsonl:{number}: the step has no screen size")
        outcome = step.get("outcome") or {}
        steps.append(RecordedStep(
            int(step.get("index", number)), path, int(screen["width"]), int(screen["height"]),
            float(screen.get("scale", 1.0)), step.get("url", ""), step.get("title", ""), step.get("notes") or "",
            step.get("action") if isinstance(step.get("action"), dict) else None,
            outcome.get("detail") or ("error: " + str(step["error"]) if step.get("error") else "done"),
            step.get("thought") or "",
        ))
    if not steps:
        raise ConfigError(f"{run_dir} has no recorded steps with screenshots")
    return RecordedRun(run_dir.name, task or "(task not recorded)", tuple(steps))


# -- counting -----------------------------------------------------------------------------


class TextCounter:
    """Text to units for prefix matching: tokenizer ids, or characters weighing 1/4 token."""

    def __init__(self, tokenizer_dir: str | None = None) -> None:
        self.tokenizer = None
        self.source = f"estimate ({CHARS_PER_TOKEN} characters per token)"
        if tokenizer_dir:
            from tokenizers import Tokenizer

            path = Path(tokenizer_dir) / "tokenizer.json"
            if not path.is_file():
                raise ConfigError(f"--tokenizer: {path} does not exist")
            try:
                self.tokenizer = Tokenizer.from_file(str(path))
            except Exception as exc:  # noqa: BLE001 - the tokenizers library raises plain Exceptions
                raise ConfigError(f"--tokenizer: {path} is not a tokenizer ({exc})") from None
            self.source = f"tokenizer {path}"

    def units(self, text: str) -> list[tuple[Any, float]]:
        if self.tokenizer is not None:
            return [(i, 1.0) for i in self.tokenizer.encode(text, add_special_tokens=False).ids]
        return [(c, 1.0 / CHARS_PER_TOKEN) for c in text]


def request_units(messages: list[Any], counter: TextCounter, image_tokens: Any) -> tuple[list[tuple[Any, float]], int, int]:
    """(units, screenshots, image tokens) of one request's messages."""
    from surfer.models.backend import ImagePart

    units: list[tuple[Any, float]] = []
    images = image_total = 0
    for message in messages:
        units.append((("header", message.role), float(HEADER_TOKENS)))
        for part in message.content:
            if isinstance(part, ImagePart):
                count = image_tokens(part)
                units.append((("image", hashlib.sha1(part.data).hexdigest()), float(count)))
                images += 1
                image_total += count
            else:
                units += counter.units(part.text)
    return units, images, image_total


Units = list[tuple[Any, float]]
ENGINES = ("vllm", "sglang")
SGLANG_CHUNK = 8192  # SGLang's chunked prefill (its default on an H100): a state is kept at each chunk's end


def reusable_tokens(units: Units, earlier: list[tuple[Units, Units]], align_block: int | None, engine: str = "vllm",
                    hybrid: bool = False) -> float:
    """What a prefix cache can reuse of a request after the session's `earlier` requests ((prompt, reply) each).

    vLLM: a transformer the longest common prefix in whole 16-token blocks; a hybrid under the Mamba `align`
    mode only up to a Mamba state, one per earlier request at the end of its last whole block (one prefill chunk
    per request; more chunks would leave more states, so this is the least it reuses). Replies never count: vLLM
    keeps a request's generated tokens, but a chat template may render them differently when a later request
    repeats them.

    SGLang: its radix cache matches to the token. A transformer: the longest common prefix of any earlier
    request, its reply included (the rendered reply assumed to be the tokens generated). A hybrid (the Mamba
    radix cache, `no_buffer`): only up to a Mamba state, kept where an earlier request ended (its prompt and
    reply) and at the end of each prefill chunk of its prompt."""
    if engine == "sglang":
        best = 0.0
        for prompt, reply in earlier:
            whole = prompt + reply
            common = _common(units, whole)
            if not hybrid:
                best = max(best, common)
                continue
            length = sum(w for _, w in whole)
            if common >= length:
                best = max(best, length)
            else:
                best = max(best, (min(common, sum(w for _, w in prompt)) // SGLANG_CHUNK) * SGLANG_CHUNK)
        return best
    if not align_block:
        return (max((_common(units, prompt) for prompt, _ in earlier), default=0.0) // BLOCK) * BLOCK
    best = 0.0
    for prompt, _ in earlier:
        state = (sum(w for _, w in prompt) // align_block) * align_block
        if state > best and _common(units, prompt) >= state:
            best = state
    return best


def _common(a: list[tuple[Any, float]], b: list[tuple[Any, float]]) -> float:
    total = 0.0
    for x, y in zip(a, b):
        if x[0] != y[0]:
            break
        total += x[1]
    return total


@dataclass
class Tally:
    requests: int = 0
    prompt: float = 0.0
    reusable: float = 0.0
    screenshots: int = 0
    image_tokens: int = 0


def policy_reply(step: RecordedStep) -> str:
    """The policy's reply of a recorded step, as the model would have written it."""
    return json.dumps({"thought": step.thought, "notes": step.notes, "action": step.action})


# What the localizer and validator answer (a recorded step keeps only the policy's reply): their length is what counts.
LOCALIZER_REPLY = json.dumps({"x": 500, "y": 500})
VALIDATOR_REPLY = json.dumps({"verdict": "accept", "reasons": "the screen shows it"})


def session_requests(run: RecordedRun, profile: Any, layout_name: str, budget: int | None,
                     continuation: bool = False) -> list[tuple[str, list[Any], str]]:
    """(role, messages, reply) for every request one recorded run would make, in order; with
    `continuation`, the localizer's and validator's requests continue the policy's."""
    from surfer.agent.layouts import Layout
    from surfer.agent.memory import Memory, Turn
    from surfer.agent.roles import Localizer, Policy, RoleClient, Validator
    from surfer.core.actions import ACTION_ADAPTER, Answer, targets_of
    from surfer.core.coordinates import ImageGeometry, Size
    from surfer.core.observation import Observation, Screenshot
    from surfer.models.imaging import PreparedImage

    layout = Layout(layout_name, profile.max_images)
    per_image = budget // layout.max_images if budget else None
    clients = {role: RoleClient(role, None, profile) for role in ROLES}  # type: ignore[arg-type]  # never asked
    policy, localizer, validator = Policy(clients["policy"], layout), Localizer(clients["localizer"]), Validator(clients["validator"])
    memory = Memory(run.task, max_images=layout.memory_images)
    out: list[tuple[str, list[Any], str]] = []
    for step in run.steps:
        size = Size(step.width, step.height)
        sent = profile.image.target_size(size, per_image)
        data = step.screenshot.read_bytes()
        image = PreparedImage(data, "image/jpeg", ImageGeometry(sent=sent, screenshot=size, scale=step.scale), step=step.index)
        memory.add_image(image)
        observation = Observation(Screenshot(data, "image/jpeg", size, step.scale), url=step.url, title=step.title)
        messages = policy.messages(memory, observation)
        out.append(("policy", messages, policy_reply(step)))
        memory.keep_turn(Turn(tuple(messages), profile.reply_prefix + policy_reply(step)))  # (shown again next)
        turn = memory.policy_turn if continuation else None
        if step.notes:
            memory.add_note(step.notes, own=True)
        if step.action is None:
            memory.add_history(step.index, "(no action)", step.outcome)
            continue
        action = ACTION_ADAPTER.validate_python(step.action)
        if isinstance(action, Answer):
            out.append(("validator", validator.messages(run.task, action.text, layout.validator_images(memory), turn),
                        VALIDATOR_REPLY))
            memory.add_history(step.index, f"answer({action.text!r})", "accepted by the validator")
            continue
        for target in targets_of(action):
            out.append(("localizer", localizer.messages(target, image, turn), LOCALIZER_REPLY))
        memory.add_history(step.index, action.describe(), step.outcome)
    return out


def count_runs(runs: list[RecordedRun], profile: Any, layout: str, budget: int | None,
               counter: TextCounter, continuation: bool = False, align_block: int | None = None,
               engine: str = "vllm") -> tuple[int, dict[str, Tally]]:
    """(agent steps, tallies per role) over `runs`, each run its own session, the reuse counted as `engine`
    allows (reusable_tokens); `align_block`: on vLLM, a hybrid's Mamba `align` block (None: 16-token blocks)."""
    from surfer.agent.layouts import Layout
    from surfer.core.coordinates import Size

    per_image = budget // Layout(layout, profile.max_images).max_images if budget else None
    tallies = {role: Tally() for role in ROLES}
    steps = 0
    for run in runs:
        steps += len(run.steps)
        sent_of = {s.screenshot.read_bytes(): profile.image.target_size(Size(s.width, s.height), per_image) for s in run.steps}

        def tokens(part: Any) -> int:
            return int(profile.image.image_tokens(sent_of[part.data]))

        earlier: list[tuple[Units, Units]] = []
        for role, messages, reply in session_requests(run, profile, layout, budget, continuation):
            units, shots, image_total = request_units(messages, counter, tokens)
            tally = tallies[role]
            tally.requests += 1
            tally.prompt += sum(w for _, w in units)
            tally.reusable += reusable_tokens(units, earlier, align_block, engine, profile.serving.hybrid)
            tally.screenshots += shots
            tally.image_tokens += image_total
            # what the engine holds after it: the prompt, its generation prompt (the assistant's header and what
            # the template adds after it, the profile's reply_prefix), then the reply generated
            earlier.append((units, [(("header", "assistant"), float(HEADER_TOKENS)), *counter.units(profile.reply_prefix + reply)]))
    return steps, tallies


def reuse_rule(profile: Any, engine: str, align: int | None) -> str:
    """How `engine` reuses `profile`'s prefix, in words (a row's `prefix_reuse`)."""
    if engine == "sglang":
        return ("mamba radix: where an earlier request ended, or a prefill chunk" if profile.serving.hybrid
                else "radix: to the token")
    return f"mamba align {align}" if align else f"{BLOCK}-token blocks"


def bench_rows(runs: list[RecordedRun], profiles: list[str], layouts: list[str], budgets: list[int | None],
               tokenizers: dict[str, str], continuations: tuple[bool, ...] = (False, True),
               hybrid_align: bool = True, engines: tuple[str, ...] = ("vllm",)) -> list[dict[str, Any]]:
    """One row per engine, profile, layout, role-continuation mode, image budget and role (plus role "all")."""
    from surfer.models.profiles import get_profile

    rows: list[dict[str, Any]] = []
    for engine, name in [(e, n) for e in engines for n in profiles]:
        profile = get_profile(name)
        counter = TextCounter(tokenizers.get(name))
        align = profile.serving.align_block if hybrid_align and engine == "vllm" else None
        reuse = reuse_rule(profile, engine, align)
        for budget in budgets:
            for layout, continuation in [(lay, c) for lay in layouts for c in continuations]:
                steps, tallies = count_runs(runs, profile, layout, budget, counter, continuation, align, engine)
                total = Tally()
                for role in ROLES:
                    t = tallies[role]
                    for key in ("requests", "prompt", "reusable", "screenshots", "image_tokens"):
                        setattr(total, key, getattr(total, key) + getattr(t, key))
                for role, t in [*tallies.items(), ("all", total)]:
                    if not t.requests:
                        continue
                    rows.append({
                        "engine": engine, "profile": name, "layout": layout, "continuation": continuation, "image_budget": budget,
                        "role": role, "steps": steps, "prefix_reuse": reuse,
                        "requests": t.requests, "text": counter.source,
                        "prompt_tokens_per_step": round(t.prompt / steps, 1),
                        "reusable_tokens_per_step": round(t.reusable / steps, 1),
                        "uncached_tokens_per_step": round((t.prompt - t.reusable) / steps, 1),
                        "screenshots_per_request": round(t.screenshots / t.requests, 3),
                        "image_tokens_per_request": round(t.image_tokens / t.requests, 1),
                    })
    return rows


def mode(row: dict[str, Any]) -> str:
    """A row's request mode: its layout, with "+continuation" when the roles continue the policy."""
    return row["layout"] + ("+continuation" if row.get("continuation") else "")


def ratios(rows: list[dict[str, Any]], reference: str = "window") -> list[dict[str, Any]]:
    """Uncached tokens per step of `reference` (that layout, separate role requests, on vLLM: today's
    requests on today's engine) over each other mode's on each engine, per profile, budget and role."""
    base = {(r["profile"], r["image_budget"], r["role"]): r for r in rows
            if mode(r) == reference and r.get("engine", "vllm") == "vllm"}
    out = []
    for row in rows:
        ref = base.get((row["profile"], row["image_budget"], row["role"]))
        if ref is None or row is ref or not row["uncached_tokens_per_step"]:
            continue
        out.append({"engine": row.get("engine", "vllm"), "profile": row["profile"], "image_budget": row["image_budget"],
                    "role": row["role"],
                    "layout": row["layout"], "continuation": row.get("continuation", False), "mode": mode(row),
                    "uncached_reduction": round(ref["uncached_tokens_per_step"] / row["uncached_tokens_per_step"], 2),
                    "screenshots_per_request": [ref["screenshots_per_request"], row["screenshots_per_request"]]})
    return out


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| engine | profile | layout | continuation | image budget | role | prompt tok/step | reusable tok/step | "
            "uncached tok/step | screenshots/request | image tok/request |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(
            f"| {r.get('engine', 'vllm')} | {r['profile']} | {r['layout']} | {'on' if r.get('continuation') else 'off'} | {r['image_budget'] or '-'} | "
            f"{r['role']} | {r['prompt_tokens_per_step']:.0f} | "
            f"{r['reusable_tokens_per_step']:.0f} | {r['uncached_tokens_per_step']:.0f} | "
            f"{r['screenshots_per_request']:.2f} | {r['image_tokens_per_request']:.0f} |"
        )
    return "\n".join(lines)


def parse_switch(values: list[str] | None, name: str) -> tuple[bool, ...]:
    """`on` / `off` values of a repeatable (or comma-separated) option; default both, off first."""
    words = [w.strip().lower() for v in (values or ["off,on"]) for w in v.split(",") if w.strip()]
    table = {"on": True, "off": False, "true": True, "false": False, "1": True, "0": False}
    bad = [w for w in words if w not in table]
    if bad:
        raise ConfigError(f"{name} takes on/off, got {bad[0]!r}")
    return tuple(dict.fromkeys(table[w] for w in words))


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("prompts")
    def prompts_command(
        runs: Optional[list[Path]] = typer.Argument(
            None, help="A batch output, a runs/ folder or run directories (default: the recorded set of --replay demo)."),
        profile: Optional[list[str]] = typer.Option(None, "--profile", help="Profiles to count (repeatable; default: all)."),
        layout: Optional[list[str]] = typer.Option(None, "--layout", help="Layouts to count (repeatable; default: all)."),
        image_budget: Optional[list[int]] = typer.Option(
            None, "--image-budget", help="Also count with this cap on image tokens per request (repeatable)."),
        tokenizer: Optional[list[str]] = typer.Option(
            None, "--tokenizer", help="PROFILE=DIR: count that profile's text with DIR/tokenizer.json (repeatable)."),
        json_out: Optional[Path] = typer.Option(None, "--json", help="Write the rows as a JSON list."),
        role: Optional[list[str]] = typer.Option(None, "--role", help="Roles to print (default: all, and the sum 'all')."),
        steps: Optional[int] = typer.Option(
            None, "--steps", help="Replay each run as a session of this many steps (its steps again from the first)."),
        continuation: Optional[list[str]] = typer.Option(
            None, "--continuation", help="Role continuation modes to count: on, off or on,off (default both)."),
        hybrid_align: bool = typer.Option(
            True, "--hybrid-align/--no-hybrid-align",
            help="On vLLM, count a hybrid profile's reuse as its Mamba `align` cache allows (Holotron: only up to a "
                 "1,312-token block boundary); off: as a transformer's (16-token blocks)."),
        engine: str = typer.Option(
            "vllm", "--engine", help="Count the reuse as these engines allow, comma-separated: vllm (block grids), "
            "sglang (its radix cache: to the token; a hybrid's where an earlier request ended)."),
    ) -> None:
        """Count prompt, reusable and uncached tokens per step for every profile and layout (CPU only)."""
        from surfer.agent.layouts import LAYOUTS, check_layout
        from surfer.apps.options import DEMO_RECORDINGS
        from surfer.models.profiles import PROFILES, get_profile

        try:
            chosen_layouts = [check_layout(name) for name in (layout or LAYOUTS)]
            chosen_profiles = [get_profile(name).name for name in (profile or PROFILES)]
            tokenizers: dict[str, str] = {}
            for item in tokenizer or []:
                name, _, where = item.partition("=")
                if not where:
                    raise ConfigError(f"--tokenizer takes PROFILE=DIR, got {item!r}")
                tokenizers[get_profile(name).name] = where
            budgets: list[int | None] = [None, *(image_budget or [])]
            if any(b is not None and b < 64 for b in budgets):
                raise ConfigError("--image-budget must be at least 64 tokens")
            if steps is not None and steps < 1:
                raise ConfigError("--steps must be at least 1")
            unknown = [name for name in role or [] if name not in (*ROLES, "all")]
            if unknown:
                raise ConfigError(f"unknown role {unknown[0]!r} for --role; choose one of: {', '.join((*ROLES, 'all'))}")
            recorded = [lengthened(load_run(d), steps) for d in find_run_dirs(runs or [DEMO_RECORDINGS])]
            modes = parse_switch(continuation, "--continuation")
            engines = tuple(dict.fromkeys(e.strip() for e in engine.split(",") if e.strip()))
            if not engines or any(e not in ENGINES for e in engines):
                raise ConfigError(f"--engine takes {' or '.join(ENGINES)} (comma-separated), got {engine!r}")
            rows = bench_rows(recorded, chosen_profiles, chosen_layouts, budgets, tokenizers, modes, hybrid_align, engines)
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        shown = [r for r in rows if not role or r["role"] in role]
        typer.echo(f"{len(recorded)} recorded run(s), {sum(len(r.steps) for r in recorded)} steps; "
                   f"text: {', '.join(sorted({r['text'] for r in rows}))}")
        reuse = dict.fromkeys(f"{r['profile']} on {r['engine']}: {r['prefix_reuse']}" for r in rows)
        typer.echo(f"prefix reuse counted as: {', '.join(reuse)}")
        typer.echo(table(shown))
        for ratio in ratios(rows):
            if ratio["role"] in ("policy", "all"):
                typer.echo(f"{ratio['profile']} budget {ratio['image_budget'] or '-'} {ratio['role']}: window on vllm / "
                           f"{ratio['mode']} on {ratio['engine']} "
                           f"uncached = {ratio['uncached_reduction']}x (screenshots/request {ratio['screenshots_per_request'][0]} -> "
                           f"{ratio['screenshots_per_request'][1]})")
        if json_out:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(rows, indent=2) + "\n")
            typer.echo(f"rows: {json_out}")
