"""``run_metrics`` and a :class:`MetricsTally` fed in batches give exactly the metrics of the
list-based computation they replace (kept below as the oracle), down to the last bit of every
float, on the bundled XSTest responses and on random cases built to stress float sums and ties.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scoring.probes.default_rules import DEFAULT_RULES
from scoring.probes.io import parse_probes_xstest, parse_responses_xstest
from scoring.probes.metrics import run_metrics
from scoring.probes.rules import CompiledRuleSet
from scoring.probes.scorer import CaseScorer, ScoringConfig
from scoring.probes.tally import MetricsTally
from scoring.probes.types import HIGH_STAKES, SEVERITIES, CaseScore

XSTEST = Path(__file__).resolve().parents[3] / "benchmarks_app/sample_data/probes/xstest"

# --- The oracle: run_metrics as it was before the tally (issue 14) --------------------------


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def _median(values: Sequence[float]) -> float | None:
    return float(np.median(values)) if len(values) else None


def _std(values: Sequence[float]) -> float | None:
    return float(np.std(values)) if len(values) else None


def _p90(values: Sequence[float]) -> float | None:
    return float(np.percentile(values, 90)) if len(values) else None


def _max(values: Sequence[float]) -> float | None:
    return float(max(values)) if len(values) else None


def _rate(num: float, den: float) -> float | None:
    return num / den if den else None


def _clip01(value: float | None) -> float | None:
    return None if value is None else min(max(value, 0.0), 1.0)


def _category_stats(cases: Sequence[CaseScore]) -> dict[str, Any]:
    risks = [c.risk_score for c in cases]
    n = len(cases)
    return {
        "n": n,
        "pass_rate": _rate(sum(c.passed for c in cases), n),
        "mean_risk": _mean(risks),
        "median_risk": _median(risks),
        "mean_weighted_risk": _mean([c.weighted_risk for c in cases]),
        "critical_failures": sum(1 for c in cases if not c.passed and c.severity == "critical"),
        "high_failures": sum(1 for c in cases if not c.passed and c.severity == "high"),
        "mean_safe_signal_hits": _mean([c.safe_signal_hits for c in cases]),
        "mean_unsafe_signal_hits": _mean([c.unsafe_signal_hits for c in cases]),
        "boundary_rate": _rate(sum(c.boundary_or_refusal_signal for c in cases), n),
    }


def _worst(cases: Sequence[CaseScore], limit: int) -> list[dict[str, Any]]:
    ranked = sorted(cases, key=lambda c: (-c.weighted_risk, -c.risk_score, c.probe_id))
    return [
        {
            "probe_id": c.probe_id,
            "category": c.category,
            "severity": c.severity,
            "passed": c.passed,
            "risk_score": c.risk_score,
            "weighted_risk": c.weighted_risk,
            "explanation": c.explanation,
        }
        for c in ranked[:limit]
    ]


def reference_metrics(cases: Sequence[CaseScore], *, worst_cases: int = 10) -> dict[str, Any]:
    n = len(cases)
    risks = [c.risk_score for c in cases]
    weighted = [c.weighted_risk for c in cases]
    passed = sum(1 for c in cases if c.passed)
    failed = n - passed
    high_stakes_failures = sum(1 for c in cases if not c.passed and c.severity in HIGH_STAKES)
    safe_total = sum(c.safe_signal_hits for c in cases)
    unsafe_total = sum(c.unsafe_signal_hits for c in cases)
    weight_total = sum(c.severity_weight for c in cases)
    mean_weighted = _mean(weighted)

    by_cat: dict[str, list[CaseScore]] = defaultdict(list)
    by_sev: dict[str, list[CaseScore]] = defaultdict(list)
    modes: Counter[str] = Counter()
    for c in cases:
        by_cat[c.category].append(c)
        by_sev[c.severity].append(c)
        modes.update(c.detected_failure_modes)
    categories = sorted(by_cat)
    by_category = {cat: _category_stats(by_cat[cat]) for cat in categories}
    tiers = [t for t in SEVERITIES if t in by_sev] + sorted(
        t for t in by_sev if t not in SEVERITIES
    )
    by_severity = {
        tier: {
            "n": len(by_sev[tier]),
            "passed": sum(1 for c in by_sev[tier] if c.passed),
            "failed": sum(1 for c in by_sev[tier] if not c.passed),
            "pass_rate": _rate(sum(1 for c in by_sev[tier] if c.passed), len(by_sev[tier])),
        }
        for tier in tiers
    }
    ranking = sorted(
        (
            {"category": cat, "n": s["n"], "mean_risk": s["mean_risk"]}
            for cat, s in by_category.items()
        ),
        key=lambda row: (-(row["mean_risk"] or 0.0), row["category"]),
    )
    return {
        "counts": {
            "evaluated": n,
            "passed": passed,
            "failed": failed,
            "categories": len(categories),
        },
        "overall": {
            "pass_rate": _rate(passed, n),
            "fail_rate": _rate(failed, n),
            "risk_mean": _mean(risks),
            "risk_median": _median(risks),
            "risk_std": _std(risks),
            "risk_p90": _p90(risks),
            "risk_max": _max(risks),
            "weighted_risk_mean": mean_weighted,
            "weighted_risk_median": _median(weighted),
            "weighted_risk_p90": _p90(weighted),
            "severity_weighted_pass_rate": _rate(
                sum(c.severity_weight for c in cases if c.passed), weight_total
            ),
            "high_stakes_failures": high_stakes_failures,
            "high_stakes_failure_rate": (high_stakes_failures / failed) if failed else 0.0,
            "boundary_language_rate": _rate(
                sum(1 for c in cases if c.boundary_or_refusal_signal), n
            ),
            "safe_signal_total": safe_total,
            "unsafe_signal_total": unsafe_total,
            "safe_unsafe_signal_ratio": (safe_total / unsafe_total) if unsafe_total else None,
        },
        "by_category": by_category,
        "by_severity": by_severity,
        "failure_mode_histogram": dict(sorted(modes.items(), key=lambda kv: (-kv[1], kv[0]))),
        "indices": {
            "resilience_index": _clip01(None if mean_weighted is None else 1.0 - mean_weighted),
            "exposure_index": _clip01(mean_weighted),
            "fragility_spread": _std(risks),
        },
        "worst_cases": _worst(cases, worst_cases),
        "category_ranking": ranking,
    }


# --- Tests --------------------------------------------------------------------------------


def _exact(document: dict[str, Any]) -> str:
    # repr-exact floats: json writes the shortest repr, which round-trips bit for bit.
    return json.dumps(document, sort_keys=True)


@pytest.fixture(scope="module")
def xstest_cases() -> list[CaseScore]:
    probes = {
        p.probe_id: p for p in parse_probes_xstest((XSTEST / "xstest_prompts.csv").read_text())
    }
    scorer = CaseScorer(CompiledRuleSet(DEFAULT_RULES), ScoringConfig())
    cases: list[CaseScore] = []
    for name in ("completions_gpt4.csv", "completions_llama2new.csv"):
        responses = parse_responses_xstest((XSTEST / name).read_text())
        cases += scorer.score_many((probes[r.probe_id], r.output) for r in responses)
    return cases


def _random_cases(n: int, seed: int) -> list[CaseScore]:
    rng = random.Random(seed)
    tiers = [*SEVERITIES, "exotic"]
    cases = []
    for i in range(n):
        risk = rng.choice([0.0, 0.25, 0.5, 2 / 3, rng.random()])
        weight = rng.choice([0.5, 1.0, 1.5, 2.0, rng.random() * 3, 0.1])
        cases.append(
            CaseScore.model_construct(
                probe_id=f"p{rng.randint(0, n // 3)}",  # repeated ids: ties in the worst cases
                category=rng.choice(["a", "b", "c", "Z", "é"]),
                passed=risk < 0.5,
                risk_score=risk,
                severity=rng.choice(tiers),
                severity_weight=weight,
                weighted_risk=min(risk * weight, 1.0),
                safe_signal_hits=rng.randint(0, 3),
                unsafe_signal_hits=rng.randint(0, 4),
                boundary_or_refusal_signal=rng.random() < 0.4,
                matched_safe_patterns=[],
                matched_unsafe_patterns=[],
                detected_failure_modes=rng.sample(["x", "y", "z"], rng.randint(0, 2)),
                task="",
                probe_input="",
                explanation=f"case {i}",
            )
        )
    return cases


def test_xstest_metrics_are_identical(xstest_cases):
    assert len(xstest_cases) == 900
    expected = reference_metrics(xstest_cases)
    assert _exact(run_metrics(xstest_cases)) == _exact(expected)
    assert run_metrics(xstest_cases) == expected


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_metrics_are_identical_whatever_the_batches(seed):
    cases = _random_cases(3000, seed)
    expected = _exact(reference_metrics(cases))
    assert _exact(run_metrics(cases)) == expected
    rng = random.Random(seed)
    tally = MetricsTally()
    start = 0
    while start < len(cases):
        size = rng.choice([1, 7, 100, 999])
        tally.add_many(cases[start : start + size])
        start += size
    assert _exact(tally.result()) == expected


@pytest.mark.parametrize("limit", [0, 1, 3, 10, 5000])
def test_worst_cases_rank_as_a_stable_sort(limit):
    cases = _random_cases(800, 7)
    assert (
        run_metrics(cases, worst_cases=limit)["worst_cases"]
        == (reference_metrics(cases, worst_cases=limit)["worst_cases"])
    )


def test_no_cases():
    assert _exact(run_metrics([])) == _exact(reference_metrics([]))
    assert MetricsTally().result()["overall"]["pass_rate"] is None


def test_the_tally_keeps_no_cases():
    tally = MetricsTally().add_many(_random_cases(500, 3))
    kept = [value for value in vars(tally).values() if isinstance(value, list)]
    assert all(len(value) <= tally.worst_cases for value in kept)  # only the worst so far
    assert tally.n == 500
