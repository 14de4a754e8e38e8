"""Agent memory with bounded cost: the task, running notes, the last N
screenshots and a compact action history. What `render_*` returns stops
growing after the first few steps, however long the run (cap and compact)."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass

from surfer.models.backend import Message
from surfer.models.imaging import PreparedImage


@dataclass(frozen=True)
class Turn:
    """A role's request as it was sent and the reply it accepted: what another role
    on the same model continues (role continuation), so that the server's prefix
    cache reuses the whole request, screenshots included."""

    messages: tuple[Message, ...]
    reply: str

    def continued(self, instruction: str) -> list[Message]:
        """This turn's messages byte for byte, its reply as the assistant's, then `instruction`."""
        return [*self.messages, Message.text("assistant", self.reply), Message.text("user", instruction)]


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
        log_entries: int = 64,
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
        self.images_added = 0  # every screenshot ever added (layouts that drop images in blocks count them)
        # After the server said a request was longer than the model's context (Layout.shorten): at most
        # this many screenshots a request, and the blocks layout's blocks count from `block_origin`.
        self.image_cap: int | None = None
        self.block_origin = 0
        # Every entry of the last steps, uncompacted, for layouts that place each step's line after its screenshot.
        self._log: deque[HistoryEntry] = deque(maxlen=max(log_entries, 2 * self.window))
        # The policy's request and reply of the current step, for the roles that continue it (role continuation).
        self.policy_turn: Turn | None = None
        # The step of the last screenshot, and what the run told the model between steps (hints, rejections,
        # warnings: not the policy's own notes), by the step it came at.
        self.step = 0
        self.notices: list[tuple[int, str]] = []
        # The conversation layout's record of what it sent, frozen so each request extends the last one:
        # each step's accepted reply, its user turn (the text before and after its screenshot), each block's head,
        # and the rejected replies and the feedback that came before an accepted one (kept: a retry extends them).
        self.replies: dict[int, str] = {}
        self.retries: dict[int, tuple[Message, ...]] = {}
        self.turns: dict[int, tuple[str, str]] = {}
        self.heads: dict[int, str] = {}

    @property
    def window(self) -> int:
        """How many screenshots this memory keeps."""
        return self.images.maxlen or 1

    def add_image(self, image: PreparedImage) -> None:
        self.images.append(image)
        self.images_added += 1
        self.step = image.step if image.step is not None else self.images_added
        kept = min((i.step for i in self.images if i.step is not None), default=self.step)
        for record in (self.replies, self.retries, self.turns, self.heads):  # what no request can show any more
            for step in [s for s in record if s < kept]:
                del record[step]
        self.notices = [(step, text) for step, text in self.notices if step >= kept - 1]

    def keep_turn(self, turn: Turn, retried: tuple[Message, ...] = ()) -> None:
        """The policy's accepted turn of the current step; `retried`: the rejected replies and the feedback
        on them that its request held after the step's own turn (the accepted reply extends those)."""
        self.policy_turn = turn
        self.replies[self.step] = turn.reply
        self.retries[self.step] = retried

    def add_note(self, text: str, *, own: bool = False) -> None:
        """A note for the policy; `own`: one the policy wrote itself (it sees those in its replies)."""
        text = _clip(text, self.note_chars)
        if not text or (self._notes and self._notes[-1] == text):
            return
        if not own:
            self.notices.append((self.step, text))
        self._notes.append(text)
        while len(self._notes) > self.max_notes or (
            sum(len(n) + 3 for n in self._notes) > self.notes_chars and len(self._notes) > 1
        ):
            self._notes.popleft()
            self._dropped_notes += 1

    def add_history(self, step: int, action: str, outcome: str) -> None:
        entry = HistoryEntry(step, _clip(action, self.entry_chars), _clip(outcome, self.entry_chars))
        self._recent.append(entry)
        self._log.append(entry)
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

    def entries(self, first: int | None = None, last: int | None = None) -> list[HistoryEntry]:
        """Logged entries with `first <= step < last` (either bound optional)."""
        return [e for e in self._log if (first is None or e.step >= first) and (last is None or e.step < last)]

    def render_history_before(self, step: int) -> str:
        """The history of the steps before `step`: the last `history_window` entries and a count of the rest."""
        entries = self.entries(last=step)
        shown = entries[-self.history_window:]
        lines = [f"Step {e.step}: {e.action} -> {e.outcome}" for e in shown]
        skipped = len(entries) - len(shown)
        if skipped:
            lines.insert(0, f"({skipped} earlier step record(s) not shown)")
        return "\n".join(lines) or "(no actions yet)"
