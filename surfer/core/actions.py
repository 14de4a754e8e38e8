"""The one action model used by every environment.

The policy emits one of these (without points); the localizer fills the CSS
points of pointed actions before the environment runs them. Fields the model
must not fill are hidden from the JSON schema with `SkipJsonSchema`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.json_schema import SkipJsonSchema


class CssPoint(BaseModel):
    """A point in CSS pixels of the viewport (browser) or logical screen pixels (desktop)."""

    model_config = ConfigDict(frozen=True)
    x: float
    y: float

    def __str__(self) -> str:
        return f"({self.x:.0f}, {self.y:.0f})"


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def describe(self) -> str:
        """One compact line for history and logs."""
        fields = self.model_dump(exclude={"type", "point", "to_point"}, exclude_defaults=True)
        args = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        return f"{self.type}({args})"  # type: ignore[attr-defined]


class _Pointed(_Action):
    target: str = Field(min_length=1, description="What to act on, described so it can be found on the screenshot.")
    point: SkipJsonSchema[CssPoint | None] = None


Modifier = Literal["Control", "Shift", "Alt", "Meta"]


class Click(_Pointed):
    type: Literal["click"] = "click"
    button: Literal["left", "right", "middle"] = "left"
    double: bool = False
    modifiers: list[Modifier] = Field(default=[], description="Keys held during the click, e.g. ['Control'] to add to a selection.")


class Hover(_Pointed):
    type: Literal["hover"] = "hover"


class TypeText(_Action):
    """Type text, into `target` when given (clicked first) or into the focused element."""

    type: Literal["type"] = "type"
    text: str
    target: str | None = Field(default=None, description="Field to type into; omit to type into the focused element.")
    clear: bool = Field(default=True, description="Select and delete the existing content first.")
    submit: bool = Field(default=False, description="Press Enter after typing.")
    point: SkipJsonSchema[CssPoint | None] = None


class PressKeys(_Action):
    type: Literal["press"] = "press"
    keys: str = Field(min_length=1, description="Key or combination, e.g. 'Enter', 'Control+A', 'Shift+Tab'.")


class Scroll(_Action):
    type: Literal["scroll"] = "scroll"
    direction: Literal["up", "down", "left", "right"] = "down"
    amount: int = Field(default=5, ge=1, le=50, description="Mouse-wheel notches (about 100 px each).")
    target: str | None = Field(default=None, description="Element to scroll inside; omit for the page.")
    point: SkipJsonSchema[CssPoint | None] = None


class Drag(_Pointed):
    type: Literal["drag"] = "drag"
    to_target: str = Field(min_length=1, description="Where to drop.")
    to_point: SkipJsonSchema[CssPoint | None] = None


class Upload(_Pointed):
    """Click `target` (a file field or an upload button) and answer the file chooser it opens with `path`."""

    type: Literal["upload"] = "upload"
    path: str = Field(min_length=1, description="One of the files the user allowed for upload (path or file name).")


class Dialog(_Action):
    """Answer the JavaScript dialog (alert / confirm / prompt) that is open."""

    type: Literal["dialog"] = "dialog"
    response: Literal["accept", "dismiss"] = Field(default="accept", description="accept = OK, dismiss = Cancel.")
    text: str | None = Field(default=None, description="For a prompt: the text to answer with.")


class Goto(_Action):
    type: Literal["goto"] = "goto"
    url: str = Field(min_length=1)


class Back(_Action):
    type: Literal["back"] = "back"


class Forward(_Action):
    type: Literal["forward"] = "forward"


class Refresh(_Action):
    type: Literal["refresh"] = "refresh"


class SwitchTab(_Action):
    type: Literal["switch_tab"] = "switch_tab"
    index: int = Field(ge=0, description="0-based tab index.")


class CloseTab(_Action):
    type: Literal["close_tab"] = "close_tab"
    index: int | None = Field(default=None, ge=0, description="Tab to close; omit for the current one.")


class Wait(_Action):
    type: Literal["wait"] = "wait"
    seconds: float = Field(default=1.0, gt=0, le=30)


class Answer(_Action):
    type: Literal["answer"] = "answer"
    text: str
    # Structured answer data, asked for only when a run has an answer schema (which adds it to the JSON schema).
    data: SkipJsonSchema[Any] = None


class Fail(_Action):
    type: Literal["fail"] = "fail"
    reason: str


class AskUser(_Action):
    """Ask the user for what only they know (a missing detail, a one-time code, which of two items);
    their reply comes back in the next step's prompt. The environment does nothing."""

    type: Literal["ask_user"] = "ask_user"
    question: str = Field(min_length=1, description="The question, short and answerable in a few words.")
    secret: bool = Field(default=False, description="True for a password or one-time code: the reply is kept out of every record.")
    kind: Literal["question", "take_over"] = Field(
        default="question",
        description="take_over: ask a person to use the screen themselves (a CAPTCHA, a sign-in) and hand it back.",
    )


