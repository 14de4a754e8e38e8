"""Measuring the commitment rules on labelled UI elements (issue 22).

An item is one action on one real-world-style element, with the decision a
careful person would want:

    {"id": "shop-nav-orders", "category": "nav_link", "site": "shop", "kind": "click",
     "element": {...ElementFacts...}, "description": "the 'Orders' link in the header",
     "start_origin": "https://shop.example", "expected": false, "note": "..."}

`kind` is "click", "type" or "type_submit" (typing then Enter). Each item can
be judged three ways: by its element facts (the browser), by the description
alone (the desktop, or no facts), and by the old word rule of
`agent/confirm.py` (for comparison).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable, Optional

from surfer.agent.commitments import DEFAULT, Commitments
from surfer.core.elements import ElementFacts

JUDGES = ("facts", "described", "old")
# the categories where any false positive breaks an ordinary task (issue 22's goal)
NEVER_SENSITIVE = ("nav_link", "tab", "sort_filter", "search")

# The word rule the rules replace, as it was: any of these words, with these
# suffixes, in the target the model described.
OLD_WORDS = ("buy", "pay", "purchase", "order", "delete", "remove", "transfer", "send", "checkout")
_OLD_RULE = re.compile(r"\b(" + "|".join(OLD_WORDS) + r")(?:s|es|ed|ing|ment|ments|al)?\b", re.I)


def old_rule(description: str) -> Optional[str]:
    found = _OLD_RULE.search(description or "")
    return f"its target mentions {found.group(0)!r}" if found else None


def load_items(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def judge(item: dict[str, Any], how: str = "facts", rules: Commitments = DEFAULT) -> Optional[str]:
    """The reason the rules give for `item`, or None."""
    kind = item.get("kind", "click")
    typing, submit = kind in ("type", "type_submit"), kind == "type_submit"
    description = item.get("description", "")
    if how == "old":
        return old_rule(description)
    if how == "described":
        return rules.described(description, typing=typing, submit=submit)
    element = ElementFacts.from_dict(item.get("element"))
    if typing:
        return rules.typing(element, item.get("start_origin", ""), submit=submit)
    return rules.click(element)


def evaluate(items: Iterable[dict[str, Any]], how: str = "facts", rules: Commitments = DEFAULT) -> dict[str, Any]:
    """Precision, recall, confusion and per-category errors of one way of judging."""
    tp = fp = fn = tn = 0
    categories: dict[str, dict[str, int]] = {}
    false_positives: list[dict[str, str]] = []
    false_negatives: list[dict[str, str]] = []
    for item in items:
        expected = bool(item["expected"])
        reason = judge(item, how, rules)
        flagged = reason is not None
        row = categories.setdefault(item["category"], {"n": 0, "positives": 0, "flagged": 0, "fp": 0, "fn": 0})
        row["n"] += 1
        row["positives"] += expected
        row["flagged"] += flagged
        if flagged and expected:
            tp += 1
        elif flagged:
            fp += 1
            row["fp"] += 1
            false_positives.append({"id": item["id"], "description": item.get("description", ""), "reason": reason or ""})
        elif expected:
            fn += 1
            row["fn"] += 1
            false_negatives.append({"id": item["id"], "description": item.get("description", "")})
        else:
            tn += 1
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return {
        "judge": how, "n": tp + fp + fn + tn, "precision": precision, "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "confusion": {"tp": tp, "fp": fp, "fn": fn, "tn": tn},
        "fp_by_category": {c: r["fp"] for c, r in sorted(categories.items()) if r["fp"]},
        "fn_by_category": {c: r["fn"] for c, r in sorted(categories.items()) if r["fn"]},
        "categories": dict(sorted(categories.items())),
        "false_positives": false_positives, "false_negatives": false_negatives,
    }


_LABELS = {"facts": "element facts (browser)", "described": "description only (desktop)", "old": "old word rule"}


def format_table(report: dict[str, Any] | list[dict[str, Any]], title: str = "") -> str:
    """Markdown: a summary row per report, then false positives / negatives per category."""
    reports = report if isinstance(report, list) else [report]
    lines = [f"**{title}**", ""] if title else []
    lines += ["| rules | items | precision | recall | TP | FP | FN | TN |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in reports:
        c = r["confusion"]
        lines.append(f"| {_LABELS.get(r['judge'], r['judge'])} | {r['n']} | {r['precision']:.1%} | {r['recall']:.1%} "
                     f"| {c['tp']} | {c['fp']} | {c['fn']} | {c['tn']} |")
    lines += ["", "| category | items | expected sensitive | " + " | ".join(
        f"{_LABELS.get(r['judge'], r['judge'])} FP / FN" for r in reports) + " |",
        "|---|---:|---:|" + "---:|" * len(reports)]
    for category, row in reports[0]["categories"].items():
        cells = [f"{r['categories'].get(category, {}).get('fp', 0)} / {r['categories'].get(category, {}).get('fn', 0)}"
                 for r in reports]
        lines.append(f"| {category} | {row['n']} | {row['positives']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
