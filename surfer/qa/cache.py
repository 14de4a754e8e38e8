"""The action cache: a directory of readable files users commit.

    <cache>/<suite>/<case>.json          the case's steps, each with its actions and their anchors
    <cache>/<suite>/<case>/s01-a02.png   the image crop around step 1, action 2's point

An entry is written after a passing case whenever it differs from what is
stored (a first run, a healed step, --update-cache); a re-run that changes
nothing leaves the files untouched."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from surfer.agent.rundir import write_atomic
from surfer.core.actions import ACTION_ADAPTER, Action, CssPoint, with_points

FORMAT = 1


@dataclass
class CachedAction:
    """One performed action (points included) and what was at its point."""

    action: dict[str, Any]  # the action as the policy gave it (secrets as placeholders), without points
    points: list[dict[str, float]] = field(default_factory=list)
    url: str = ""  # URL pattern of the page it happened on
    element: Optional[dict[str, str]] = None  # role, name, tag, selector at the first point (browser)
    crop: Optional[str] = None  # file name of the crop, relative to the case's crop folder
    crop_png: bytes = field(default=b"", repr=False, compare=False)  # in memory only

    def resolved(self) -> Action:
        """The action with its recorded points."""
        action = ACTION_ADAPTER.validate_python(self.action)
        return with_points(action, [CssPoint(**p) for p in self.points])

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("crop_png")
        return data


@dataclass
class CachedStep:
    goal: str
    actions: list[CachedAction] = field(default_factory=list)
    answer: Optional[str] = None
    end_url: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"goal": self.goal, "answer": self.answer, "end_url": self.end_url,
                "actions": [a.to_json() for a in self.actions]}


@dataclass
class CaseEntry:
    case: str
    start_url: str = ""
    steps: list[CachedStep] = field(default_factory=list)

    def step(self, index: int, goal: str) -> Optional[CachedStep]:
        """The cached step `index` when it was recorded for the same goal."""
        if index < len(self.steps) and self.steps[index].goal == goal:
            return self.steps[index]
        return None

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "case": self.case, "start_url": self.start_url,
                "steps": [s.to_json() for s in self.steps]}


class ActionCache:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _paths(self, case_id: str) -> tuple[Path, Path]:
        file = self.root / f"{case_id}.json"
        return file, file.with_suffix("")

    def load(self, case_id: str) -> Optional[CaseEntry]:
        """The stored entry, or None (missing, unreadable or of another format:
        the case then runs with the model and the entry is rewritten)."""
        file, crops = self._paths(case_id)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT:
                return None
            steps = []
            for step in data["steps"]:
                actions = []
                for raw in step["actions"]:
                    action = CachedAction(**raw)
                    if action.crop and (crops / action.crop).exists():
                        action.crop_png = (crops / action.crop).read_bytes()
                    ACTION_ADAPTER.validate_python(action.action)  # a hand-edited entry that no longer parses is a miss
                    actions.append(action)
                steps.append(CachedStep(step["goal"], actions, step.get("answer"), step.get("end_url", "")))
            return CaseEntry(data["case"], data.get("start_url", ""), steps)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def store(self, entry: CaseEntry) -> bool:
        """Write the entry when it differs from the stored one; True when written."""
        file, crops = self._paths(entry.case)
        for s, step in enumerate(entry.steps, 1):
            for a, action in enumerate(step.actions, 1):
                action.crop = f"s{s:02d}-a{a:02d}.png" if action.crop_png else None
        text = json.dumps(entry.to_json(), indent=2, ensure_ascii=False) + "\n"
        if file.exists() and file.read_text(encoding="utf-8") == text:
            return False
        file.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(crops, ignore_errors=True)
        for step in entry.steps:
            for action in step.actions:
                if action.crop:
                    crops.mkdir(parents=True, exist_ok=True)
                    (crops / action.crop).write_bytes(action.crop_png)
        write_atomic(file, text)
        return True

    def drop(self, case_id: str) -> None:
        file, crops = self._paths(case_id)
        file.unlink(missing_ok=True)
        shutil.rmtree(crops, ignore_errors=True)
