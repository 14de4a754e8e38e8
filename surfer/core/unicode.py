"""Text a model wrote, made safe to keep: a lone UTF-16 surrogate (half of a pair, as a JSON escape
`"\\udeaa"` or in a server's answer) is a Python string that no UTF-8 file, terminal or JSON reader
takes; each becomes U+FFFD, the replacement character. A whole pair is one character already."""

from __future__ import annotations

import re
from typing import Any

_LONE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def mend(text: str) -> str:
    """`text` with every lone surrogate replaced (the same object where there is none)."""
    return _LONE.sub(REPLACEMENT, text) if _LONE.search(text) else text


def mend_json(value: Any) -> Any:
    """A parsed JSON value with every string in it (keys too) mended."""
    if isinstance(value, str):
        return mend(value)
    if isinstance(value, dict):
        return {mend(k): mend_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mend_json(v) for v in value]
    return value
