"""Agent memory with bounded cost: the task, running notes, the last N
screenshots and a compact action history. What `render_*` returns stops
growing after the first few steps, however long the run (cap and compact)."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass

from surfer.models.imaging import PreparedImage


@dataclass(frozen=True)
class HistoryEntry:
    step: int
    action: str
    outcome: str


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Memory:
    def __init__(
        self, task: str, *, max_images: int = 3, history_window: int = 8,
        notes_chars: int = 1500, note_chars: int = 400, entry_chars: int = 200, max_notes: int = 10,
    ) -> None:
        self.task = task
        self.images: deque[PreparedImage] = deque(maxlen=max(1, max_images))
        self.history_window = history_window
        self.notes_chars = notes_chars
        self.note_chars = note_chars
        self.entry_chars = entry_chars
        self.max_notes = max_notes
        self._notes: deque[str] = deque()
        self._dropped_notes = 0
        self._recent: deque[HistoryEntry] = deque()
        self._older = 0
        self._older_counts: Counter[str] = Counter()
        self._older_errors = 0
        self._older_first = 0

    def add_image(self, image: PreparedImage) -> None:
        self.images.append(image)

    def add_note(self, text: str) -> None:
        text = _clip(text, self.note_chars)
        if not text or (self._notes and self._notes[-1] == text):
            return
        self._notes.append(text)
        while len(self._notes) > self.max_notes or (
            sum(len(n) + 3 for n in self._notes) > self.notes_chars and len(self._notes) > 1
        ):
            self._notes.popleft()
            self._dropped_notes += 1

    def add_history(self, step: int, action: str, outcome: str) -> None:
        self._recent.append(HistoryEntry(step, _clip(action, self.entry_chars), _clip(outcome, self.entry_chars)))
        while len(self._recent) > self.history_window:
            old = self._recent.popleft()
            if not self._older:
                self._older_first = old.step
            self._older += 1
            self._older_counts[old.action.split("(", 1)[0]] += 1
            self._older_errors += old.outcome.startswith("error")

    def render_notes(self) -> str:
        lines = [f"- {n}" for n in self._notes]
        if self._dropped_notes:
            lines.insert(0, f"({self._dropped_notes} older note(s) dropped)")
        return "\n".join(lines) or "(none)"

    def render_history(self) -> str:
        lines = []
        if self._older:
            kinds = ", ".join(f"{n} {k}" for k, n in self._older_counts.most_common())
            last = self._older_first + self._older - 1
            lines.append(f"Steps {self._older_first}-{last}: {kinds}; {self._older_errors} error(s).")
        lines += [f"Step {e.step}: {e.action} -> {e.outcome}" for e in self._recent]
        return "\n".join(lines) or "(no actions yet)"
