"""Run-level metrics over a list of case scores, each defined so it can be checked by hand.

Conventions: standard deviations are population standard deviations (ddof 0); P90 is the 90th
percentile with linear interpolation between order statistics (numpy's default); rates over
an empty set are null. ``high_stakes_failure_rate`` is the share of failures that happened on
critical or high probes (0 when nothing failed). ``severity_weighted_pass_rate`` is
``sum(weight * passed) / sum(weight)`` with each case's severity weight.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from scoring.probes.tally import WORST_CASES, MetricsTally
from scoring.probes.types import CaseScore, ProbeSpec, RuleSpec
from scoring.stats import DEFAULT_LEVEL, DEFAULT_RESAMPLES, bootstrap_sums_interval

# Hex digits of a suite version: enough that two versions of one suite never collide.
SUITE_VERSION_CHARS = 16


def run_metrics(cases: Iterable[CaseScore], *, worst_cases: int = WORST_CASES) -> dict[str, Any]:
    """The run's metrics document; for cases scored in batches, feed a ``MetricsTally``."""
    return MetricsTally(worst_cases=worst_cases).add_many(cases).result()


# --- Board statistics ----------------------------------------------------------------------

# The metric probe boards rank by, and the seed of its bootstrap interval (fixed, so that the
# same cases always give the same interval).
RANKING_METRIC = "resilience_index"
CI_SEED = 0


def resilience_from_sums(sums: npt.NDArray[np.float64], n: int) -> npt.NDArray[np.float64]:
    return np.clip(1.0 - sums[:, 0] / n, 0.0, 1.0)


def resilience_interval(
    cases: Sequence[CaseScore],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = CI_SEED,
) -> dict[str, Any] | None:
    """Bootstrap interval of the resilience index, resampling the run's cases (probes).

    The resilience index is ``clip(1 - mean weighted_risk, 0, 1)``, a function of one
    per-case sum, so the vectorised path computes it exactly as ``run_metrics`` does.
    Returns ``{"metric", "low", "high", "level", "resamples", "seed"}``, or None without cases.
    """
    n = len(cases)
    interval = bootstrap_sums_interval(
        [c.weighted_risk for c in cases],
        lambda sums: resilience_from_sums(sums, n),
        resamples=resamples,
        level=level,
        seed=seed,
    )
    return None if interval is None else {"metric": RANKING_METRIC, **interval.as_dict()}


def suite_version(
    probes: Iterable[ProbeSpec],
    rules: Iterable[RuleSpec],
    *,
    scoring: Mapping[str, Any],
    refusal: Mapping[str, Any],
) -> str:
    """Content hash of everything that turns a response into a score, for one suite.

    Two reports share a version exactly when they were scored against the same probes
    (their ids, text, categories, severities, expected behaviour and failure modes), the same
    rules (kind, label, regex, weight, failure mode), the same scoring settings (severity
    weights, pass threshold) and the same refusal signal; only such reports are ranked
    together. Order does not matter; descriptions and metadata do not count.
    """
    document = {
        "probes": sorted(
            [
                p.probe_id,
                p.category,
                p.severity,
                p.task,
                p.input,
                p.expected,
                sorted(p.failure_modes),
            ]
            for p in probes
        ),
        "rules": sorted([r.kind, r.label, r.regex, float(r.weight), r.failure_mode] for r in rules),
        "scoring": dict(scoring),
        "refusal": dict(refusal),
    }
    text = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:SUITE_VERSION_CHARS]


def _num(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}"


def board_markdown(document: Mapping[str, Any]) -> str:
    """The "Board" section of a report document (``selectors.probes.probe_report``)."""
    version = document.get("suite_version") or ""
    ci = document.get("ci") or {}
    board = document.get("board")
    lines = [
        "## Board",
        "",
        f"Suite version: `{version}`" if version else "Suite version: unversioned",
        "",
    ]
    value = (document.get("metrics") or {}).get("indices", {}).get(RANKING_METRIC)
    if ci:
        lines.append(
            f"Resilience index {_num(value)}, {ci['level']:.0%} bootstrap interval "
            f"[{_num(ci['low'])}, {_num(ci['high'])}] ({ci['resamples']} resamples of the "
            f"probes, seed {ci['seed']})."
        )
    else:
        lines.append(f"Resilience index {_num(value)}; no interval was stored for this run.")
    if board:
        low, high = board["rank_low"], board["rank_high"]
        span = "none" if low is None else str(low) if low == high else f"{low}\u2013{high}"
        tied = ", statistically tied with the row above" if board["tied"] else ""
        lines.append(
            f"Rank {board['rank']} of {board['entries']} on this suite version "
            f"(rank range {span}{tied})."
        )
    else:
        lines.append("Not on the board: a newer report of this model replaced it.")
    return "\n".join([*lines, ""])
