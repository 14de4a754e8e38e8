"""`surfer export`: run directories → a training-ready dataset.

    surfer export out/ --format parquet --per call --out calls.parquet
    datasets.load_dataset("parquet", data_files="calls.parquet")

One record per step (`--per step`) or per model call (`--per call`), from
each run directory's trajectory.jsonl and result.json (and, for a batch
output directory, its results.jsonl: task id, sample group, metadata).
Runs recorded with `--record-tokens` add each call's tokens (tokens.jsonl) in
TRL's column names: `prompt_ids`, `completion_ids`, `logprobs`, with `policy`,
`policy_version`, and `processor` (what produced the image tokens); `--per
trajectory` gives one record per role's calls joined where they chain:
`prompt_ids`, `completion_ids`, `completion_mask` (1 where the model generated
the id), `logprobs` (0.0 where the mask is 0), `dropped` (stop ids a later
prompt left out: tokens_record.trajectory_views). Every record carries its
`reward` and its group (`group`, `group_index`, `group_mean`, `group_std`,
`advantage`: None where not recorded).
A person's actions after a take-over (human steps) are step records with
`actor: "human"` (agent steps: `actor: "agent"`), their `screenshot` the
screen before the action and `screenshot_after` the one after, no model
call: demonstrations a trainer may weight or drop by `actor`.
Images are referenced by absolute screenshot paths, runs by absolute `run_dir`s. Free-form objects
(actions, outcomes, request summaries, metadata) are JSON strings, so every
column has one type and the file loads with `datasets`, pandas or pyarrow.

Each call record carries its exact prompt (`messages`, chat format, with
images as `{"type": "image", "path": ...}` pointing at the screenshot files).

`--embed-images` (parquet) stores the screenshots themselves, as the `datasets`
Image feature with their bytes embedded: the file loads as PIL images with
no path back to the run directories, ready to push to a dataset hub.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from pathlib import Path
from typing import Any, Iterator, Literal, Optional

import typer

from surfer.core.errors import ConfigError

Per = Literal["step", "call", "trajectory"]
PERS = ("step", "call", "trajectory")
TIMING_KEYS = ("model", "action", "settle", "screenshot", "encode", "total", "overhead", "waiting")  # (waiting: a person)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def find_run_dirs(root: Path) -> list[Path]:
    """Run directories under `root` (itself included), skipping batch temp dirs."""
    found = {p.parent for p in root.rglob("result.json")} | {p.parent for p in root.rglob("trajectory.jsonl")}
    return sorted(d for d in found if not any(part.startswith(".tmp-") for part in d.relative_to(root).parts))


def _batch_index(root: Path) -> dict[Path, dict[str, Any]]:
    """results.jsonl records by resolved run directory (batch output dirs)."""
    from surfer.fleet.batch.results import read_results

    index: dict[Path, dict[str, Any]] = {}
    for results in {d / "results.jsonl" for d in (root, root.parent, root.parent.parent)}:
        for record in read_results(results, advantages="grpo"):  # final outcomes only, one per task; groups filled
            if record.get("run_dir"):
                index[(results.parent / record["run_dir"]).resolve()] = record
    return index


def _unfinished_batch_run(run_dir: Path, index: dict[Path, dict[str, Any]]) -> bool:
    """A batch's run directory with no final line in its results.jsonl (an attempt an older
    version published: the server went away, the batch was stopped): not a sample."""
    from surfer.fleet.batch.results import RUNS

    batch = run_dir.parent.parent if run_dir.parent.name == RUNS else None
    return batch is not None and (batch / "results.jsonl").exists() and run_dir.resolve() not in index


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def reward_of(result: dict[str, Any], batch: dict[str, Any]) -> float | None:
    """The task's reward: the recorded `reward` — None where the run got none (interrupted, ended by an error
    that is not the policy's, its reward function failed) — else (older runs, recording none) 1 for success
    and 0 for another final status; None for a run with no outcome (stopped, killed: no result.json)."""
    from surfer.fleet.batch.results import FINAL_STATUSES

    for source in (batch, result):
        if "reward" in source or source.get("reward_source"):
            reward = source.get("reward")
            return float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None
    status = batch.get("status") or result.get("status")
    return 1.0 if status == "success" else 0.0 if status in FINAL_STATUSES else None


def group_of(result: dict[str, Any], batch: dict[str, Any]) -> dict[str, Any]:
    """The sample's group: its id (the task's id before `--samples` expanded it), and where the run's
    result or results line records them, its index in the group, the group's reward mean and standard
    deviation and the sample's advantage (None where not recorded)."""
    recorded: dict[str, Any] = {}
    for source in (result, batch):
        if isinstance(source.get("group"), dict):
            recorded = {**recorded, **source["group"]}
    named = next((s["group"] for s in (batch, result) if isinstance(s.get("group"), str)), None)
    return {
        "id": recorded.get("id") or named or batch.get("id"),
        "index": recorded.get("index", batch.get("sample")),
        **{key: recorded.get(key) for key in ("mean", "std", "advantage")},
    }


