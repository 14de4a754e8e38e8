"""A ground-truth policy for MiniWoB++: a model double that reads the page
(core.getDOMInfo(), the utterance, scroll and select state, handed over by
`MiniWobEnvironment.on_observe`) and answers through the normal HTTP model
path (`StandInServer`) in the profile's wire format.

The policy picks the next action with task-specific logic (handlers.py,
over the page's ground truth, truth.py); the localizer
answers with the centre of the element the policy named, converted with
`surfer.core.coordinates.css_to_model` for the geometry of the image it was
sent. Sessions are told apart by the `surfer_session` parameter of the page
URL (in the policy prompt) and by the bytes of the image (localizer)."""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any, Callable

from surfer.bench.miniwob.handlers import HANDLERS, Memo
from surfer.bench.miniwob.truth import Decision, Truth
from surfer.core.actions import CssPoint
from surfer.core.coordinates import CoordinateFrame, ImageGeometry, Size, css_to_model
from surfer.models.standin import Answer, ChatRequest

_SESSION = re.compile(r"surfer_session=([0-9a-f]+)")
_TARGET = re.compile(r"Target: (.+)")


class Board:
    """Ground truth per session, written by the environments (event loop
    thread) and read by the oracle (stand-in server threads)."""

    def __init__(self) -> None:
        self._truth: dict[str, tuple[str, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def post(self, session: str, task: str) -> Callable[[dict[str, Any]], None]:
        def on_observe(raw: dict[str, Any]) -> None:
            with self._lock:
                self._truth[session] = (task, raw)

        return on_observe

    def get(self, session: str) -> tuple[str, dict[str, Any]] | None:
        with self._lock:
            return self._truth.get(session)

    def drop(self, session: str) -> None:
        with self._lock:
            self._truth.pop(session, None)


class MiniWobOracle:
    """Responder for `StandInServer`: the policy from the ground truth, the
    localizer from the points the policy chose, the validator accepts."""

    def __init__(self, board: Board, frame: CoordinateFrame, *, input_mode: str = "keyboard") -> None:
        self.board = board
        self.frame = frame
        # "keyboard": selects and date fields are typed into; "pointer": their popups are clicked where drawn
        self.input_mode = input_mode
        self._points: dict[tuple[str, str], tuple[CssPoint, tuple[Size, float, tuple[float, float]]]] = {}
        self._memos: dict[str, Memo] = {}
        self._shared: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, request: ChatRequest) -> Answer:
        return getattr(self, request.role)(request)

    def policy(self, request: ChatRequest) -> dict[str, Any]:
        match = _SESSION.search(request.text)
        posted = self.board.get(match.group(1)) if match else None
        if posted is None:
            return {
                "thought": "No ground truth for this page.",
                "notes": "",
                "action": {"type": "fail", "reason": "unknown session"},
            }
        task, raw = posted
        handler = HANDLERS.get(task)
        if handler is None:
            return {
                "thought": f"The oracle has no logic for {task}.",
                "notes": "",
                "action": {"type": "fail", "reason": f"no oracle for {task}"},
            }
        truth = Truth.parse(raw)
        decision = Decision()
        session = match.group(1)  # type: ignore[union-attr]
        image = hashlib.sha1(request.images[-1]).hexdigest() if request.images else ""
        with self._lock:  # handlers are quick; one at a time keeps shared state (the clipboard lease) simple
            memo = self._memos.setdefault(session, {"session": session, "shared": self._shared, "input": self.input_mode})
            action = handler(truth, decision, memo)
            for target, point in decision.points.items():
                self._points[(image, target)] = (point, truth.geometry)
        return {"thought": f"Ground truth for {task!r}: {truth.utterance}", "notes": "", "action": action}

    def localizer(self, request: ChatRequest) -> dict[str, Any]:
        match = _TARGET.search(request.text)
        key = (hashlib.sha1(request.images[-1]).hexdigest(), match.group(1).strip() if match else "")
        with self._lock:
            found = self._points.pop(key, None)
        if found is None:
            return {"x": 0, "y": 0}
        point, (screenshot, scale, origin) = found
        geometry = ImageGeometry(
            sent=Size(*request.image_size(-1)),
            screenshot=screenshot,
            scale=scale,
            origin_x=origin[0],
            origin_y=origin[1],
        )
        x, y = css_to_model(point, self.frame, geometry)
        answer: dict[str, Any] = {"x": x, "y": y}
        if "action" in ((request.schema or {}).get("properties") or {}):
            answer = {"action": "click_absolute", **answer}
        return answer

    def validator(self, request: ChatRequest) -> dict[str, Any]:
        return {"verdict": "accept", "reasons": "The oracle accepts."}
