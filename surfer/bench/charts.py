"""Small self-contained SVG line charts (no library, no network), for
benchmark pages such as `surfer bench throughput`'s HTML beside its JSON."""

from __future__ import annotations

from html import escape
from typing import Sequence

COLORS = ("#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700")


def _ticks(top: float) -> list[float]:
    return [top * k / 4 for k in range(5)]


def line_chart(
    title: str, xs: Sequence[float], series: dict[str, Sequence[float | None]], *, x_label: str, y_label: str,
    width: int = 560, height: int = 300,
) -> str:
    """An <svg> plotting each named series against `xs` (None values leave gaps)."""
    left, right, top, bottom = 64, 16, 34, 46
    values = [v for ys in series.values() for v in ys if v is not None]
    y_top = (max(values) if values else 1.0) * 1.1 or 1.0
    x_min, x_max = (min(xs), max(xs)) if xs else (0.0, 1.0)
    x_max = x_max if x_max > x_min else x_min + 1

    def X(x: float) -> float:
        return left + (width - left - right) * (x - x_min) / (x_max - x_min)

    def Y(y: float) -> float:
        return height - bottom - (height - top - bottom) * y / y_top

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'font-family="system-ui, sans-serif" font-size="11">',
        f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14" font-weight="600">{escape(title)}</text>',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="#8c959f"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="#8c959f"/>',
    ]
    for tick in _ticks(y_top):
        parts.append(f'<line x1="{left}" y1="{Y(tick):.1f}" x2="{width - right}" y2="{Y(tick):.1f}" stroke="#eaeef2"/>')
        parts.append(f'<text x="{left - 6}" y="{Y(tick) + 4:.1f}" text-anchor="end">{tick:.3g}</text>')
    for x in xs:
        parts.append(f'<text x="{X(x):.1f}" y="{height - bottom + 16}" text-anchor="middle">{x:g}</text>')
    parts.append(f'<text x="{(left + width - right) / 2}" y="{height - 8}" text-anchor="middle">{escape(x_label)}</text>')
    parts.append(f'<text transform="translate(14 {(top + height - bottom) / 2}) rotate(-90)" text-anchor="middle">{escape(y_label)}</text>')
    for i, (name, ys) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        points = [(X(x), Y(y)) for x, y in zip(xs, ys) if y is not None]
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                     + " ".join(f"{px:.1f},{py:.1f}" for px, py in points) + '"/>')
        parts += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{color}"/>' for px, py in points]
        parts.append(f'<text x="{left + 10 + 150 * i}" y="{top + 4}" fill="{color}">— {escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def page(title: str, intro: str, charts: list[str]) -> str:
    """One self-contained HTML page holding `charts`."""
    body = "\n".join(f"<figure>{chart}</figure>" for chart in charts)
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        "<style>body{font:14px system-ui,sans-serif;margin:24px;color:#1f2328}figure{display:inline-block;margin:8px}</style>"
        f"</head><body><h1>{escape(title)}</h1><p>{escape(intro)}</p>{body}</body></html>\n"
    )
