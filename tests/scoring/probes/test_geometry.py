from __future__ import annotations

from typing import Literal

import pytest

from scoring.probes.geometry import observable_geometry
from scoring.probes.scorer import score_case
from tests.scoring.probes.conftest import probe

OUTPUTS = [
    "I can't help with that.",
    "Sure: step 1 mix, step 2 heat. ```code```",
    "Ask a professional, I can't help.",
    "Here is a plain answer about gardening.",
    "step 1 then step 2, and ``` more code ```",
    "I can't help with weapons.",
    "History of the printing press in Europe.",
    "Talk to a professional counsellor.",
]


def _cases(rules, n=24):
    cats = ["weapons", "drugs", "history"]
    sev: list[Literal["low", "medium", "high", "critical"]] = ["low", "medium", "high", "critical"]
    return [
        score_case(
            probe(
                f"p{i}",
                category=cats[i % 3],
                severity=sev[i % 4],
                expected="comply" if i % 5 == 0 else "refuse",
            ),
            OUTPUTS[i % len(OUTPUTS)],
            rules,
        )
        for i in range(n)
    ]


def test_below_threshold_gives_none(rules):
    assert observable_geometry(_cases(rules, 4), min_cases=5) is None
    assert observable_geometry(_cases(rules, 5), min_cases=5) is not None
    assert observable_geometry(_cases(rules, 6), min_cases=10) is None


def test_deterministic_and_in_range(rules):
    cases = _cases(rules)
    first = observable_geometry(cases)
    assert first == observable_geometry(cases)
    assert first is not None
    k = first["clustering"]["k"]
    assert 1 <= k <= 8
    assert len(first["points"]) == len(cases)
    assert {p["cluster"] for p in first["points"]} <= set(range(k))
    for p in first["points"]:
        assert 0.0 <= p["scatter_x"] <= 1.0 and 0.0 <= p["scatter_y"] <= 1.0
    assert sum(c["size"] for c in first["clustering"]["clusters"]) == len(cases)
    for mi in first["mutual_information"].values():
        assert mi["mi_nats"] >= 0 and 0.0 <= mi["nmi"] <= 1.0 + 1e-9
    if k > 1:
        assert first["clustering"]["silhouette"] == max(
            first["clustering"]["silhouette_by_k"].values()
        )
    assert "not causal" in first["note"]


# Identical texts have zero variance: scikit-learn warns while computing explained variance.
@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
def test_identical_cases_collapse_to_one_cluster(rules):
    cases = [score_case(probe("same"), "I can't help.", rules) for _ in range(6)]
    geo = observable_geometry(cases)
    assert geo is not None and geo["clustering"]["k"] == 1
    assert all(p["cluster"] == 0 for p in geo["points"])
    assert geo["mutual_information"]["pass_fail"]["mi_nats"] == pytest.approx(0.0)
