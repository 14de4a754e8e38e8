"""The tasks file of a batch: one task per JSON line, samples, run-directory names."""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from pathlib import Path
from typing import Any, Iterable, Optional


from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from surfer.agent.config import AgentConfig
from surfer.core.errors import ConfigError
from surfer.qa.suite import Expectation


class BatchTask(BaseModel):
    """One line of a tasks file."""

    model_config = ConfigDict(extra="forbid")
    task: str = Field(min_length=1, description="What the agent should do, in plain language (required).")
    url: Optional[str] = Field(default=None, description="Page to open first.")
    id: Optional[str] = Field(
        default=None, min_length=1,
        description="Unique id (default `line-<n>`; give ids if you edit the file between runs).",
    )
    max_steps: Optional[int] = Field(default=None, ge=1, description="This task's step limit (default: the batch's).")
    max_seconds: Optional[float] = Field(
        default=None, gt=0, description="This task's time limit in seconds (default: the batch's).",
    )
    storage_state: Optional[str] = Field(
        default=None, min_length=1, description="A Playwright storage-state file this task starts signed in with "
        "(relative to the tasks file's folder); overrides --storage-state.",
    )
    answers: Optional[Any] = Field(
        default=None, description="Replies to the agent's questions, by question pattern (a regular expression): "
        "{\"pattern\": \"reply\"} or a list of {\"pattern\", \"answer\", \"secret\"}; a question none matches ends "
        "the task needs_input. Overrides --answers.",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Anything; copied to the task's results line (`replay` names a recording).",
    )
    reward: Optional[str] = Field(
        default=None, min_length=1, description='This task\'s reward function, "module:function" or "file.py:function" '
        "(overrides the configuration's `reward`).",
    )
    expect: list[Expectation] = Field(
        default_factory=list, description="Expectations checked on the final page, as in QA suites (a sentence for "
        "the validator, {text: ...}, {url: ...}, {answer: ...}): the reward is 1 when all are met, else 0.",
    )
    # set when expanded into samples
    group: Optional[str] = Field(default=None, description="Set by `--samples` (not in a tasks file): the id the samples share.")
    sample: Optional[int] = Field(default=None, description="Set by `--samples` (not in a tasks file): the sample number.")
    samples: Optional[int] = Field(default=None, description="Set by `--samples` (not in a tasks file): how many samples the group has.")

    @field_validator("task")
    @classmethod
    def _says_something(cls, task: str) -> str:
        if not task.strip():
            raise ValueError("the task is blank: say what the agent should do")
        return task

    @model_validator(mode="after")
    def _one_reward(self) -> "BatchTask":
        if self.reward and self.expect:
            raise ValueError("a task takes a reward function or expectations, not both")
        return self


def load_tasks(path: str | Path, samples: int = 1) -> list[BatchTask]:
    """Parse a tasks file (JSON lines; blank lines and # comments skipped).
    Tasks without an id get `line-<n>`; with samples > 1 each task becomes
    `<id>#0 .. <id>#<samples-1>`, grouped by `group`."""
    if samples < 1:
        raise ConfigError(f"--samples must be at least 1, got {samples}")
    path = Path(path)
    try:
        data = path.read_bytes()
        # a byte order mark, as Windows editors write it; UTF-16 is what PowerShell's `>` writes
        lines = data.decode("utf-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig").splitlines()
    except FileNotFoundError:
        raise ConfigError(f"tasks file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read tasks file {path}: {exc}") from None
    tasks: list[BatchTask] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            item = json.loads(line)
            if not isinstance(item, dict):
                raise ConfigError(f"{path}:{number}: {_not_an_object(item)}{JSON_LINES}")
            given = sorted(SET_BY_SAMPLES & item.keys())  # (a line's own `sample` made a group of one with index 3)
            if given:
                raise ConfigError(f"{path}:{number}: {given[0]} is set by --samples, not by a tasks file (metadata "
                                  "holds anything of your own)")
            task = BatchTask.model_validate(item)
        except json.JSONDecodeError as exc:  # a first line that is no JSON: likely another format (a JSON array, YAML, CSV)
            kind = "" if tasks else _other_format(path, line)
            raise ConfigError(f"{path}:{number}: not valid JSON ({exc.msg}){kind}{'' if tasks else JSON_LINES}") from None
        except ValidationError as exc:
            raise ConfigError(f"{path}:{number}: {_problems(exc)}") from None
        task.id = task.id or f"line-{number}"
        if task.answers is not None:
            from surfer.agent.questions import PresetAnswers

            PresetAnswers.of(task.answers, f"{path}:{number}: answers")  # a bad pattern is a usage error now, not later
        if task.storage_state:
            task.storage_state = str(path.parent / Path(task.storage_state).expanduser())  # (an absolute one stays)
        if task.id in seen:
            raise ConfigError(f"{path}:{number}: duplicate task id {task.id!r}")
        seen.add(task.id)
        tasks.extend(expand_samples(task, samples))
    if not tasks:
        raise ConfigError(f"tasks file {path} holds no tasks")
    return tasks


