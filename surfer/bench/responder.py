"""The stand-in model of the throughput benchmarks (local and Ray): on the
demo site's registration form the policy types into the two fields and
clicks the heading in turn, the localizer answers with each target's
measured centre, so that what is timed is surfer, not a model."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from surfer.core.actions import CssPoint

VIEWPORT = (1280, 800)
_FIELDS = ("the 'Full name' text field", "the 'Email address' text field")



class StepResponder:
    """Stand-in model: the policy types into the form fields and clicks the
    heading in turn (answering at the step limit), the localizer answers
    with each target's measured centre."""

    def __init__(self, centres: dict[str, CssPoint], frame: str) -> None:
        from surfer.apps.demo.oracle import frame_mapper

        self.centres = centres
        self.to_frame = frame_mapper(frame, VIEWPORT, 1.0)  # type: ignore[arg-type]
        self._turn = itertools.count()

    def __call__(self, request: Any) -> dict[str, Any]:
        if request.role == "localizer":
            target = request.text.split("Target: ", 1)[-1].split("\n", 1)[0].strip()
            x, y = self.to_frame(self.centres[target], request.image_size(-1))
            return {"x": x, "y": y}
        if "limit has been reached" in request.text:
            return {"thought": "Done.", "notes": "", "action": {"type": "answer", "text": "done"}}
        return {"thought": "Keep working.", "notes": "", "action": self.action(next(self._turn))}

    @staticmethod
    def action(turn: int) -> dict[str, Any]:
        """Turn k's action: type into the first field, the second, click the heading, again."""
        if turn % 3 == 2:
            return {"type": "click", "target": "the page heading"}
        return {"type": "type", "text": f"value {turn}", "target": _FIELDS[turn % 3]}


async def measure_centres(site_url: str, browser: Any = None) -> dict[str, CssPoint]:
    from surfer.apps.demo.oracle import measure_targets
    from surfer.core.actions import CssPoint

    centres = await measure_targets(site_url, VIEWPORT, browser=browser)
    heading = centres["the 'Full name' text field"]
    centres["the page heading"] = CssPoint(x=heading.x, y=30.0)  # the header bar: a click that changes nothing
    return {k: v for k, v in centres.items() if k in (*_FIELDS, "the page heading")}
