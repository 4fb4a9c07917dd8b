"""Server-drawn pictures of a board's uncertainty: inline SVG, no script, no CDN.

:func:`forest_svg` draws a forest plot of a board page's rows (a dot at each entry's value and
its 95% whisker, tied rows joined on the left, alternate tie groups in alternate colours), so
that ties are seen at a glance beside the table. :func:`difference_svg` draws the distribution
of two entries' resampled paired differences with 0 and the 95% band, for the compare page.

Colours and strokes come from classes in ``site.css`` (the site's CSP allows no inline style
sheet); geometry is given by SVG attributes, which CSP does not restrict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from benchmarks_app.formatting import format_fixed

FOREST_WIDTH = 340
LABEL_WIDTH = 112
ROW_HEIGHT = 16
AXIS_HEIGHT = 26
PLOT_RIGHT_PAD = 14
LABEL_CHARS = 15


@dataclass(frozen=True)
class ForestPoint:
    label: str
    value: float | None
    low: float | None
    high: float | None
    tied_with_above: bool = False
    rule_fixed: bool = False
    mine: bool = False


def _number(value: float, *, percent: bool, digits: int = 1) -> str:
    return f"{format_fixed(100 * value, digits)}%" if percent else format_fixed(value, digits + 2)


def _domain(values: Sequence[float]) -> tuple[float, float]:
    """The axis: the data's span widened to tenths, within [0, 1] where the data are."""
    low, high = min(values), max(values)
    start = math.floor(low * 10) / 10
    end = math.ceil(high * 10) / 10
    if low >= 0.0 and high <= 1.0:
        start, end = max(0.0, start), min(1.0, end)
    if end - start < 0.1:
        start, end = max(0.0, start - 0.1), end + 0.1
    return start, end


def _ticks(start: float, end: float) -> list[float]:
    step = 0.1 if end - start <= 0.5 else 0.2 if end - start <= 1.0 else (end - start) / 5
    count = round((end - start) / step)
    return [start + i * step for i in range(count + 1)]


def forest_svg(points: Sequence[ForestPoint], *, percent: bool, title: str) -> SafeString:
    """A forest plot of ``points`` in the order given; empty when no point has a value."""
    measured = [
        v for p in points for v in (p.value, p.low, p.high) if v is not None and math.isfinite(v)
    ]
    if not measured:
        return mark_safe("")
    start, end = _domain(measured)
    left, right = LABEL_WIDTH, FOREST_WIDTH - PLOT_RIGHT_PAD
    height = AXIS_HEIGHT + ROW_HEIGHT * len(points) + 6

    def x(value: float) -> float:
        return round(left + (right - left) * (value - start) / (end - start), 1)

    parts = [
        f'<svg class="forest-plot" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'width="{FOREST_WIDTH}" height="{height}" viewBox="0 0 {FOREST_WIDTH} {height}">',
        f"<title>{escape(title)}</title>",
    ]
    for tick in _ticks(start, end):
        tx = x(tick)
        parts.append(
            f'<line class="grid" x1="{tx}" y1="{AXIS_HEIGHT - 6}" x2="{tx}" y2="{height - 4}"/>'
            f'<text class="tick" x="{tx}" y="{AXIS_HEIGHT - 10}" text-anchor="middle">'
            f"{escape(_number(tick, percent=percent, digits=0))}</text>"
        )
    group = 0
    for index, point in enumerate(points):
        y = AXIS_HEIGHT + ROW_HEIGHT * index + ROW_HEIGHT / 2
        if index and not point.tied_with_above:
            group += 1
        classes = f"entry g{group % 2}" + (" mine" if point.mine else "")
        classes += " rule" if point.rule_fixed else ""
        label = point.label if len(point.label) <= LABEL_CHARS else point.label[: LABEL_CHARS - 1]
        label += "" if label == point.label else "…"
        parts.append(f'<g class="{classes}">')
        described = (
            f"{point.label}: "
            + (_number(point.value, percent=percent) if point.value is not None else "not ranked")
            + (
                f" (95% CI {_number(point.low, percent=percent)}"
                f" to {_number(point.high, percent=percent)})"
                if point.low is not None and point.high is not None
                else ""
            )
            + (", tied with the row above" if point.tied_with_above else "")
            + (", placed by the challenge's rule" if point.rule_fixed else "")
        )
        parts.append(f"<title>{escape(described)}</title>")
        parts.append(
            f'<text class="label" x="{left - 12}" y="{y + 4}" text-anchor="end">'
            f"{escape(label)}</text>"
        )
        if point.tied_with_above and index:
            parts.append(
                f'<line class="tie-link" x1="{left - 6}" y1="{y - ROW_HEIGHT}" '
                f'x2="{left - 6}" y2="{y}"/>'
            )
        if point.low is not None and point.high is not None:
            parts.append(
                f'<line class="whisker" x1="{x(point.low)}" y1="{y}" x2="{x(point.high)}" '
                f'y2="{y}"/>'
            )
        if point.value is not None:
            if point.rule_fixed:
                cx = x(point.value)
                parts.append(f'<rect class="dot" x="{cx - 4}" y="{y - 4}" width="8" height="8"/>')
            else:
                parts.append(f'<circle class="dot" cx="{x(point.value)}" cy="{y}" r="4"/>')
        parts.append("</g>")
    parts.append("</svg>")
    # Every text above went through escape(); numbers are formatted by this module.
    return mark_safe("".join(parts))