def tasks_of(items: Iterable[BatchTask | dict[str, Any] | str], samples: int = 1) -> list[BatchTask]:
    """Tasks given as Python objects (a task's text, a dict of a tasks file's fields, a BatchTask), checked
    as a tasks file is: a bad one or an id given twice is a ConfigError naming it. Tasks without an id get
    `task-<n>`."""
    if samples < 1:
        raise ConfigError(f"--samples must be at least 1, got {samples}")
    tasks: list[BatchTask] = []
    seen: set[str] = set()
    for number, item in enumerate(items, 1):
        if not isinstance(item, (str, dict, BatchTask)):  # (it said "line: Input should be a valid dictionary ...")
            raise ConfigError(f"task {number}: {_not_an_object(item)}: give its text, a dict of a tasks file's fields "
                              "or a BatchTask")
        try:
            task = BatchTask(task=item) if isinstance(item, str) else BatchTask.model_validate(item)
        except ValidationError as exc:
            raise ConfigError(f"task {number}: {_problems(exc)}") from None
        task = task.model_copy(update={"id": task.id or f"task-{number}"})
        if task.id in seen:
            raise ConfigError(f"task {number}: duplicate task id {task.id!r}")
        seen.add(task.id)
        tasks.extend(expand_samples(task, samples))
    return tasks


SET_BY_SAMPLES = frozenset({"group", "sample", "samples"})
JSON_LINES = '; a tasks file holds one JSON object per line (JSON lines), {"task": ...}'


def _other_format(path: Path | str, line: str) -> str:
    """The format a tasks file that is not JSON lines seems to be in, as ' (this looks like CSV)', or ''."""
    suffix, text = Path(path).suffix.lower(), line.strip()
    if suffix in (".yaml", ".yml") or text.startswith("- ") or (":" in text and not text.startswith(("{", "["))):
        return " (this looks like YAML)"
    if suffix in (".csv", ".tsv") or ("," in text or "\t" in text) and not text.startswith(("{", "[")):
        return " (this looks like CSV)"
    return ""


def _not_an_object(item: Any) -> str:
    if isinstance(item, list):  # (tasks kept as one JSON array)
        return "a JSON array, not a task (`jq -c '.[]' FILE > tasks.jsonl` writes an array's tasks one per line)"
    return f"{json.dumps(item, default=repr)[:60]}, not a task"


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'line'}: {_problem(e)}" for e in exc.errors())


def _problem(error: Any) -> str:
    """What is wrong with one field, in a task line's terms (pydantic's "Extra inputs are not permitted": a
    misspelt or unknown key)."""
    if error["type"] == "extra_forbidden" and len(error["loc"]) == 1:
        from surfer.agent.config_errors import did_you_mean

        fields = [name for name in BatchTask.model_fields if name not in SET_BY_SAMPLES]
        close = did_you_mean(str(error["loc"][0]), fields)
        known = f"did you mean {close!r}?" if close else f"a task line has {', '.join(fields)}"
        return f"unknown key; {known} (anything of your own goes in metadata)"
    if error["type"] == "missing":
        return "missing (a task line needs it)"
    return str(error["msg"]).removeprefix("Value error, ")


def expand_samples(task: BatchTask, samples: int) -> list[BatchTask]:
    """The task as `samples` rollouts (`<id>#<k>`, grouped by id), or itself grouped when samples is 1."""
    if samples < 1:
        raise ConfigError(f"--samples must be at least 1, got {samples}")
    if samples == 1:
        return [task.model_copy(update={"group": task.id, "samples": 1})]
    return [task.model_copy(update={"id": f"{task.id}#{k}", "group": task.id, "sample": k, "samples": samples})
            for k in range(samples)]


def run_dir_name(task_id: str) -> str:
    """A file-system-safe directory name for a task id (stable across runs): its letters and digits in any
    script ('café-1', '検索-3'), `._#=+-`; anything else an underscore, and then a hash of the id appended
    (ids that differ only there, or past the length kept, stay apart). At most 180 bytes in UTF-8 (file names hold 255)."""
    text = unicodedata.normalize("NFC", task_id)
    safe = re.sub(r"[^\w.#=+-]", "_", text).lstrip(".") or "task"
    long = len(safe.encode()) > 180
    suffix = "-" + uuid.uuid5(uuid.NAMESPACE_URL, task_id).hex[:8] if safe != task_id or long else ""
    while len((safe + suffix).encode()) > 180:
        safe = safe[:-1]
    return safe + suffix



def check_task_urls(tasks: Iterable[BatchTask], config: AgentConfig) -> None:
    """Refused start URLs (file:, chrome:, refused domains) and unusable storage-state files are a usage
    error before anything runs."""
    from surfer.agent.environments import check_start_url
    from surfer.tools.browser.state import read_storage_state

    states: set[str] = set()
    for task in tasks:
        try:
            if task.url:
                check_start_url(task.url, config)
            if task.storage_state and config.browser.user_data_dir:
                raise ConfigError("a task's storage_state does not go with --user-data-dir (the profile keeps its own state)")
            if task.storage_state and task.storage_state not in states:
                read_storage_state(task.storage_state)
                states.add(task.storage_state)
        except ConfigError as exc:
            raise ConfigError(f"task {task.id}: {exc}") from None
