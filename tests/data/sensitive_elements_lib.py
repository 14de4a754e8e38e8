"""Helpers to write labelled UI elements compactly (sensitive_elements*.jsonl).

Only builds dicts; the labelled sets are the .jsonl files next to this one,
regenerated with `python tests/data/make_sensitive_elements.py` (dev set) and
`python tests/data/make_sensitive_elements_holdout.py` (held-out set).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

ORIGINS = {
    "shop": "https://www.shop.example", "bank": "https://secure.bank.example", "mail": "https://mail.example.com",
    "admin": "https://admin.store.example", "settings": "https://account.example.com", "social": "https://social.example",
    "travel": "https://www.fly.example", "appstore": "https://apps.example.com", "saas": "https://app.saas.example",
    "payments": "https://dashboard.payments.example", "code": "https://git.example.com", "wallet": "https://www.wallet.example",
    "crypto": "https://www.coins.example", "drive": "https://drive.example.com", "food": "https://www.eats.example",
    "hotel": "https://www.stays.example", "news": "https://news.example", "video": "https://www.video.example",
    "cloud": "https://console.cloud.example", "charity": "https://donate.charity.example", "telecom": "https://my.telco.example",
    "cms": "https://blog.example.org", "chat": "https://chat.example.com", "broker": "https://trade.broker.example",
}

_counter = itertools.count(1)


def el(role: str, name: str, tag: str, **kw: Any) -> dict[str, Any]:
    data = {"role": role, "name": name, "tag": tag}
    data.update(kw)
    return data


def link(name: str, href: str = "/page", **kw: Any) -> dict[str, Any]:
    return el("link", name, "a", href=href, **kw)


def button(name: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("type", "button")
    return el("button", name, "button", **kw)


def div_button(name: str, **kw: Any) -> dict[str, Any]:
    return el("button", name, "div", **kw)


def menuitem(name: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("group", "menu")
    return el("menuitem", name, kw.pop("tag", "div"), **kw)


def tab(name: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("group", "tablist")
    return el("tab", name, kw.pop("tag", "button"), **kw)


def field(name: str, type: str = "text", autocomplete: str = "", input_name: str = "") -> dict[str, Any]:
    return {"name": name, "type": type, "autocomplete": autocomplete, "input_name": input_name}


def form(fields: list[dict[str, Any]], submit: str, *, origin: str = "", method: str = "post", name: str = "",
         payment: bool | None = None) -> dict[str, Any]:
    pay = any(f["autocomplete"].startswith("cc-") or any(k in (f["input_name"] + f["name"]).lower() for k in (
        "cardnumber", "card number", "cvc", "cvv", "expir")) for f in fields) if payment is None else payment
    new = any(f["autocomplete"] == "new-password" for f in fields)
    current = any(f["type"] == "password" and f["autocomplete"] != "new-password" for f in fields)
    return {"action_origin": origin, "method": method, "fields": fields, "submit_name": submit,
            "has_payment_fields": pay, "has_new_password": new, "has_current_password": current, "name": name}


def textbox(name: str, type: str = "text", **kw: Any) -> dict[str, Any]:
    role = "searchbox" if type == "search" else "textbox"
    return el(kw.pop("role", role), name, kw.pop("tag", "input"), type=type, **kw)


def item(category: str, site: str, kind: str, element: dict[str, Any], description: str, expected: bool,
         note: str = "", start: str | None = None, prefix: str = "") -> dict[str, Any]:
    element = dict(element)
    element.setdefault("origin", ORIGINS.get(site, f"https://{site}.example"))
    if element.get("form") and not element["form"].get("action_origin"):
        element["form"]["action_origin"] = element["origin"]
    return {
        "id": f"{prefix}{site}-{category}-{next(_counter):04d}", "category": category, "site": site, "kind": kind,
        "element": element, "description": description, "start_origin": start or ORIGINS.get(site, f"https://{site}.example"),
        "expected": expected, "note": note,
    }


def write(items: list[dict[str, Any]], path: Path) -> None:
    ids = [i["id"] for i in items]
    assert len(ids) == len(set(ids)), "duplicate ids"
    with open(path, "w", encoding="utf-8") as out:
        for i in items:
            out.write(json.dumps(i, ensure_ascii=False) + "\n")
