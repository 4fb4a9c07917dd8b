"""Plain-text formatting shared by the management commands and the demo (``make demo``).

It sits below both so that neither imports the other: the demo prints the same checklist
table as ``manage.py checklist_leaderboard``, and the probe demo and ``probe_agreement`` the
same three-decimal scores.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

Number = int | float | Decimal


def format_fixed(value: Number, digits: int, *, grouping: bool = False) -> str:
    """``value`` with ``digits`` decimals: the one rounding rule of every number shown.

    The rule is Python's own (``round(value, digits)``, ``f"{value:.3f}"``): the stored value
    is rounded to the nearest number with ``digits`` decimals, an exact tie to the even last
    digit. Pages (:mod:`benchmarks_app.views.tables`), the management commands, the demo and
    the reports all format with it or with the same f-string, so they agree to the digits shown,
    and the raw value a CSV download or the API returns rounds (``round(x, digits)``) to those
    digits too. A stored float is rounded as stored: ``0.0595`` is held as 0.059499999…, so
    it shows as ``0.059``; ``0.9375`` is exact and shows as ``0.938``. Django's
    ``number_format`` is not used: it cuts digits off (``0.9375`` → ``0.937``). ``grouping``
    adds thousands separators (``1,234.500``).
    """
    return format(value, f"{',' if grouping else ''}.{max(digits, 0)}f")


def format_percent(value: Number, digits: int = 1) -> str:
    """A fraction in [0, 1] as a percentage, ``100 * value`` rounded as :func:`format_fixed`.

    The same product and rule as the audit reports' ``f"{100 * value:.1f}%"``.
    """
    return f"{format_fixed(100 * float(value), digits)}%"


def format_score(value: float | None) -> str:
    """A score to three decimals (:func:`format_fixed`), or a dash when there is none."""
    return "—" if value is None else format_fixed(value, 3)


def render_checklist_table(rows: list[dict[str, Any]]) -> str:
    """The checklist leaderboard's rows (``checklist_leaderboard``) as a text table."""
    if not rows:
        return "No scored checklist entries yet."
    width = max(4, *(len(str(r["team"])) for r in rows))
    lines = [
        f"{'rank':>4}  {'team':<{width}}  {'entry':>6}  {'C_G':>5}  {'C_A':>5}  {'C_T':>5}  "
        f"{'R':>5}  {'S':>5}"
    ]
    for r in rows:
        lines.append(
            f"{r['rank']:>4}  {r['team']:<{width}}  {'#' + str(r['submission']):>6}  "
            f"{r['c_g']:5.2f}  {r['c_a']:5.2f}  {r['c_t']:5.2f}  {r['r']:5.2f}  {r['s']:5.2f}"
        )
    return "\n".join(lines)


# Board intervals and rank ranges, as every board (page, CLI) shows them.
TIED_MARK = "≈ tied"


def interval_text(low: float | None, high: float | None) -> str | None:
    """An interval as shown on the boards: low, an en dash, high (None: not computed)."""
    if low is None or high is None:
        return None
    return f"{format_fixed(low, 3)}\u2013{format_fixed(high, 3)}"


def percent_interval_text(low: float | None, high: float | None, digits: int = 1) -> str | None:
    """An interval of fractions shown as percentages, like the metric beside it."""
    if low is None or high is None:
        return None
    return f"{format_fixed(100 * low, digits)}\u2013{format_percent(high, digits)}"


def rank_range_text(low: int | None, high: int | None) -> str | None:
    """A rank range as shown on the boards: ``3`` when it is one rank, else ``2`` en dash ``5``."""
    if low is None or high is None:
        return None
    return str(low) if low == high else f"{low}\u2013{high}"


# The largest id a database column holds (a signed 64-bit integer).
MAX_ID = 2**63 - 1


def whole_number(text: object, *, maximum: int = MAX_ID) -> int | None:
    """``text`` (a query parameter, a form value) as a whole number from 0 to ``maximum``;
    None for anything else: not only ASCII digits, or larger.

    The length is checked before ``int()``: Python refuses strings of more than 4300 digits
    with an error that names ``sys.set_int_max_str_digits()`` (a 500 where a view let it
    through), and a number over ``maximum`` would overflow the database's column.
    """
    raw = "" if text is None else str(text).strip()
    if not raw or not raw.isascii() or not raw.isdigit() or len(raw) > len(str(maximum)):
        return None
    value = int(raw)
    return value if value <= maximum else None
