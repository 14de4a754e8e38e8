"""Prompt layouts: how the policy's request is laid out, which decides how
much of it a server's prefix cache can reuse from the session's last request.

- ``window`` (the default, the reference format): the system prompt, then one
  user message whose text (task, notes, history, current page) is rewritten
  every step, then the last N screenshots (a sliding window). Consecutive
  requests share only the system prompt and the first lines.
- ``blocks`` (prefix-stable): the system prompt, the task and the history of
  the steps before the current block, then each screenshot of the block
  followed by what was done on it, and last the text that changes every step
  (notes, current page, the closing instruction). Screenshots are dropped in
  blocks of 2N-1 steps rather than one at a time, so between drops each
  request extends the last one (the server prefills one new screenshot and a
  few lines); a policy request shows 1 to 2N-1 screenshots, N on average.
  `block` (the setting `block_images`) sets the block's length instead: with a
  block of N screenshots a session's requests stay append-only (the whole
  history, screenshots and the step lines after each) until they hold N.

- ``conversation`` (append-only, replies included): the policy's requests of a
  block form one conversation — a head (task, earlier history, notes), then per
  step a user turn (what happened since the last decision, the screenshot, the
  page and the instruction) and the policy's accepted reply as the assistant's
  turn (after the rejected replies and the feedback on them, as they were
  sent, where the step needed a retry). Each request is the last one plus its reply and a new turn, so an
  engine that keeps a hybrid's state only where a request ended (SGLang's Mamba
  radix cache) resumes from it, to the token; a transformer's cache reuses all
  of it too. What was sent is frozen in memory (`Memory.turns`, `heads`,
  `replies`), so later steps repeat it byte for byte; blocks as above.

All give the same role the same schema; only the order and the number of
messages and parts differ. The localizer's request is
not a layout matter: it starts with the screenshot (roles.Localizer), or, with
role continuation, continues the policy's request whatever its layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from surfer.core.errors import ConfigError
from surfer.core.observation import Observation
from surfer.models.backend import ImagePart, Message, Part, TextPart
from surfer.models.imaging import PreparedImage
from surfer.prompts import render

from .memory import Memory

LAYOUTS = ("window", "blocks", "conversation")
DEFAULT_LAYOUT = "window"


def check_layout(name: str) -> str:
    if name not in LAYOUTS:
        raise ConfigError(f"unknown prompt layout {name!r}; choose one of: {', '.join(LAYOUTS)}")
    return name


def image_parts(images: list[PreparedImage]) -> list[ImagePart]:
    return [ImagePart(image.data, image.mime, image.step, image.digest) for image in images]


def location(observation: Observation) -> str:
    where = " — ".join(p for p in (observation.title, observation.url) if p) or "(unknown)"
    if len(observation.tabs) > 1:
        where += f" (tab {observation.active_tab} of {len(observation.tabs)} open tabs)"
    return "\n".join([where, *observation.notices])


@dataclass(frozen=True)
class Layout:
    """`window`: the number of screenshots the window layout would show (the
    profile's and the configuration's limit); every layout is sized from it."""

    name: str
    window: int
    block: int | None = None  # blocks: screenshots per block (None: 2 * window - 1)

    @property
    def memory_images(self) -> int:
        """Screenshots the run's memory must keep."""
        if self.name == "window":
            return self.window
        return self.block or 2 * self.window - 1

    @property
    def max_images(self) -> int:
        """The most screenshots one policy request holds (what an image budget is shared by)."""
        return self.memory_images

    def shown(self, memory: Memory) -> list[PreparedImage]:
        images = list(memory.images)
        cap = memory.image_cap or len(images)
        if self.name == "window":
            return images[-min(self.window, cap):]
        block = min(self.memory_images, cap)
        added = memory.images_added - memory.block_origin
        in_block = (added - 1) % block + 1 if added > 0 else 0
        return images[-in_block:] if in_block else []

    def shorten(self, memory: Memory) -> bool:
        """The server said the request was longer than the model's context: from now on show at most
        half the screenshots the last request held (the blocks layout starts a new block at the latest
        one, so the requests after it stay append-only). False when it already held one."""
        shown = len(self.shown(memory))
        if shown <= 1:
            return False
        memory.image_cap = shown // 2
        if self.name != "window":
            memory.block_origin = memory.images_added - 1
        return True

    def policy_messages(self, system: Message, memory: Memory, observation: Observation, closing: str) -> list[Message]:
        images = self.shown(memory)
        if self.name == "window":
            step_text = render(
                "policy_step", task=memory.task, notes=memory.render_notes(), history=memory.render_history(),
                location=location(observation), image_count=len(images),
            )
            return [system, Message("user", (TextPart(step_text), *image_parts(images), TextPart(closing)))]
        if self.name == "conversation" and images and None not in (image.step for image in images):
            return self._conversation(system, memory, observation, images, closing)
        return [system, Message("user", tuple(self._blocks_content(memory, observation, images, closing)))]

    def _conversation(self, system: Message, memory: Memory, observation: Observation, images: list[PreparedImage],
                      closing: str) -> list[Message]:
        steps = [image.step for image in images]
        first = steps[0]
        assert first is not None
        if first not in memory.heads:
            memory.heads[first] = render("policy_conversation_head", task=memory.task,
                                         history=memory.render_history_before(first), notes=memory.render_notes())
        messages = [system]
        parts: list[Part] = [TextPart(memory.heads[first])]
        for k, image in enumerate(images):
            step = image.step
            assert step is not None
            current = k == len(images) - 1
            if current or step not in memory.turns:  # a turn is built once, when its step is the current one
                memory.turns[step] = (
                    self._since(memory, steps[k - 1], step) if k else "",
                    (location(observation) if current else "(page not recorded)") + "\n" + closing,
                )
            before, after = memory.turns[step]
            if before:
                parts.append(TextPart(before))
            parts.append(TextPart(f"Screenshot of step {step}:"))
            parts.extend(image_parts([image]))
            parts.append(TextPart(after))
            reply = memory.replies.get(step)
            if not current and reply is not None:  # (a step with no usable reply: its turn runs on into the next)
                # the rejected replies and their feedback stay where they were sent: the accepted reply extends them
                messages += [Message("user", tuple(parts)), *memory.retries.get(step, ()), Message.text("assistant", reply)]
                parts = []
        messages.append(Message("user", tuple(parts)))
        return messages

    @staticmethod
    def _since(memory: Memory, previous: int | None, step: int) -> str:
        """What happened from step `previous` up to `step`: the actions and their outcomes, and what the run said."""
        lines = [f"Step {e.step}: {e.action} -> {e.outcome}" for e in memory.entries(previous, step)]
        lines += [f"Note: {text}" for at, text in memory.notices if (previous is None or at >= previous) and at < step]
        return "\n".join(lines)

    def _blocks_content(self, memory: Memory, observation: Observation, images: list[PreparedImage],
                        closing: str) -> list[Part]:
        steps = [image.step for image in images]
        known = bool(images) and None not in steps
        first = steps[0] if known else None
        earlier = memory.render_history_before(first) if first is not None else "(no actions yet)"
        parts: list[Part] = [TextPart(render("policy_blocks_head", task=memory.task, history=earlier))]
        for k, image in enumerate(images):
            parts.append(TextPart(f"Screenshot of step {image.step}:" if image.step is not None else "Screenshot:"))
            parts.extend(image_parts([image]))
            if known and k + 1 < len(images):
                lines = [f"Step {e.step}: {e.action} -> {e.outcome}" for e in memory.entries(steps[k], steps[k + 1])]
                if lines:
                    parts.append(TextPart("\n".join(lines)))
        since = steps[-1] if known else None
        recent = memory.entries(first=since) if since is not None else []
        if not known:
            recent = memory.entries()
        tail = render(
            "policy_blocks_tail", notes=memory.render_notes(),
            history="\n".join(f"Step {e.step}: {e.action} -> {e.outcome}" for e in recent) or "(nothing yet)",
            location=location(observation), image_count=len(images),
        )
        parts.append(TextPart(tail + "\n" + closing))
        return parts

    def validator_images(self, memory: Memory) -> list[PreparedImage]:
        """What the validator sees: the last `window` screenshots, whatever the layout."""
        return list(memory.images)[-self.window:]