Action = Annotated[
    Union[
        Click, Hover, TypeText, PressKeys, Scroll, Drag, Upload, Dialog, Goto, Back, Forward,
        Refresh, SwitchTab, CloseTab, Wait, Answer, Fail, AskUser,
    ],
    Field(discriminator="type"),
]

ACTION_ADAPTER: TypeAdapter[Action] = TypeAdapter(Action)

ALL_ACTION_TYPES: tuple[str, ...] = (
    "click", "hover", "type", "press", "scroll", "drag", "upload", "dialog", "goto", "back", "forward",
    "refresh", "switch_tab", "close_tab", "wait", "answer", "fail", "ask_user",
)

TERMINAL_TYPES = frozenset({"answer", "fail"})


def targets_of(action: Action) -> list[str]:
    """Target descriptions the localizer must resolve, in order (point, to_point)."""
    if isinstance(action, Drag):
        return [action.target, action.to_target]
    target = getattr(action, "target", None)
    return [target] if target else []


def with_points(action: Action, points: list[CssPoint]) -> Action:
    """A copy of `action` with its localized points filled in."""
    if not points:
        return action
    update: dict[str, CssPoint] = {"point": points[0]}
    if isinstance(action, Drag):
        update["to_point"] = points[1]
    return action.model_copy(update=update)


def headline(action: Any, limit: int = 120) -> str:
    """An action as a person reads it, for trace groups and video captions: "click the 'Sign in'
    button", "type 'Ada' into the 'Name' field", "answer '42'". `action`: an Action or its dict."""
    a = action.model_dump(exclude_defaults=False) if isinstance(action, BaseModel) else dict(action or {})
    kind = a.get("type") or "no action"

    def quoted(text: Any) -> str:
        text = str(text)
        return repr(text if len(text) <= limit else text[: limit - 1] + "…")

    target = a.get("target")
    if kind == "click":
        head = ("double-click" if a.get("double") else "right-click" if a.get("button") == "right" else "click")
        keys = "+".join(a.get("modifiers") or [])
        text = f"{keys}+{head}" if keys else head
        text += f" {target}"
    elif kind == "type":
        text = f"type {quoted(a.get('text', ''))}" + (f" into {target}" if target else "")
        text += " and press Enter" if a.get("submit") else ""
    elif kind == "press":
        text = f"press {a.get('keys')}"
    elif kind == "scroll":
        text = f"scroll {a.get('direction', 'down')}" + (f" in {target}" if target else "")
    elif kind == "drag":
        text = f"drag {target} to {a.get('to_target')}"
    elif kind == "upload":
        text = f"upload {a.get('path')} through {target}"
    elif kind == "dialog":
        text = f"{a.get('response', 'accept')} the dialog" + (f" with {quoted(a['text'])}" if a.get("text") else "")
    elif kind == "goto":
        text = f"go to {a.get('url')}"
    elif kind in ("switch_tab", "close_tab"):
        text = f"{kind.replace('_', ' ')}" + (f" {a['index']}" if a.get("index") is not None else "")
    elif kind == "wait":
        text = f"wait {a.get('seconds', 1.0):g} s"
    elif kind == "answer":
        text = f"answer {quoted(a.get('text', ''))}"
    elif kind == "fail":
        text = f"give up: {a.get('reason', '')}"
    elif kind == "ask_user":
        text = ("ask a person to take over: " if a.get("kind") == "take_over" else "ask the user ") + quoted(a.get("question", ""))
    else:
        text = f"{kind}" + (f" {target}" if target else "")
    return text if len(text) <= 2 * limit else text[: 2 * limit - 1] + "…"
