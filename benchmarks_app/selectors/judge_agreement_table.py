"""Every judge's agreement with the curated verdicts as a plain-text table.

``manage.py import_curated_verdicts`` prints it after an import and ``make demo`` after the
demo's; it sits here, below both, so that neither imports the other.
"""

from __future__ import annotations

from typing import Any


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _ci(ci: dict[str, Any] | None) -> str:
    return "" if not ci else f" [{ci['low']:.3f}, {ci['high']:.3f}]"


def agreement_table(figures: list[dict[str, Any]]) -> str:
    """The figures of :func:`~benchmarks_app.selectors.judge_agreement.judges_agreement`
    (or one judge's) one line per judge and benchmark, with its notes below it."""
    if not figures:
        return "No judge has judged an item with a curated verdict yet.\n"
    lines = ["judge / benchmark: n, accuracy [95% CI], Cohen's kappa [95% CI], failed"]
    for f in figures:
        lines.append(
            f"{f['judge']} / {f['benchmark']}: n={f['n']}, accuracy {_pct(f['accuracy'])}"
            f"{_ci(f['accuracy_ci'])}, kappa {_pct(f['kappa'])}{_ci(f['kappa_ci'])}, "
            f"failed {f['failed']}"
        )
        lines.extend(f"  note: {w}" for w in f["warnings"])
    return "\n".join(lines) + "\n"