def _run_fields(run_dir: Path, batch: dict[str, Any]) -> dict[str, Any]:
    result = _read_json(run_dir / "result.json")
    meta = _read_json(run_dir / "run.json")
    group = group_of(result, batch)
    return {
        "run_id": result.get("run_id") or meta.get("run_id") or run_dir.name,
        "id": batch.get("id") or run_dir.name,
        "group": group["id"] or run_dir.name,
        "group_index": group["index"], "group_mean": group["mean"], "group_std": group["std"],
        "advantage": group["advantage"],
        "sample": batch.get("sample"),
        "task": result.get("task") or meta.get("task") or batch.get("task") or "",
        "start_url": result.get("url") or meta.get("url"),
        "status": batch.get("status") or result.get("status") or "unknown",
        "reward": reward_of(result, batch),
        "final_answer": result.get("answer"),
        "metadata": _json(batch.get("metadata") or {}),
        "run_dir": str(run_dir.resolve()),  # absolute, as the screenshots are: the rows are read elsewhere
        "processor": _json((meta.get("config") or {}).get("processor")),
    }


def _prompt(request: dict[str, Any], shots: dict[int, str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The recorded prompt with image parts resolved to screenshot paths, and those paths."""
    messages, images = [], []
    for message in request.get("prompt") or []:
        content = []
        for part in message.get("content") or []:
            if part.get("type") == "image":
                path = shots.get(part.get("step"), "")
                images.append(path)
                content.append({"type": "image", "path": path})
            else:
                content.append({"type": "text", "text": part.get("text", "")})
        messages.append({"role": message.get("role"), "content": content})
    return messages, images


def _step_record(run: dict[str, Any], step: dict[str, Any], shots: dict[int, str], run_dir: Path) -> dict[str, Any]:
    calls = step.get("calls") or {}
    human = step.get("actor") == "human"

    def own(name: str) -> str | None:  # a human step's screenshots are its own (not the agent step's of its index)
        return str((run_dir / step[name]).resolve()) if step.get(name) else None

    accepted = {role: next((c for c in reversed(cs) if not c.get("error")), None) for role, cs in calls.items()}
    timings = step.get("timings") or {}
    usage = step.get("usage") or {}
    action = step.get("action")
    policy_request = ((calls.get("policy") or [{}])[0]).get("request") or {}
    served = accepted.get("policy") or next(iter(calls.get("policy") or []), None) or {}
    return {
        **run,
        "step": step.get("index"),
        "actor": "human" if human else "agent",
        "human_step": step.get("human"),
        "page_url": step.get("url", ""),
        "screenshot": own("screenshot") if human else shots.get(step.get("index")),
        "screenshot_after": own("screenshot_after") if human else None,
        "images": _prompt(policy_request, shots)[1],
        "thought": step.get("thought", ""),
        "notes": step.get("notes", ""),
        "action": _json(action),
        "action_type": action.get("type") if action else None,
        "points": [[p["x"], p["y"]] for p in step.get("points") or []],
        # the screenshot's geometry (pixel size, scale, CSS origin): CSS points -> the image's (the model's) frame,
        # which a human step has no localizer completion to give
        "screen": _json(step.get("screen") or None),
        "policy_completion": (accepted.get("policy") or {}).get("completion"),
        "localizer_completions": [c["completion"] for c in calls.get("localizer", []) if not c.get("error")],
        "validator_completion": (accepted.get("validator") or {}).get("completion"),
        "retries": sum(1 for cs in calls.values() for c in cs if c.get("error")),
        "outcome": _json(step.get("outcome") or {}),
        "error": step.get("error"),
        "timings": {k: float(timings.get(k, 0.0)) for k in TIMING_KEYS},
        "prompt_tokens": int(usage.get("prompt_tokens", 0)),
        "completion_tokens": int(usage.get("completion_tokens", 0)),
        "policy": served.get("model"),  # the model or adapter that answered the step's policy call
        "policy_version": served.get("policy_version"),
    }


TOKEN_COLUMNS = ("prompt_ids", "completion_ids", "logprobs", "policy", "policy_version", "finish_reason",
                 "cached_tokens", "extends_previous", "dropped_stop")


def _token_columns(tokens: Any, call: dict[str, Any]) -> dict[str, Any]:
    """A call's token columns (TRL's names) from its recorded CallTokens; None each where it has none."""
    if tokens is None:  # (the policy that answered is in trajectory.jsonl all the same)
        return {**dict.fromkeys(TOKEN_COLUMNS), "policy": call.get("model"), "policy_version": call.get("policy_version")}
    return {"prompt_ids": tokens.prompt_ids, "completion_ids": tokens.completion_ids, "logprobs": tokens.logprobs,
            "policy": tokens.policy, "policy_version": tokens.policy_version, "finish_reason": tokens.finish_reason,
            "cached_tokens": tokens.cached_tokens, "extends_previous": tokens.extends_previous,
            "dropped_stop": tokens.dropped_stop}


def _call_records(run: dict[str, Any], step: dict[str, Any], shots: dict[int, str],
                  tokens: dict[int, Any], numbers: Iterator[int]) -> Iterator[dict[str, Any]]:
    """The step's calls; `call` is the call's number in the run (tokens.jsonl's and the trajectory rows' `calls`),
    counted by `numbers` for runs that did not record it."""
    localized = iter(step.get("points") or [])
    for role, calls in (step.get("calls") or {}).items():
        for call in calls:
            request = call.get("request") or {}
            usage = call.get("usage") or {}
            accepted = not call.get("error")
            parsed: Any = None
            if accepted and role == "policy" and step.get("action"):
                parsed = {
                    k: v for k, v in step["action"].items() if k not in ("point", "to_point")
                }  # the localizer's part
            elif accepted and role == "localizer":
                point = next(localized, None)
                parsed = {"x": point["x"], "y": point["y"]} if point else None
            elif accepted and role == "validator":
                parsed = next((v for v in step.get("verdicts") or []), None)
            messages, images = _prompt(request, shots)
            summary = {k: v for k, v in request.items() if k != "prompt"}
            yield {
                **run,
                "step": step.get("index"),
                "call": call["call"] if "call" in call else next(numbers),
                "role": role,
                "messages": _json(messages),
                "images": images,
                "request": _json(summary),
                "completion": call.get("completion", ""),
                "accepted": accepted,
                "error": call.get("error"),
                "parsed": _json(parsed),
                "seconds": float(call.get("seconds", 0.0)),
                "prompt_tokens": int(usage.get("prompt_tokens", 0)),
                "completion_tokens": int(usage.get("completion_tokens", 0)),
                **_token_columns(tokens.get(call["call"]) if "call" in call else None, call),
            }


def _trajectory_records(run: dict[str, Any], steps: list[dict[str, Any]], shots: dict[int, str],
                        calls: list[Any]) -> Iterator[dict[str, Any]]:
    """One record per view of a role's calls joined where they chain (tokens_record.trajectory_views),
    with the screenshots of its last prompt (every image of the joined sequence)."""
    from surfer.agent.tokens_record import trajectory_views

    requests = {c["call"]: c.get("request") or {} for s in steps for cs in (s.get("calls") or {}).values()
                for c in cs if "call" in c}
    for view in trajectory_views(calls):
        yield {
            **run, "role": view["role"], "calls": view["calls"], "steps": view["steps"],
            "images": _prompt(requests.get(view["calls"][-1], {}), shots)[1],
            "prompt_ids": view["prompt_ids"], "completion_ids": view["completion_ids"],
            "completion_mask": view["completion_mask"], "logprobs": view["logprobs"], "dropped": view["dropped"],
            "policy": view["policy"], "policy_version": view["policy_version"],
        }


def export_records(root: str | Path, per: Per = "step") -> list[dict[str, Any]]:
    """The records of every run directory under `root`, ordered by group, sample, run and step
    (`trajectory`: by group, sample, run and the first call of each view)."""
    if per not in PERS:
        raise ConfigError(f"--per must be 'step', 'call' or 'trajectory', got {per!r}")
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"{root} is not a directory")
    index = _batch_index(root)
    runs = []
    for run_dir in find_run_dirs(root):
        if _unfinished_batch_run(run_dir, index):
            continue
        fields = _run_fields(run_dir, index.get(run_dir.resolve(), {}))
        runs.append(
            (fields["group"], fields["sample"] if fields["sample"] is not None else -1, fields["id"], run_dir, fields)
        )
    records: list[dict[str, Any]] = []
    for _group, _sample, _id, run_dir, fields in sorted(runs, key=lambda r: r[:3]):
        from surfer.agent.rundir import read_trajectory
        from surfer.agent.tokens_record import read_calls

        steps = read_trajectory(run_dir)
        shots = {s["index"]: str((run_dir / s["screenshot"]).resolve())
                 for s in steps if s.get("screenshot") and s.get("actor") != "human"}
        calls = read_calls(run_dir) if per != "step" else []
        if per == "trajectory":
            records.extend(_trajectory_records(fields, steps, shots, calls))
            continue
        tokens = {c.call: c for c in calls}
        numbers = itertools.count()
        for step in steps:
            if per == "step":
                records.append(_step_record(fields, step, shots, run_dir))
            else:
                records.extend(_call_records(fields, step, shots, tokens, numbers))
    if per == "trajectory" and runs and not records:
        raise ConfigError(f"no run under {root} recorded its tokens: --per trajectory needs runs made with --record-tokens")
    return records


def runs_without_tokens(root: str | Path) -> int:
    """How many finished runs under `root` took steps but recorded no token ids (made without --record-tokens):
    `--per trajectory` has no rows for them."""
    from surfer.agent.rundir import read_trajectory
    from surfer.agent.tokens_record import TOKENS_FILE

    index = _batch_index(Path(root))
    return sum(1 for run_dir in find_run_dirs(Path(root)) if not _unfinished_batch_run(run_dir, index)
               and not (run_dir / TOKENS_FILE).exists() and read_trajectory(run_dir))


def nothing_to_export(root: str | Path, per: Per = "step") -> str:
    """Why `root` gave no record, in one line: no run directory at all, only a
    batch's unfinished attempts, or runs that recorded no step."""
    from surfer.fleet.batch.results import ATTEMPTS_FILE, RESULTS_FILE

    root = Path(root)
    runs = find_run_dirs(root)
    attempts = root / ATTEMPTS_FILE
    unfinished = len(attempts.read_text(encoding="utf-8").splitlines()) if attempts.is_file() else 0
    if runs:
        what = f"its {len(runs)} run(s) recorded no step" if per == "step" else f"its {len(runs)} run(s) made no model call"
    elif unfinished:
        what = (f"a batch that finished no task ({unfinished} unfinished attempt(s) in {attempts}: "
                "run the batch again to finish them)")
    elif (root / RESULTS_FILE).exists():
        what = "a batch whose finished runs are missing from runs/"
    else:
        what = "no run directory (trajectory.jsonl, result.json) under it"
    return f"nothing to export from {root}: {what}; nothing was written"


IMAGE_COLUMNS = ("screenshot", "screenshot_after", "images")
HUB_INSTALL = "--embed-images needs pyarrow and datasets: pip install 'surfer-agent[hub]'"


def _image(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    return {"bytes": Path(path).read_bytes(), "path": Path(path).name}


def embed_images(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Screenshot paths replaced by {bytes, path: file name} (the `datasets` Image storage)."""
    embedded = []
    for record in records:
        record = dict(record)
        for name in ("screenshot", "screenshot_after"):
            if name in record:
                record[name] = _image(record[name])
        record["images"] = [_image(path) for path in record.get("images") or []]
        embedded.append(record)
    return embedded


def _image_table(records: list[dict[str, Any]]) -> Any:
    """A pyarrow table whose schema metadata declares the image columns as `datasets` Image features."""
    try:
        import datasets
        import pyarrow as pa
    except ImportError:
        raise ConfigError(HUB_INSTALL) from None
    table = pa.Table.from_pylist(embed_images(records))
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    for name in IMAGE_COLUMNS:  # empty lists and missing shots still get the image type
        if name in table.column_names:
            kind = pa.list_(image_type) if name == "images" else image_type
            table = table.set_column(table.column_names.index(name), name, table[name].cast(kind))
    features = datasets.Features.from_arrow_schema(table.schema)
    for name in ("screenshot", "screenshot_after"):
        if name in features:
            features[name] = datasets.Image()
    listing = getattr(datasets, "List", None) or datasets.Sequence  # datasets < 4 has Sequence only
    features["images"] = listing(datasets.Image())
    return table.cast(features.arrow_schema)


def write_records(records: list[dict[str, Any]], out: str | Path, fmt: str, embed: bool = False) -> Path:
    if embed and fmt != "parquet":
        raise ConfigError("--embed-images is for --format parquet")
    if fmt not in ("jsonl", "parquet"):
        raise ConfigError(f"--format must be 'jsonl' or 'parquet', got {fmt!r}")
    out = Path(out)
    if out.is_dir():
        raise ConfigError(f"--out {out} is a directory: name the file to write, e.g. {out / ('export.' + fmt)}")
    tmp = out.with_name(out.name + ".tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "jsonl":
            with tmp.open("w", encoding="utf-8") as handle:
                for record in records:
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            try:
                import pyarrow as pa
                import pyarrow.parquet as pq
            except ImportError:
                raise ConfigError("parquet export needs pyarrow: pip install 'surfer-agent[export]'") from None
            pq.write_table(_image_table(records) if embed else pa.Table.from_pylist(records), tmp)
        tmp.replace(out)
    except OSError as exc:  # a folder in the way, no permission, a full disk: said in one line, no partial file
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise ConfigError(f"cannot write {out}: {exc.strerror or exc}") from None
    return out


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export(
        runs_dir: Path = typer.Argument(..., help="A batch output directory, a runs/ folder or one run directory."),
        fmt: str = typer.Option("jsonl", "--format", help="jsonl or parquet (needs the 'export' extra)."),
        per: str = typer.Option("step", "--per", help="One record per 'step', per model 'call' (with its token ids where "
                                "recorded), or per 'trajectory': a role's calls joined where they chain, token for token "
                                "(runs recorded with --record-tokens)."),
        out: Optional[Path] = typer.Option(
            None, "--out", help="File to write (default <RUNS_DIR>/export-<per>.<format>)."
        ),
        embed: bool = typer.Option(
            False, "--embed-images", help="Parquet: store the screenshots' bytes (datasets Image feature), not their paths."
        ),
    ) -> None:
        """Export run directories as a dataset (jsonl or parquet), loadable with `datasets`."""
        from surfer.apps.exit_codes import EXIT_USAGE

        from surfer.apps.exit_codes import EXIT_FAILED

        try:
            records = export_records(runs_dir, per)  # type: ignore[arg-type]
            if not records:  # an empty dataset is not an export: say why, write nothing
                typer.echo(f"error: {nothing_to_export(runs_dir, per)}", err=True)  # type: ignore[arg-type]
                raise typer.Exit(EXIT_FAILED)
            target = write_records(records, out or runs_dir / f"export-{per}.{fmt}", fmt, embed)
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_USAGE) from None
        runs = len({r["run_dir"] for r in records})
        left = runs_without_tokens(runs_dir) if per == "trajectory" else 0
        typer.echo(f"wrote {len(records)} {per} record(s) from {runs} run(s) to {target}"
                   + (f"; {left} run(s) recorded without --record-tokens are not in it" if left else ""))
