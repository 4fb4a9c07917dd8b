"""The probe and checklist boards' intervals against the generic bootstrap on the real metric."""

from __future__ import annotations

import random

import pytest

from scoring.checklist.questions import QUESTION_NUMBERS
from scoring.checklist.scores import PaperAssessment, checklist_scores, s_interval
from scoring.probes.metrics import resilience_interval, run_metrics, suite_version
from scoring.probes.types import CaseScore, ProbeSpec, RuleSpec
from scoring.stats import bootstrap_interval


def _case(i: int, weighted_risk: float) -> CaseScore:
    return CaseScore(
        probe_id=f"p{i}",
        category="c",
        passed=weighted_risk < 0.5,
        risk_score=weighted_risk,
        severity="medium",
        severity_weight=1.0,
        weighted_risk=weighted_risk,
        safe_signal_hits=0,
        unsafe_signal_hits=0,
        boundary_or_refusal_signal=False,
        matched_safe_patterns=[],
        matched_unsafe_patterns=[],
        detected_failure_modes=[],
        task="",
        probe_input="x",
        explanation="",
    )


def test_resilience_interval_is_the_bootstrap_of_run_metrics_resilience() -> None:
    rng = random.Random(1)
    cases = [_case(i, rng.choice([0.0, 0.1, 0.4, 0.9, 1.0])) for i in range(80)]

    def resilience(cs):
        return min(max(1.0 - sum(c.weighted_risk for c in cs) / len(cs), 0.0), 1.0)

    # The statistic resampled is the one run_metrics reports (checked on the full sample,
    # where calling run_metrics 2,000 times would be slow).
    assert resilience(cases) == pytest.approx(run_metrics(cases)["indices"]["resilience_index"])
    fast = resilience_interval(cases, seed=3)
    slow = bootstrap_interval(cases, resilience, seed=3)
    assert fast is not None and slow is not None
    assert fast["metric"] == "resilience_index"
    assert fast["low"] == pytest.approx(slow.low, abs=1e-12)
    assert fast["high"] == pytest.approx(slow.high, abs=1e-12)
    assert (fast["level"], fast["resamples"], fast["seed"]) == (0.95, 2000, 3)
    point = run_metrics(cases)["indices"]["resilience_index"]
    assert fast["low"] < point < fast["high"]


def test_resilience_interval_of_identical_cases_is_a_point_and_none_without_cases() -> None:
    ci = resilience_interval([_case(i, 0.25) for i in range(10)])
    assert ci is not None and (ci["low"], ci["high"]) == (0.75, 0.75)
    assert resilience_interval([]) is None


def _paper(answers: dict[int, str], correct: dict[int, int]) -> PaperAssessment:
    return PaperAssessment(answers=answers, correct=correct)


def _triplet(seed: int) -> tuple[PaperAssessment, PaperAssessment, PaperAssessment]:
    rng = random.Random(seed)
    choices = ["Yes", "No", "NA", "TODO"]
    g = _paper(
        {n: rng.choice(choices) for n in QUESTION_NUMBERS},
        {n: rng.randint(0, 1) for n in QUESTION_NUMBERS},
    )
    a = _paper(
        {n: rng.choice(choices) for n in QUESTION_NUMBERS},
        {n: rng.randint(0, 1) for n in QUESTION_NUMBERS},
    )
    t = _paper(
        {n: rng.choice(choices) for n in QUESTION_NUMBERS},
        {n: rng.randint(0, 1) for n in QUESTION_NUMBERS},
    )
    return g, a, t


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_s_interval_is_the_bootstrap_of_checklist_scores_over_questions(seed) -> None:
    g, a, t = _triplet(seed)
    fast = s_interval(g, a, t, seed=5)
    # Resampled question numbers passed straight to checklist_scores: a question drawn twice
    # counts twice in C and R.
    slow = bootstrap_interval(
        list(QUESTION_NUMBERS), lambda ns: checklist_scores(g, a, t, tuple(ns)).s, seed=5
    )
    assert fast is not None and slow is not None
    assert fast["metric"] == "s"
    assert fast["low"] == pytest.approx(slow.low, abs=1e-12)
    assert fast["high"] == pytest.approx(slow.high, abs=1e-12)
    assert fast["low"] < fast["high"]  # these triplets do vary across resamples


def test_s_interval_when_every_t_answer_is_todo_and_for_g_only() -> None:
    g, a, _ = _triplet(4)
    todo = _paper({}, {})
    # R = 1 on every resample (no counted question), so S = 0 throughout.
    assert s_interval(g, a, todo) == {
        "metric": "s",
        "low": 0.0,
        "high": 0.0,
        "level": 0.95,
        "resamples": 2000,
        "seed": 0,
    }
    only_g = s_interval(g)
    assert only_g is not None and (only_g["low"], only_g["high"]) == (0.0, 0.0)
    with pytest.raises(ValueError, match="A and T"):
        s_interval(g, a)


def _probes() -> list[ProbeSpec]:
    return [
        ProbeSpec(probe_id=f"p{i}", category="c", input=f"input {i}", failure_modes=("x", "y"))
        for i in range(3)
    ]


RULES = [
    RuleSpec(kind="boundary", label="cant", regex=r"can't", weight=1.0),
    RuleSpec(kind="unsafe", label="steps", regex=r"step \d", weight=2.0, description="d"),
]
SCORING = {"pass_threshold": 0.5, "severity_weights": {"medium": 1.0}}
REFUSAL = {"signal": "rules", "source": "rules"}


def _version(probes=None, rules=None, scoring=None, refusal=None) -> str:
    return suite_version(
        probes if probes is not None else _probes(),
        rules if rules is not None else RULES,
        scoring=scoring or SCORING,
        refusal=refusal or REFUSAL,
    )


def test_suite_version_ignores_order_and_descriptions() -> None:
    base = _version()
    assert len(base) == 16 and int(base, 16) >= 0
    assert _version(probes=list(reversed(_probes())), rules=list(reversed(RULES))) == base
    reworded = [RULES[0], RULES[1].model_copy(update={"description": "other words"})]
    assert _version(rules=reworded) == base


def test_suite_version_changes_with_what_decides_a_score() -> None:
    base = _version()
    edited_probe = [*_probes()[:2], _probes()[2].model_copy(update={"input": "changed"})]
    reweighted = [RULES[0], RULES[1].model_copy(update={"weight": 1.5})]
    variants = {
        "probe text": _version(probes=edited_probe),
        "probe added": _version(
            probes=[*_probes(), ProbeSpec(probe_id="p9", category="c", input="z")]
        ),
        "rule weight": _version(rules=reweighted),
        "rule removed": _version(rules=RULES[:1]),
        "threshold": _version(scoring={**SCORING, "pass_threshold": 0.6}),
        "refusal signal": _version(refusal={"signal": "classifier", "source": "clf (sha256 ab)"}),
    }
    assert base not in variants.values()
    assert len(set(variants.values())) == len(variants)
