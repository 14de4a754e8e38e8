"""Precision and recall of the sensitive-action rules on the labelled elements.

    python scripts/confirm_rules_report.py            # markdown tables
    python scripts/confirm_rules_report.py --json     # the full reports
    python scripts/confirm_rules_report.py --errors   # also list every false positive / negative

Each set is judged by element facts (the browser), by the description alone
(the desktop, or no facts) and by the old word rule of agent/confirm.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from surfer.agent.commitments_eval import JUDGES, evaluate, format_table, load_items  # noqa: E402

SETS = {
    "labelled": ROOT / "tests" / "data" / "sensitive_elements.jsonl",
    "held-out": ROOT / "tests" / "data" / "sensitive_elements_holdout.jsonl",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")
    parser.add_argument("--errors", action="store_true", help="list false positives and negatives")
    args = parser.parse_args()
    out: dict[str, list[dict]] = {}
    for name, path in SETS.items():
        if not path.exists():
            continue
        items = load_items(path)
        reports = [evaluate(items, how) for how in JUDGES]
        out[name] = reports
        if args.json:
            continue
        print(format_table(reports, title=f"{name} set ({path.relative_to(ROOT)}, {len(items)} items)"))
        print()
        if args.errors:
            for report in reports:
                for what in ("false_positives", "false_negatives"):
                    for err in report[what]:
                        extra = f" -> {err['reason']}" if err.get("reason") else ""
                        print(f"- [{report['judge']}] {what[:-1].replace('_', ' ')}: {err['id']}: {err['description']}{extra}")
            print()
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
