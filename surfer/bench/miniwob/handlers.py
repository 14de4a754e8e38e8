"""The oracle's task-specific policies: one handler per MiniWoB++ task,
reading the `Truth` of the page and returning the next action (HANDLERS)."""

from __future__ import annotations

import re
import time
from typing import Any, Callable

from surfer.core.actions import CssPoint

from surfer.bench.miniwob.truth import Decision, Node, Truth

CLIPBOARD_LEASE_S = 10.0


Memo = dict[str, Any]
Handler = Callable[[Truth, Decision, Memo], dict[str, Any]]


def _submit(t: Truth, d: Decision) -> dict[str, Any]:
    button = t.by_id("subbtn") or t.find(lambda n: n.tag == "BUTTON" and n.all_text().lower() == "submit")
    assert button is not None, "no submit button"
    return d.click(button, f"the '{button.all_text()}' button")


def _fill(t: Truth, d: Decision, fields: list[tuple[Node, str, str]]) -> dict[str, Any] | None:
    """Type into the first field whose value is wrong; None when all are right."""
    for node, what, text in fields:
        if node.value != text:
            return d.type(node, what, text)
    return None


def click_button(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    return d.click(t.by_tag("BUTTON", t.quoted()), f"the '{t.quoted()}' button")  # type: ignore[arg-type]


def click_link(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    link = t.find(lambda n: n.has_class("alink") and n.text == t.quoted())
    return d.click(link, f"the link '{t.quoted()}'")  # type: ignore[arg-type]


def click_dialog(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    return d.click(t.find(lambda n: n.has_class("ui-dialog-titlebar-close")), "the 'x' close button of the dialog")  # type: ignore[arg-type]


def click_tab(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    name = re.search(r"Tab #\d+", t.utterance).group(0)  # type: ignore[union-attr]
    return d.click(t.find(lambda n: n.tag == "A" and n.text == name), f"the tab '{name}'")  # type: ignore[arg-type]


def _labelled(t: Truth, tag: str, label: str) -> Node | None:
    for node in t.nodes():
        if node.tag == "LABEL" and node.all_text() == label:
            return next((c for c in node.children if c.tag == tag), None)
    return None


def click_checkboxes(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    wanted = re.match(r"Select (.*) and click Submit\.", t.utterance).group(1)  # type: ignore[union-attr]
    names = set() if wanted == "nothing" else {w.strip() for w in re.split(r",| and ", wanted) if w.strip()}
    for node in t.nodes():
        if node.tag == "LABEL":
            box = next((c for c in node.children if c.tag == "INPUT_checkbox"), None)
            if box is not None and bool(box.value) != (node.all_text() in names):
                return d.click(box, f"the checkbox '{node.all_text()}'")
    return _submit(t, d)


def click_option(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    name = re.match(r"Select (.*) and click Submit\.", t.utterance).group(1)  # type: ignore[union-attr]
    radio = _labelled(t, "INPUT_radio", name)
    if radio is not None and not radio.value:
        return d.click(radio, f"the option '{name}'")
    return _submit(t, d)


def click_button_sequence(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    name = "TWO" if memo.get("clicked_one") else "ONE"
    memo["clicked_one"] = True
    return d.click(t.by_tag("BUTTON", name), f"the button '{name}'")  # type: ignore[arg-type]


def click_collapsible(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    header = t.find(lambda n: n.tag == "H3")
    if header is not None and header.has_class("ui-accordion-header-collapsed"):
        return d.click(header, f"the section header '{header.all_text()}'")
    return _submit(t, d)


_WIDGETS = {
    "checkbox": "INPUT_checkbox",
    "radio": "INPUT_radio",
    "textarea": "TEXTAREA",
    "text": "INPUT_text",
    "button": "BUTTON",
}


def click_widget(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    kind = t.quoted()
    node = t.find(lambda n: n.tag == _WIDGETS.get(kind, kind.upper()))
    return d.click(node, f"the {kind} widget")  # type: ignore[arg-type]


def focus_text(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    return d.click(t.by_tag("INPUT_text"), "the text box")  # type: ignore[arg-type]


def focus_text_2(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    nth = int(re.search(r"(\d+)(?:st|nd|rd|th)", t.utterance).group(1))  # type: ignore[union-attr]
    boxes = [n for n in t.nodes() if n.tag == "INPUT_text"]
    return d.click(boxes[nth - 1], f"input text box number {nth}")


def enter_text(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    text = t.quoted()
    if "lower case" in t.utterance:
        text = text.lower()
    elif "upper case" in t.utterance:
        text = text.upper()
    return _fill(t, d, [(t.by_tag("INPUT_text"), "the text field", text)]) or _submit(t, d)  # type: ignore[list-item]


def enter_password(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    fields = [
        (t.by_id("password"), "the 'Password' field", t.quoted()),
        (t.by_id("verify"), "the 'Verify password' field", t.quoted()),
    ]
    return _fill(t, d, fields) or _submit(t, d)  # type: ignore[arg-type]


def login_user(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    fields = [
        (t.by_id("username"), "the 'Username' field", t.quoted(0)),
        (t.by_id("password"), "the 'Password' field", t.quoted(1)),
    ]
    return _fill(t, d, fields) or _submit(t, d)  # type: ignore[arg-type]


def choose_list(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    name = re.match(r"Select (.*) from the list and click Submit\.", t.utterance).group(1)  # type: ignore[union-attr]
    select = t.by_tag("SELECT")
    state = next((s for s in t.selects if s["id"] == (select.id if select else None)), None)
    if select is None or state is None or state["value"] == name:
        return _submit(t, d)
    if memo.get("input") != "pointer":
        # a focused <select> picks the option whose text is typed; Enter commits it
        return d.type(select, "the drop-down list", name, clear=False, submit=True)
    if not t.popup:
        return d.click(select, "the drop-down list")
    option = t.drawn(name)
    if option is not None:
        return d.click_at(option, f"the option '{name}' in the open list")
    # not in view: scroll the list towards it (options are drawn in page order)
    labels = [item["label"] for item in t.popup]
    shown = [item for item in t.popup if item["visible"]]
    below = labels.index(name) > labels.index(shown[-1]["label"]) if name in labels else True
    middle = CssPoint(x=shown[0]["x"] + shown[0]["width"] / 2, y=shown[len(shown) // 2]["y"])
    return d.scroll_at(middle, "the open list", "down" if below else "up")


def enter_date(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    month, day, year = re.search(r"(\d\d)/(\d\d)/(\d{4})", t.utterance).groups()  # type: ignore[union-attr]
    field_ = t.by_tag("INPUT_date")
    wanted = f"{year}-{month}-{day}"
    if field_ is None or field_.value == wanted:
        return _submit(t, d)
    if memo.get("input") != "pointer":
        month_segment = CssPoint(x=field_.left + 12, y=field_.top + field_.height / 2)
        return d.type(
            field_, "the month part of the date field", f"{month}{day}{year}", clear=False, point=month_segment
        )
    if not t.popup:  # the calendar icon at the right end of the field
        icon = CssPoint(x=field_.left + field_.width - 8, y=field_.top + field_.height / 2)
        return d.click_at(icon, "the calendar icon of the date field")
    # the calendar: days of a month; its title opens the months of a year, whose title opens twelve years
    picks = [item["value"] for item in t.popup]
    for pick, what in ((wanted, f"day {int(day)}"), (f"year:{int(year)}", year), (f"month:{int(year)}-{int(month) - 1}", month)):
        cell = t.drawn(pick)
        if cell is not None:
            return d.click_at(cell, f"{what} in the calendar")
    years = [int(p[5:]) for p in picks if p.startswith("year:")]
    if years:
        arrow = "↑" if int(year) < min(years) else "↓"
        return d.click_at(t.drawn(arrow), f"the {'previous' if arrow == '↑' else 'next'} years arrow")  # type: ignore[arg-type]
    title = "view:years" if any(p.startswith("month:") for p in picks) else "view:months"
    return d.click_at(t.drawn(title), "the calendar's title")  # type: ignore[arg-type]


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


def choose_date(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    """jQuery UI's datepicker (drawn in the page): open it, page to the month, click the day."""
    month, day, year = re.search(r"(\d\d)/(\d\d)/(\d{4})", t.utterance).groups()  # type: ignore[union-attr]
    field_ = t.by_id("datepicker")
    if field_ is None or field_.value == f"{month}/{day}/{year}":
        return _submit(t, d)
    title = t.find(lambda n: n.has_class("ui-datepicker-month"))
    if title is None:
        return d.click(field_, "the date field")
    shown_year = t.find(lambda n: n.has_class("ui-datepicker-year"))
    shown = int(shown_year.text if shown_year else year) * 12 + _MONTHS.index(title.text.strip())
    target = int(year) * 12 + int(month) - 1
    if shown != target:
        arrow = t.find(lambda n: n.has_class("ui-datepicker-prev" if target < shown else "ui-datepicker-next"))
        return d.click(arrow, "the Prev month arrow" if target < shown else "the Next month arrow")  # type: ignore[arg-type]
    cell = t.find(lambda n: n.tag == "A" and n.has_class("ui-state-default") and n.text.strip() == str(int(day)))
    return d.click(cell, f"day {int(day)} in the calendar")  # type: ignore[arg-type]


def use_autocomplete(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    start, end = t.quoted(0), t.quoted(1) if t.utterance.count('"') >= 4 else ""
    field_ = t.by_id("tags")
    assert field_ is not None
    value = str(field_.value or "")
    if value.startswith(start) and value.endswith(end) and len(value) > len(start):
        return _submit(t, d)
    option = t.find(lambda n: n.has_class("ui-menu-item-wrapper") and n.text.startswith(start) and n.text.endswith(end))
    if option is not None:
        return d.click(option, f"the suggestion '{option.text}'")
    return d.type(field_, "the 'Tags' field", start)


def scroll_text_2(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    direction = "up" if "to the top" in t.utterance else "down"
    area = t.by_tag("TEXTAREA")
    state = next((s for s in t.scroll if s["tag"] == "TEXTAREA"), None)
    if area is not None and state is not None and state["top"] != (0 if direction == "up" else state["max"]):
        return d.scroll(area, "the text area", direction, amount=10)
    return _submit(t, d)


def email_inbox_delete(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    sender = re.search(r"email by (.+?) and click", t.utterance).group(1)  # type: ignore[union-attr]
    for thread in t.nodes():
        if thread.has_class("email-thread") and any(
            n.has_class("email-sender") and n.text == sender for n in _walk(thread)
        ):
            trash = next(n for n in _walk(thread) if n.has_class("trash"))
            return d.click(trash, f"the trash icon of the email from {sender}")
    raise LookupError(f"no email from {sender}")


def _walk(node: Node) -> list[Node]:
    return [node, *(m for c in node.children for m in _walk(c))]


def click_tab_2(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    name = t.quoted()
    panel = t.find(lambda n: n.has_class("ui-tabs-panel"))
    link = next((n for n in _walk(panel) if n.has_class("alink") and n.text == name), None) if panel else None
    if link is not None:
        return d.click(link, f"the link '{name}'")
    tabs = [n for n in t.nodes() if n.has_class("ui-tabs-tab")]
    active = next(i for i, n in enumerate(tabs) if n.has_class("ui-tabs-active"))
    following = tabs[(active + 1) % len(tabs)]
    return d.click(following, f"the tab '{following.all_text()}'")


def search_engine(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    query, nth = t.quoted(0), int(re.search(r"(\d+)(?:st|nd|rd|th) search result", t.utterance).group(1))  # type: ignore[union-attr]
    links = [n for n in t.nodes() if n.tag == "A" and n.has_class("search-title")]
    if not links or not memo.get("searched"):
        field_ = t.by_id("search-text")
        if field_ is not None and field_.value != query:
            return d.type(field_, "the search box", query)
        memo["searched"] = True
        return d.click(t.by_id("search"), "the 'Search' button")  # type: ignore[arg-type]
    page = (nth - 1) // 3 + 1
    current = t.find(lambda n: n.tag == "LI" and n.has_class("active"))
    if current is not None and current.all_text() != str(page):
        pager = t.find(lambda n: n.tag == "A" and n.text == str(page))
        return d.click(pager, f"the page '{page}' link")  # type: ignore[arg-type]
    link = links[(nth - 1) % 3]
    return d.click(link, f"search result '{link.text}'")


def copy_paste(t: Truth, d: Decision, memo: Memo) -> dict[str, Any]:
    """With the keyboard: select all in the text area, copy, select all in the
    field, paste. Sessions in one browser share its clipboard, so the oracle
    holds a clipboard lease (shared by all its sessions) from copy to paste."""
    source, target = t.by_tag("TEXTAREA"), t.by_tag("INPUT_text")
    assert source is not None and target is not None
    lease = memo["shared"].setdefault("clipboard", {"owner": None, "until": 0.0})
    me = memo["session"]
    if target.value == source.value:
        if lease["owner"] == me:
            lease["owner"] = None
        return _submit(t, d)
    if lease["owner"] not in (None, me) and lease["until"] > time.monotonic():
        return {"type": "wait", "seconds": 0.2}
    lease["owner"], lease["until"] = me, time.monotonic() + CLIPBOARD_LEASE_S
    step = memo.get("copy", 0)
    memo["copy"] = step + 1
    plan = [
        lambda: d.click(source, "the text area"),
        lambda: d.press("Control+A"),
        lambda: d.press("Control+C"),
        lambda: d.click(target, "the answer text box"),
        lambda: d.press("Control+A"),
        lambda: d.press("Control+V"),
    ]
    return plan[step % len(plan)]()


HANDLERS: dict[str, Handler] = {
    "click-button": click_button,
    "click-link": click_link,
    "click-dialog": click_dialog,
    "click-tab": click_tab,
    "click-checkboxes": click_checkboxes,
    "click-option": click_option,
    "click-button-sequence": click_button_sequence,
    "click-collapsible-nodelay": click_collapsible,
    "click-widget": click_widget,
    "focus-text": focus_text,
    "focus-text-2": focus_text_2,
    "enter-text": enter_text,
    "enter-text-2": enter_text,
    "enter-password": enter_password,
    "login-user": login_user,
    "choose-list": choose_list,
    "enter-date": enter_date,
    "choose-date": choose_date,
    "use-autocomplete-nodelay": use_autocomplete,
    "scroll-text-2": scroll_text_2,
    "email-inbox-delete": email_inbox_delete,
    "click-tab-2-hard": click_tab_2,
    "search-engine": search_engine,
    "copy-paste": copy_paste,
}
