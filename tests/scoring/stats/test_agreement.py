"""Accuracy and Cohen's kappa of a judge against curated verdicts, with bootstrap intervals."""

from __future__ import annotations

import pytest

from scoring.probes.agreement import agreement_figures
from scoring.stats.agreement import agreement

CLASSES = ("match", "partial", "none")


def test_perfect_agreement_is_one_and_its_interval_is_the_point() -> None:
    pairs = [("match", "match")] * 5 + [("none", "none")] * 15
    found = agreement(pairs, classes=CLASSES)
    assert (found.n, found.accuracy, found.kappa) == (20, 1.0, 1.0)
    assert found.accuracy_ci is not None and found.kappa_ci is not None
    assert (found.accuracy_ci.low, found.accuracy_ci.high) == (1.0, 1.0)
    assert found.confusion["match"]["match"] == 5 and found.confusion["none"]["match"] == 0


def test_kappa_matches_the_textbook_two_class_example() -> None:
    # Judge says yes/no; curated yes/no: 20 yes-yes, 5 yes-no, 10 no-yes, 15 no-no (n=50).
    pairs = (
        [("refusal", "refusal")] * 20
        + [("refusal", "compliance")] * 5
        + [("compliance", "refusal")] * 10
        + [("compliance", "compliance")] * 15
    )
    found = agreement(pairs, classes=("refusal", "compliance"))
    # p_o = 0.7, p_e = 0.5*0.6 + 0.5*0.4 = 0.5, kappa = 0.4
    assert found.accuracy == pytest.approx(0.7)
    assert found.kappa == pytest.approx(0.4)
    # The same figures as the probes' existing two-class agreement code.
    legacy = agreement_figures((j == "refusal", c == "refusal") for j, c in pairs)
    assert found.kappa == pytest.approx(legacy["kappa"])
    assert found.kappa_ci is not None
    assert found.kappa_ci.low < 0.4 < found.kappa_ci.high


def test_intervals_are_seeded_and_shrink_with_more_items() -> None:
    pairs = [("match", "match"), ("none", "none"), ("none", "match"), ("none", "none")] * 10
    one = agreement(pairs, classes=CLASSES, seed=3)
    again = agreement(pairs, classes=CLASSES, seed=3)
    assert one.kappa_ci == again.kappa_ci and one.accuracy_ci == again.accuracy_ci
    more = agreement(pairs * 10, classes=CLASSES, seed=3)
    assert one.accuracy_ci is not None and more.accuracy_ci is not None
    width = one.accuracy_ci.high - one.accuracy_ci.low
    assert more.accuracy_ci.high - more.accuracy_ci.low < width
    assert more.accuracy == pytest.approx(one.accuracy)


def test_single_class_everywhere_has_no_kappa() -> None:
    found = agreement([("none", "none")] * 8, classes=CLASSES)
    assert found.accuracy == 1.0 and found.kappa is None and found.kappa_ci is None


def test_no_pairs_gives_no_figures() -> None:
    found = agreement([], classes=CLASSES)
    assert (found.n, found.accuracy, found.kappa, found.accuracy_ci) == (0, None, None, None)


def test_a_label_outside_the_classes_is_named() -> None:
    with pytest.raises(ValueError, match="judge label: 'maybe'"):
        agreement([("maybe", "match")], classes=CLASSES)
    with pytest.raises(ValueError, match="curated label: 'yes'"):
        agreement([("match", "yes")], classes=CLASSES)
