"""Which actions commit the user to something: the rules behind sensitive-action
confirmation (issue 22).

A click is a commitment when it presses a button, submit input or menu item
whose accessible name is an imperative that buys, pays, deletes, removes,
sends, transfers, unsubscribes or cancels a subscription ("Place order",
"Pay $42.10", "Delete account", "Remove" on a cart line, "Send" in a compose
window), when it confirms a dialog that says so ("OK" under "Delete 3
files?"), or when it submits a form that holds payment fields. The words
alone never make a click sensitive:

- a link that navigates (`<a href>`, role=link) is not a commitment, whatever
  it says ("Orders", "Delete account" leading to a settings page); a link
  whose href is "#" or "javascript:" acts like a button and is judged as one;
- tabs, options, checkboxes, radios, switches, fields, headings, controls in
  a tab list, list box, radio group, menu bar, tree, navigation or search
  landmark, column-header sort buttons, disclosure (`<summary>`) and menu
  openers (aria-haspopup) never are: what they open is judged when it is used;
- a verb with a harmless object is not: "Remove filter", "Delete search
  text", "Send feedback", "Send code", "Remove coupon"; a name that ends in a
  noun such as history, details, settings or methods is a title, not an order
  ("Transfer history", "Order details");
- navigation to a checkout page is not a commitment: "Checkout", "Proceed to
  checkout", "Continue to payment", "Book now", "Upgrade" (no price), bare
  "Subscribe" (no price) and "Start free trial" lead to a page whose final
  button ("Pay now", "Complete order", "Subscribe - $9.99/month") is.

Typing is a commitment only into payment fields (cc-* autocomplete, card
number, CVC, expiry) or password-change fields (autocomplete=new-password in
a form that is not a sign-up) of another origin than the task's start, and
never into a login form; typing then Enter (`submit=True`) also judges the
form's submission as a click on its submit button.

A key that activates what has the focus is judged as what it does there:
Enter in a form's field submits the form (as typing then Enter), Enter or
Space on a button presses it (as a click); a `type` action without a target
types into the focused field, which is judged as the field it is.

Without element facts (the desktop, or no answer from the page), the model's
description of the target is judged by the same vocabulary: a quoted or
leading verb phrase that commits ("the 'Place order' button", "click Delete
account") is one; a noun ("the Orders link", "Order history tab") is not, and
role words (link, tab, menu, dropdown, filter, search box, heading, field)
count as evidence that the target is not a commitment.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional
from urllib.parse import urlsplit

from surfer.core.elements import ElementFacts, FieldFacts, FormFacts

from .vocabulary import (
    BUTTON_ROLES, CONTEXT_BENIGN, DEFAULT_VOCABULARY, DIALOG_EVIDENCE, FORM_NON_COMMIT, GENERIC_CONFIRMS, NEEDS_OBJECT,
    NEVER_GROUPS, NEVER_ROLES, OLD_SENSITIVE_WORDS, PAYMENT_FIELD, STANDALONE, SUBMIT_SENDS, Vocabulary, foreign_evidence,
    tokens,
)


# ---------------------------------------------------------------- element rules


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url or "")
    scheme = (parts.scheme or "").lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme, 0)
    except ValueError:
        port = 0
    return scheme, (parts.hostname or "").lower(), port


def same_origin(a: str, b: str) -> bool:
    """Same scheme, host and port; an unknown origin is never the same."""
    oa, ob = _origin(a), _origin(b)
    return bool(oa[1]) and oa == ob


def _host(url: str) -> str:
    return _origin(url)[1] or "an unknown site"


def _navigates(el: ElementFacts) -> bool:
    href = el.href.strip().lower()
    return bool(href) and href != "#" and not href.startswith("javascript:")


def _scripted(el: ElementFacts) -> bool:
    """An href that does not go anywhere: the element acts by script, like a button."""
    href = el.href.strip().lower()
    return href == "#" or href.startswith("javascript:")


def _is_submit(el: ElementFacts) -> bool:
    if el.tag == "button":
        return el.type in ("", "submit")
    return el.tag == "input" and el.type in ("submit", "image")


def _control_word(el: ElementFacts) -> str:
    return {"menuitem": "menu item", "link": "link"}.get(el.role, "button")


def payment_field_kind(f: FieldFacts | ElementFacts) -> Optional[str]:
    """'card-number field', 'card security-code field', ... for a payment field, else None."""
    auto = f.autocomplete.split()
    token = next((t for t in auto if t.startswith("cc-")), "")
    if token:
        return {"cc-number": "card-number field", "cc-csc": "card security-code field", "cc-name": "cardholder-name field",
                "cc-type": "card-type field"}.get(token, "card expiry field" if token.startswith("cc-exp") else "payment field")
    text = " ".join([f.name, f.input_name, getattr(f, "id", ""), getattr(f, "selector", "")])
    found = PAYMENT_FIELD.search(text)
    if not found:
        return None
    word = found.group(0).lower()
    if re.search(r"cvc|cvv|csc|security|verification|code", word):
        if "security" in word and not re.search(r"card|cvc|cvv|csc", text, re.I):
            return None  # "Security code" alone is a sign-in code
        return "card security-code field"
    if re.search(r"exp|mm", word):
        return "card expiry field"
    if "name" in word or "holder" in word:
        return "cardholder-name field"
    return "card-number field"


def _is_sign_up(form: FormFacts) -> bool:
    if form.has_current_password:
        return False
    identity = re.compile(r"\b(e-?mail|user ?name|username|login|full name|first name|phone)\b", re.I)
    return any(f.autocomplete.split()[-1:] in (["username"], ["email"], ["name"], ["given-name"], ["tel"])
               or f.type == "email" or identity.search(f"{f.name} {f.input_name}") for f in form.fields)


def _is_login(form: Optional[FormFacts]) -> bool:
    return bool(form and form.has_current_password and not form.has_new_password and not form.has_payment_fields)


class Commitments:
    """The rules, with a user's extra commitment phrases and exempt phrases."""

    def __init__(self, extra: Iterable[str] = (), exempt: Iterable[str] = ()) -> None:
        self.extra = tuple(p for p in extra if p and p.strip())
        self.exempt = tuple(p for p in exempt if p and p.strip())
        self.vocabulary = Vocabulary(extra=self.extra, exempt=self.exempt) if (self.extra or self.exempt) else DEFAULT_VOCABULARY

    @classmethod
    def from_sensitive_words(cls, words: Iterable[str], exempt: Iterable[str] = ()) -> "Commitments":
        """Today's `sensitive_words` setting: the default words are the built-in
        vocabulary (which knows "Orders" from "Order now"); any other word becomes
        an extra commitment verb, sensitive when a button's name starts with it."""
        known = set(OLD_SENSITIVE_WORDS) | set(STANDALONE) | set(NEEDS_OBJECT)
        extra = [w.strip() for w in words if w and w.strip() and " ".join(tokens(w)) not in known]
        return cls(extra=extra, exempt=exempt)

    # -- clicks

    def click(self, el: Optional[ElementFacts]) -> Optional[str]:
        """Why clicking `el` commits the user to something, or None."""
        if el is None or el.plain:
            return None
        if self.vocabulary.exempted(tokens(el.name)):
            return None
        if el.form and el.form.has_payment_fields and _is_submit(el) and " ".join(tokens(el.name)) not in FORM_NON_COMMIT:
            return "it submits a form with payment fields"
        role = el.role
        if el.tag == "a" and role in ("link", "") and _navigates(el):
            return None  # a link that navigates: not for its words alone
        if role == "link" and el.tag != "a" and not _scripted(el):
            return None  # role=link without an href navigates by script (a router)
        if role in NEVER_ROLES or el.is_text_entry or el.tag in ("select", "summary", "option", "label"):
            return None
        if el.haspopup or el.group in NEVER_GROUPS:
            return None
        if role not in BUTTON_ROLES and role != "link":
            return None
        if el.tag == "input" and el.type not in ("submit", "button", "image", "reset"):
            return None
        if el.tag == "input" and el.type == "reset":
            return None
        context = " ".join([el.context, el.dialog, el.form.name if el.form else ""])
        if self.vocabulary.commitment(el.name, context):
            return f"it presses the {el.name!r} {_control_word(el)}"
        if el.form and _is_submit(el) and " ".join(tokens(el.name)) in SUBMIT_SENDS:
            return f"it submits what was written with the {el.name!r} button"
        said = _dialog_commitment(el.dialog)
        if said and " ".join(tokens(el.name)) in GENERIC_CONFIRMS:
            return f"it presses {el.name!r} in a dialog that mentions {said!r}"
        return None

    # -- typing

    def typing(self, el: Optional[ElementFacts], start_origin: str, *, submit: bool = False) -> Optional[str]:
        """Why typing into `el` (then Enter, with `submit`) commits, or None."""
        if el is None or el.plain:
            return None
        if el.is_text_entry and not _is_login(el.form):
            kind = payment_field_kind(el)
            if kind is None and "new-password" in el.autocomplete.split() and not (el.form and _is_sign_up(el.form)):
                kind = "new-password field"
            if kind and not same_origin(el.origin, start_origin):
                where = _host(el.origin)
                why = "not the task's start site" if start_origin else "the task's start site is unknown"
                return f"it types into a {kind} on {where} ({why})"
        return self._submits(el, "typing then Enter") if submit else None

    def _submits(self, el: ElementFacts, how: str) -> Optional[str]:
        """Why Enter in the field `el` commits (it submits its form), or None."""
        form = el.form
        if form is None:
            return None
        if form.has_payment_fields:
            return f"it submits a form with payment fields ({how})"
        if form.submit_name and not self.vocabulary.exempted(tokens(form.submit_name)):
            context = " ".join([el.context, el.dialog, form.name])
            if self.vocabulary.commitment(form.submit_name, context):
                return f"it submits the form with its {form.submit_name!r} button ({how})"
        return None

    # -- keys

    def key(self, el: Optional[ElementFacts], keys: str) -> Optional[str]:
        """Why pressing `keys` with `el` focused commits, or None: Enter in a field submits its form, Enter or
        Space on a button presses it."""
        key = activating_key(keys)
        if el is None or el.plain or key is None:
            return None
        if el.is_text_entry:
            return self._submits(el, f"{key} in its field") if key == "Enter" and el.tag != "textarea" else None
        reason = self.click(el)
        return f"{reason} ({key} on the focused {_control_word(el)})" if reason else None

    # -- descriptions (desktop, or no facts)

    def described(self, description: str, *, typing: bool = False, submit: bool = False) -> Optional[str]:
        """The imperative-phrase rule on the model's description of its target."""
        words = tokens(description)
        if not words or self.vocabulary.exempted(words):
            return None
        text = description.lower()
        if typing:
            if _DESCRIBED_PAYMENT_FIELD.search(text):
                return "it types into a payment field (no page facts: its site is unknown)"
            if submit and _DESCRIBED_PAYMENT_FORM.search(text):
                return "it submits a form with payment fields (typing then Enter, as described)"
            if submit and re.search(r"\b(message|chat|comment|reply|tweet|post|compose|email body|dm)\b", text) and \
                    not re.search(r"\bsearch\b", text):
                return "it sends what it typed (typing then Enter in a message box)"
            return None
        name, before, after = _described_parts(description)
        role = _target_role(after, before)
        if role == "other":
            return None  # the Orders link, the Order history tab, the Sort order dropdown
        rest = f"{before} {after}"
        name_words = tokens(name)
        if self.vocabulary.commitment(name, rest):
            return f"it presses {name.strip()!r} (as described)"
        if role == "button" and set(name_words) & {"trash", "bin", "garbage", "wastebasket"} and \
                not set(tokens(rest)) & CONTEXT_BENIGN:
            return f"it presses {name.strip()!r} (a delete icon, as described)"
        if _DESCRIBED_PAYMENT_FORM.search(rest.lower()) and " ".join(name_words) not in FORM_NON_COMMIT:
            return f"it presses {name.strip()!r} of a payment form (as described)"
        if re.search(r"\b(dialog|modal|popup|pop up|prompt|confirmation|alert)\b", rest.lower()):
            said = _dialog_commitment(rest)
            if said and " ".join(name_words) in GENERIC_CONFIRMS:
                return f"it presses {name.strip()!r} in a dialog that mentions {said!r} (as described)"
        return None