DIFF_WIDTH, DIFF_HEIGHT = 560, 180
DIFF_BINS = 40


def difference_svg(
    draws: Sequence[float],
    *,
    value: float,
    low: float,
    high: float,
    percent: bool,
    title: str,
) -> SafeString:
    """A histogram of resampled differences, the 95% band shaded, 0 and the observed
    difference drawn as lines; empty without draws."""
    finite = [d for d in draws if math.isfinite(d)]
    if not finite:
        return mark_safe("")
    start = min(min(finite), low, 0.0)
    end = max(max(finite), high, 0.0)
    if end - start <= 0:
        start, end = start - 0.01, end + 0.01
    pad = (end - start) * 0.05
    start, end = start - pad, end + pad
    left, right, top, bottom = 40, DIFF_WIDTH - 12, 12, DIFF_HEIGHT - 28
    width = (end - start) / DIFF_BINS
    counts = [0] * DIFF_BINS
    for d in finite:
        counts[min(DIFF_BINS - 1, int((d - start) / width))] += 1
    tallest = max(counts)

    def x(v: float) -> float:
        return round(left + (right - left) * (v - start) / (end - start), 1)

    parts = [
        f'<svg class="difference-plot" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'width="{DIFF_WIDTH}" height="{DIFF_HEIGHT}" viewBox="0 0 {DIFF_WIDTH} {DIFF_HEIGHT}">',
        f"<title>{escape(title)}</title>",
        f'<rect class="band" x="{x(low)}" y="{top}" width="{max(1.0, x(high) - x(low))}" '
        f'height="{bottom - top}"/>',
    ]
    for i, count in enumerate(counts):
        if not count:
            continue
        bar = (bottom - top) * count / tallest
        parts.append(
            f'<rect class="bar" x="{x(start + i * width)}" y="{round(bottom - bar, 1)}" '
            f'width="{max(0.5, round(x(start + (i + 1) * width) - x(start + i * width) - 1, 1))}" '
            f'height="{round(bar, 1)}"/>'
        )
    parts.append(
        f'<line class="zero" x1="{x(0.0)}" y1="{top - 4}" x2="{x(0.0)}" y2="{bottom}"/>'
        f'<text class="tick" x="{x(0.0)}" y="{bottom + 14}" text-anchor="middle">0</text>'
        f'<line class="observed" x1="{x(value)}" y1="{top}" x2="{x(value)}" y2="{bottom}"/>'
        f'<line class="axis" x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}"/>'
    )
    for edge, anchor in ((low, "end"), (high, "start")):
        parts.append(
            f'<text class="tick band-edge" x="{x(edge)}" y="{bottom + 26}" '
            f'text-anchor="{anchor}">{escape(_signed(edge, percent=percent))}</text>'
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))


def _signed(value: float, *, percent: bool) -> str:
    text = _number(value, percent=percent)
    return text if value < 0 else f"+{text}"
