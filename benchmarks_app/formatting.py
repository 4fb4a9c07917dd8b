"""Plain-text formatting shared by the management commands and the demo (``make demo``).

It sits below both so that neither imports the other: the demo prints the same checklist
table as ``manage.py checklist_leaderboard``, and the probe demo and ``probe_agreement`` the
same three-decimal scores.
"""

from __future__ import annotations

from typing import Any


def format_score(value: float | None) -> str:
    """A score to three decimals, or a dash when there is none."""
    return "—" if value is None else f"{value:.3f}"


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
    return None if low is None or high is None else f"{low:.3f}\u2013{high:.3f}"


def rank_range_text(low: int | None, high: int | None) -> str | None:
    """A rank range as shown on the boards: ``3`` when it is one rank, else ``2`` en dash ``5``."""
    if low is None or high is None:
        return None
    return str(low) if low == high else f"{low}\u2013{high}"