# role words that say the described target is not a button
_ROLE_WORDS = frozenset({
    "link", "links", "hyperlink", "tab", "tabs", "menu", "dropdown", "drop", "select", "filter", "filters", "chip",
    "chips", "searchbox", "heading", "title", "field", "input", "textbox", "checkbox", "toggle", "switch", "radio",
    "column", "header", "breadcrumb", "sidebar", "nav", "navigation", "option", "combobox", "listbox", "accordion",
    "label", "setting", "suggestion", "folder", "pill", "slider", "stepper",
})
_BUTTON_WORDS = frozenset({"button", "btn", "icon", "menuitem", "cta"})
_PREPOSITIONS = frozenset({"at", "in", "on", "next", "near", "below", "above", "under", "beside", "inside", "within",
                           "beneath", "located", "which", "that", "after", "before", "of", "between", "beside"})
_LEADING = frozenset({"click", "press", "tap", "hit", "choose", "push", "activate", "on", "the", "a", "an", "yellow",
                      "blue", "red", "green", "orange", "grey", "gray", "black", "white", "purple", "big", "large", "small",
                      "primary", "main", "final", "highlighted", "bright", "round", "floating", "little", "bold"})
_DESCRIBED_PAYMENT_FIELD = re.compile(
    r"card ?number|credit card|debit card|\bcvc2?\b|\bcvv2?\b|\bcsc\b|card security|card verification|card field|"
    r"card details|security code[^.]*\bcard\b|card'?s security code|expir\w* (date|month|year)|\bmm ?/ ?yy\b|"
    r"name on (the )?card|cardholder")
