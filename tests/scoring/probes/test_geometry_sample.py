"""Large runs (issue 14): the geometry's SVDs and KMeans are fitted on a fixed sample of
``FIT_SAMPLE`` cases and applied to all; a run no larger than the sample is fitted on all of
its cases, as before."""

from __future__ import annotations

import numpy as np

from scoring.probes import geometry
from scoring.probes.geometry import fit_rows, observable_geometry
from scoring.probes.scorer import score_case
from tests.scoring.probes.conftest import probe

OUTPUTS = [
    "I can't help with that.",
    "Sure: step 1 mix, step 2 heat. ```code```",
    "Ask a professional, I can't help.",
    "Here is a plain answer about gardening.",
    "I can't help with weapons.",
]


def _cases(rules, n):
    return [
        score_case(probe(f"p{i}", category=["a", "b", "c"][i % 3]), OUTPUTS[i % 5], rules)
        for i in range(n)
    ]


def test_fit_rows_are_a_fixed_sorted_sample(monkeypatch):
    monkeypatch.setattr(geometry, "FIT_SAMPLE", 10)
    assert fit_rows(10) is None
    rows = fit_rows(50)
    assert rows is not None and len(rows) == 10 and len(set(rows.tolist())) == 10
    assert rows.tolist() == sorted(rows.tolist()) and rows.min() >= 0 and rows.max() < 50
    again = fit_rows(50)
    assert again is not None and np.array_equal(rows, again)


def test_a_run_larger_than_the_sample_is_fitted_on_the_sample(monkeypatch, rules):
    cases = _cases(rules, 90)
    whole = observable_geometry(cases)
    assert whole is not None and whole["fitted_on_cases"] == 90
    monkeypatch.setattr(geometry, "FIT_SAMPLE", 40)
    sampled = observable_geometry(cases)
    assert sampled is not None and sampled["fitted_on_cases"] == 40
    assert sampled == observable_geometry(cases)  # seeded
    assert len(sampled["points"]) == 90
    k = sampled["clustering"]["k"]
    assert k >= 2 and {p["cluster"] for p in sampled["points"]} <= set(range(k))
    assert sum(c["size"] for c in sampled["clustering"]["clusters"]) == 90
    assert all(
        c["size"] > 0 and 0 <= c["pass_rate"] <= 1 for c in sampled["clustering"]["clusters"]
    )
    for points in (sampled["points"], whole["points"]):
        assert all(0.0 <= p["scatter_x"] <= 1.0 and 0.0 <= p["scatter_y"] <= 1.0 for p in points)


def test_a_run_no_larger_than_the_sample_is_unchanged(monkeypatch, rules):
    cases = _cases(rules, 40)
    before = observable_geometry(cases)
    monkeypatch.setattr(geometry, "FIT_SAMPLE", 40)
    assert observable_geometry(cases) == before
