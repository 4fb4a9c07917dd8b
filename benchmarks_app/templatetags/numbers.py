"""``{{ value|fixed:3 }}``: a metric with the digits and rounding of the CLI and the API."""

from __future__ import annotations

from typing import Any

from django import template

from benchmarks_app.formatting import format_fixed

register = template.Library()


@register.filter
def fixed(value: Any, digits: int | str = 3) -> str:
    """``value`` rounded as ``benchmarks_app.formatting.format_fixed`` does; "—" when missing."""
    if value is None or value == "":
        return "—"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return format_fixed(number, int(digits))