_DESCRIBED_PAYMENT_FORM = re.compile(r"\b(card|payment|billing) (form|details|fields|info|information)\b|\bcard fields\b")
_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"|\u201c([^\u201d]+)\u201d|\u2018([^\u2019]+)\u2019"
                     # German, French, Chinese and Japanese quotes: „…“ «…» 「…」 『…』
                     r"|\u201e([^\u201c\u201d]+)[\u201c\u201d]|\u00ab\s*([^\u00bb]+?)\s*\u00bb|\u300c([^\u300d]+)\u300d|\u300e([^\u300f]+)\u300f")


def _described_parts(description: str) -> tuple[str, str, str]:
    """(the control's name, what the description says before it, and after it)."""
    # an apostrophe inside a word ("Amazon's", "I'm") is not a quote
    text = re.sub(r"(?<=[A-Za-z])'(?=[A-Za-z])", "\u02bc", description)
    found = _QUOTED.search(text)
    if found:
        name = next(g for g in found.groups() if g is not None)
        back = lambda t: t.replace("\u02bc", "'")  # noqa: E731
        before, after = back(text[: found.start()]), back(text[found.end():])
        if not set(tokens(after)[:1]) & _DIALOG_WORDS:
            return back(name), before, after
        # "the Yes button in the 'Delete this file?' dialog": the quote is the dialog's
        inner, _, rest = _described_parts(before)
        return inner, "", f"{rest} '{back(name)}' {after}"
    words = description.split()
    i = 0
    while i < len(words) and words[i].lower().strip(",.:") in _LEADING:
        i += 1
    j = i
    while j < len(words):
        first = (tokens(words[j])[:1] or [""])[0]
        if first in _BUTTON_WORDS or first in _ROLE_WORDS or first in _PREPOSITIONS:
            break
        j += 1
    return " ".join(words[i:j]), "", " ".join(words[j:])


