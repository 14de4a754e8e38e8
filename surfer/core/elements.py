"""What a page says about the element at a point: plain records, no browser.

The browser tool (`surfer.tools.element_facts`) fills them from the DOM; the
sensitive-action rules (`surfer.agent.commitments`) judge them; a step's
trajectory records them (`to_dict` / `from_dict`, JSON-safe). They hold what
assistive technology would say about a control (role, accessible name) and
about the form it belongs to, never what was typed into a field.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Optional

_NAME_CAP = 160  # characters of any text kept (names, context, dialog text)


def _text(value: Any, cap: int = _NAME_CAP) -> str:
    return " ".join(str(value or "").split())[:cap]


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass
class FieldFacts:
    """One field of a form: what it asks for, not what it holds."""

    name: str = ""  # accessible name (label, aria-label, placeholder)
    type: str = ""  # input type ("text", "password", "email", ...), or "select" / "textarea"
    autocomplete: str = ""  # the autocomplete attribute, lower-cased ("cc-number", "current-password", ...)
    input_name: str = ""  # the name attribute
    id: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FieldFacts":
        return cls(**{k: _text(v) for k, v in _known(cls, data).items()})


@dataclass
class FormFacts:
    """The form an element belongs to."""

    action_origin: str = ""  # origin the form submits to ("https://pay.example")
    sends_to: list[str] = field(default_factory=list)  # every origin a submission may go to: the action's, a button's formaction's
    method: str = "get"
    fields: list[FieldFacts] = field(default_factory=list)
    submit_name: str = ""  # accessible name of its (first) submit button
    has_payment_fields: bool = False  # cc-* autocomplete, card number / CVC / expiry fields
    has_new_password: bool = False  # a field with autocomplete=new-password
    has_current_password: bool = False  # a password field that is not a new password
    name: str = ""  # the form's own label (aria-label, aria-labelledby, its legend or heading)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Optional[dict[str, Any]]) -> Optional["FormFacts"]:
        if not data:
            return None
        known = _known(cls, data)
        known["fields"] = [FieldFacts.from_dict(f) for f in known.get("fields") or [] if isinstance(f, dict)]
        known["sends_to"] = [_text(o, 300) for o in known.get("sends_to") or [] if isinstance(o, str)][:10]
        for flag in ("has_payment_fields", "has_new_password", "has_current_password"):
            known[flag] = bool(known.get(flag, False))
        for text in ("action_origin", "method", "submit_name", "name"):
            if text in known:
                known[text] = _text(known[text], 300)
        return cls(**known)


@dataclass
class ElementFacts:
    """The element at a point, climbed to the nearest thing a user acts on."""

    role: str = ""  # explicit or implicit ARIA role ("button", "link", "tab", "textbox", ...)
    name: str = ""  # accessible name (never a text field's typed value)
    tag: str = ""  # lower-case tag name
    type: str = ""  # input type; "submit" / "button" / "reset" for a <button>
    autocomplete: str = ""
    href: str = ""  # the href attribute as written ("#", "/orders", "javascript:void(0)")
    selector: str = ""  # a CSS selector that finds it again (in its frame)
    origin: str = ""  # origin of the frame it is in ("https://shop.example")
    form: Optional[FormFacts] = None
    input_name: str = ""  # the name attribute
    method: str = ""  # its form's method (or the button's formmethod)
    haspopup: str = ""  # aria-haspopup ("menu", "listbox", "dialog", "true"), "" when absent or "false"
    dialog: str = ""  # inside a dialog: its title and text ("Delete 3 conversations? This cannot be undone.")
    group: str = ""  # role of the composite widget or landmark around it ("tablist", "menu", "toolbar", "navigation", ...)
    context: str = ""  # the label and text of the list item, row or labelled region around it
    plain: bool = False  # no actionable element at the point: the facts describe plain content

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["form"] = self.form.to_dict() if self.form else None
        return data

    @classmethod
    def from_dict(cls, data: Optional[dict[str, Any]]) -> Optional["ElementFacts"]:
        if not data:
            return None
        known = _known(cls, data)
        form = FormFacts.from_dict(known.pop("form", None))
        plain = bool(known.pop("plain", False))
        caps = {"dialog": 300, "context": 200, "href": 300, "selector": 300, "origin": 200}
        values = {k: _text(v, caps.get(k, _NAME_CAP)) for k, v in known.items()}
        for lower in ("role", "tag", "type", "autocomplete", "method", "haspopup", "group"):
            if lower in values:
                values[lower] = values[lower].lower()
        return cls(**values, form=form, plain=plain)

    @property
    def is_text_entry(self) -> bool:
        """A field that takes typed text."""
        if self.role in ("textbox", "searchbox", "combobox", "spinbutton"):
            return self.tag != "select"
        return self.tag == "textarea" or (self.tag == "input" and self.type not in _NOT_TEXT_INPUTS)


_NOT_TEXT_INPUTS = frozenset(
    ("button", "submit", "reset", "image", "checkbox", "radio", "range", "color", "file", "hidden")
)
