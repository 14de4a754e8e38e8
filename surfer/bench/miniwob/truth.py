"""What the MiniWoB++ oracle knows of a page: its DOM as `Node`s and the
episode's ground truth (`Truth`: utterance, scroll and select state), and
the `Decision` a handler returns (click a node, type, press)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from surfer.core.actions import CssPoint
from surfer.core.coordinates import Size


@dataclass
class Node:
    tag: str
    text: str
    id: str
    classes: str
    left: float
    top: float
    width: float
    height: float
    value: Any = None
    focused: bool = False
    children: list["Node"] = field(default_factory=list)

    @property
    def centre(self) -> CssPoint:
        return CssPoint(x=self.left + self.width / 2, y=self.top + self.height / 2)

    def has_class(self, name: str) -> bool:
        return name in (self.classes or "").split()

    def all_text(self) -> str:
        return " ".join([self.text, *(c.all_text() for c in self.children)]).strip()


def parse_node(info: dict[str, Any]) -> Node:
    return Node(
        tag=info["tag"],
        text=info.get("text") or "",
        id=info.get("id") or "",
        classes=info.get("classes") or "",
        left=info["left"],
        top=info["top"],
        width=info["width"],
        height=info["height"],
        value=info.get("value"),
        focused=bool(info.get("focused")),
        children=[parse_node(c) for c in info.get("children", [])],
    )


@dataclass
class Truth:
    """What the page shows now, as the environment read it."""

    utterance: str
    root: Node
    scroll: list[dict[str, Any]]
    selects: list[dict[str, Any]]
    geometry: tuple[Size, float, tuple[float, float]]  # screenshot size, scale, CSS origin
    popup: list[dict[str, Any]] = field(default_factory=list)  # what an open native-widget popup draws

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> "Truth":
        shot = raw["screenshot"]
        return cls(
            raw["utterance"],
            parse_node(raw["dom"]),
            raw.get("scroll", []),
            raw.get("selects", []),
            (Size(shot["width"], shot["height"]), raw["scale"], tuple(raw["origin"])),
            raw.get("popup", []),
        )  # type: ignore[arg-type]

    def drawn(self, label: str) -> CssPoint | None:
        """Centre of the popup item drawn with `label` or value `label`, when it is in view."""
        for item in self.popup:
            if item["visible"] and label in (item["label"], item["value"]):
                return CssPoint(x=item["x"] + item["width"] / 2, y=item["y"] + item["height"] / 2)
        return None

    def nodes(self) -> list[Node]:
        out: list[Node] = []
        stack = [self.root]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(node.children))
        return out

    def find(self, predicate: Callable[[Node], bool]) -> Node | None:
        return next((n for n in self.nodes() if predicate(n) and n.left >= 0), None)

    def by_tag(self, tag: str, text: str | None = None) -> Node | None:
        return self.find(lambda n: n.tag == tag and (text is None or n.all_text() == text))

    def by_id(self, element_id: str) -> Node | None:
        return self.find(lambda n: n.id == element_id)

    def quoted(self, index: int = 0) -> str:
        return re.findall(r'"([^"]*)"', self.utterance)[index]


class Decision:
    """Builds one policy action and remembers the CSS point of each target it names."""

    def __init__(self) -> None:
        self.points: dict[str, CssPoint] = {}

    def _target(self, node: Node, what: str, point: CssPoint | None = None) -> str:
        self.points[what] = point or node.centre
        return what

    def click(self, node: Node, what: str, point: CssPoint | None = None) -> dict[str, Any]:
        return {"type": "click", "target": self._target(node, what, point)}

    def click_at(self, point: CssPoint, what: str) -> dict[str, Any]:
        self.points[what] = point
        return {"type": "click", "target": what}

    def scroll_at(self, point: CssPoint, what: str, direction: str, amount: int = 3) -> dict[str, Any]:
        self.points[what] = point
        return {"type": "scroll", "direction": direction, "amount": amount, "target": what}

    def type(
        self,
        node: Node,
        what: str,
        text: str,
        *,
        clear: bool = True,
        submit: bool = False,
        point: CssPoint | None = None,
    ) -> dict[str, Any]:
        return {
            "type": "type",
            "text": text,
            "target": self._target(node, what, point),
            "clear": clear,
            "submit": submit,
        }

    def scroll(self, node: Node, what: str, direction: str, amount: int = 10) -> dict[str, Any]:
        return {"type": "scroll", "direction": direction, "amount": amount, "target": self._target(node, what)}

    @staticmethod
    def press(keys: str) -> dict[str, Any]:
        return {"type": "press", "keys": keys}
