"""Small server-side SVG charts for the admin dashboard (no JavaScript, no CDN).

Pure functions from numbers to SVG markup. Every text is escaped; ``None`` in a series is
a gap (no data in that bucket), not a zero.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 560, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 28, 40
PALETTE = {
    "green": "#2e7d32",
    "red": "#c62828",
    "blue": "#1565c0",
    "orange": "#ef6c00",
    "purple": "#6a1b9a",
    "grey": "#757575",
}


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]
    color: str = "blue"


def nice_max(value: float) -> float:
    """A round axis maximum at or above ``value`` (1, 2 or 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(value))
    return next(step * magnitude for step in (1, 2, 5, 10) if step * magnitude >= value)


def _fmt(value: float) -> str:
    if value >= 100 or value == int(value):
        return f"{value:.0f}"
    return f"{value:.2g}" if value < 1 else f"{value:.1f}"


def _frame(title: str, labels: Sequence[str], y_max: float, unit: str, body: list[str]) -> str:
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">',
        f'<text x="{LEFT}" y="16" class="chart-title" font-size="13" font-weight="bold">'
        f"{escape(title)}</text>",
    ]
    for i in range(5):
        value = y_max * i / 4
        y = TOP + plot_h - plot_h * i / 4
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="#ddd" stroke-width="1"/>'
            f'<text x="{LEFT - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end" '
            f'fill="#555">{escape(_fmt(value))}{escape(unit)}</text>'
        )
    step = max(1, len(labels) // 6)
    for i, label in enumerate(labels):
        if i % step == 0:
            x = LEFT + plot_w * (i + 0.5) / max(len(labels), 1)
            parts.append(
                f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 14}" font-size="10" '
                f'text-anchor="middle" fill="#555">{escape(label)}</text>'
            )
    parts.extend(body)
    parts.append("</svg>")
    return "".join(parts)


def _legend(series: Sequence[Series]) -> list[str]:
    parts, x = [], LEFT
    for s in series:
        color = PALETTE.get(s.color, s.color)
        parts.append(
            f'<rect x="{x}" y="{HEIGHT - 14}" width="10" height="10" fill="{escape(color)}"/>'
            f'<text x="{x + 14}" y="{HEIGHT - 5}" font-size="11">{escape(s.name)}</text>'
        )
        x += 24 + 7 * len(s.name)
    return parts


def line_chart(
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    unit: str = "",
    y_max: float | None = None,
) -> SafeString:
    present = [v for s in series for v in s.values if v is not None]
    top = y_max if y_max is not None else nice_max(max(present, default=0.0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    n = max(len(labels), 1)
    body: list[str] = []
    for s in series:
        color = escape(PALETTE.get(s.color, s.color))
        points: list[list[str]] = [[]]
        for i, value in enumerate(s.values):
            if value is None:
                points.append([])
                continue
            x = LEFT + plot_w * (i + 0.5) / n
            y = TOP + plot_h - plot_h * min(value, top) / top
            points[-1].append(f"{x:.1f},{y:.1f}")
            body.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}">'
                f"<title>{escape(s.name)} {escape(labels[i] if i < len(labels) else '')}: "
                f"{escape(_fmt(value))}{escape(unit)}</title></circle>"
            )
        for run in points:
            if len(run) > 1:
                body.append(
                    f'<polyline class="series" fill="none" stroke="{color}" stroke-width="2" '
                    f'points="{" ".join(run)}"/>'
                )
    body.extend(_legend(series))
    return mark_safe(_frame(title, labels, top, unit, body))  # noqa: S308 (all text escaped)


def bar_chart(
    title: str, labels: Sequence[str], series: Sequence[Series], *, unit: str = ""
) -> SafeString:
    """Stacked bars, one stack per label."""
    n = max(len(labels), 1)
    totals = [sum(s.values[i] or 0 for s in series) for i in range(len(labels))]
    top = nice_max(max(totals, default=0.0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    bar_w = plot_w / n * 0.7
    body: list[str] = []
    for i in range(len(labels)):
        base = 0.0
        for s in series:
            value = s.values[i] or 0
            if value <= 0:
                continue
            x = LEFT + plot_w * (i + 0.15) / n
            height = plot_h * value / top
            y = TOP + plot_h - plot_h * (base + value) / top
            body.append(
                f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" '
                f'height="{height:.1f}" fill="{escape(PALETTE.get(s.color, s.color))}">'
                f"<title>{escape(s.name)} {escape(labels[i])}: {escape(_fmt(value))}"
                f"{escape(unit)}</title></rect>"
            )
            base += value
    body.extend(_legend(series))
    return mark_safe(_frame(title, labels, top, unit, body))  # noqa: S308 (all text escaped)


def hbar_chart(
    title: str, items: Sequence[tuple[str, float]], *, color: str = "red", empty: str = "none"
) -> SafeString:
    """Horizontal bars, e.g. the endpoints with the most failures."""
    row_h = 24
    height = TOP + max(len(items), 1) * row_h + 8
    top = nice_max(max((v for _, v in items), default=0.0))
    label_w, plot_w = 230, WIDTH - 230 - RIGHT - 40
    fill = escape(PALETTE.get(color, color))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" aria-label="{escape(title)}">',
        f'<text x="{LEFT}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    if not items:
        parts.append(
            f'<text x="{LEFT}" y="{TOP + 14}" font-size="12" fill="#555">{escape(empty)}</text>'
        )
    for i, (label, value) in enumerate(items):
        y = TOP + i * row_h
        short = label if len(label) <= 36 else label[:35] + "…"
        width = plot_w * value / top
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 15}" font-size="11" text-anchor="end">'
            f"<title>{escape(label)}</title>{escape(short)}</text>"
            f'<rect class="bar" x="{label_w}" y="{y + 3}" width="{width:.1f}" height="16" '
            f'fill="{fill}"/><text x="{label_w + width + 4:.1f}" y="{y + 15}" '
            f'font-size="11">{escape(_fmt(value))}</text>'
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 (all text escaped)
