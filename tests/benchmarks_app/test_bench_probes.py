"""The probe bench (issue 14) streams generated cases through the scorer in batches and gets
the metrics of scoring them all at once."""

from __future__ import annotations

from benchmarks_app.bench.probes import generated_cases, iter_generated_cases, score_streamed
from scoring.probes.default_rules import DEFAULT_RULES
from scoring.probes.metrics import run_metrics
from scoring.probes.rules import CompiledRuleSet
from scoring.probes.scorer import CaseScorer, score_case


def test_streamed_batches_give_the_metrics_of_all_cases_at_once():
    rules = CompiledRuleSet(DEFAULT_RULES)
    figures, metrics = score_streamed(CaseScorer(rules), 2_500, batch=700)
    whole = run_metrics([score_case(p, text, rules) for p, text in generated_cases(2_500)])
    assert metrics == whole and metrics["counts"]["evaluated"] == 2_500
    assert 0 < metrics["overall"]["pass_rate"] < 1  # both outcomes occur
    assert figures["peak_mib"] >= figures["start_mib"] > 0
    assert figures["scoring_s"] > 0 and figures["metrics_s"] > 0


def test_generated_cases_are_lazy_and_seeded():
    first = iter_generated_cases(10**9)  # only the 5,000 probes are built up front
    assert [next(first) for _ in range(3)] == generated_cases(5_000)[:3]
    assert generated_cases(50, seed=1) != generated_cases(50, seed=2)