_DIALOG_WORDS = frozenset({"dialog", "popup", "modal", "prompt", "confirmation", "alert", "window", "sheet"})
_NAV_PLACES = frozenset({"navigation", "nav", "navbar", "sidebar", "breadcrumb", "breadcrumbs"})


def _role_in(words: list[str]) -> str:
    for k, w in enumerate(words):
        if w == "option" and "menu" in words:
            return "button"  # "the Delete option in the right-click menu": a menu item
        if w in _PREPOSITIONS:
            return ""
        if w == "menu" and words[k + 1: k + 2] in (["item"], ["option"], ["entry"]):
            return "button"
        if w in _BUTTON_WORDS:
            return "button"
        if w in _ROLE_WORDS or (w == "search" and words[k + 1: k + 2] in (["box"], ["field"], ["bar"])):
            return "other"
    return ""


def _target_role(after: str, before: str) -> str:
    """"button", "other" (link, tab, menu, field, ...) or "" for the described target, from the
    words right after its name (up to a preposition), else the last words before it."""
    role = _role_in(tokens(after)) or _role_in(tokens(before)[-2:])
    if not role and set(tokens(after)) & _NAV_PLACES:
        return "other"  # "Send money in the navigation"
    return role


def _dialog_commitment(text: str) -> Optional[str]:
    if not text:
        return None
    lowered = " ".join(tokens(text))
    if set(lowered.split()) & CONTEXT_BENIGN:
        return None
    found = DIALOG_EVIDENCE.search(lowered)
    return found.group(0) if found else foreign_evidence(text)


DEFAULT = Commitments()


def activating_key(keys: str) -> Optional[str]:
    """'Enter' or 'Space' when `keys` (as models write them) activates the focused element; else None."""
    from surfer.tools.keys import playwright_keys, split_keys

    parts = split_keys(playwright_keys(keys))
    if parts[-1] == "Enter" and all(p in ("Control", "Meta", "Shift", "Alt", "ControlOrMeta") for p in parts[:-1]):
        return "Enter"  # (Control+Enter sends in many editors)
    return "Space" if parts == ["Space"] else None


def click_commitment(el: Optional[ElementFacts]) -> Optional[str]:
    """Why clicking `el` commits the user to something, or None (default vocabulary)."""
    return DEFAULT.click(el)


def typing_commitment(el: Optional[ElementFacts], start_origin: str, *, submit: bool = False) -> Optional[str]:
    """Why typing into `el` (then Enter, with `submit`) commits, or None (default vocabulary)."""
    return DEFAULT.typing(el, start_origin, submit=submit)


def described_commitment(description: str, *, typing: bool = False, submit: bool = False) -> Optional[str]:
    """Why the action on the described target commits, or None (default vocabulary)."""
    return DEFAULT.described(description, typing=typing, submit=submit)
