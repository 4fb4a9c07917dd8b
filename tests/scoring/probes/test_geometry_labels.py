"""Cluster labels of the observable geometry are never English stop-words or bare numbers
(issue 13: the scatter's legend read "the", "to", "on", "86")."""

from __future__ import annotations

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from scoring.probes.geometry import TOP_TERMS, _label_terms, label_term, observable_geometry
from scoring.probes.scorer import score_case
from scoring.probes.types import ProbeSpec

# A case's document is its probe's task and input, its explanation and rule labels. Half the
# inputs are full of stop-words and half have none, so that stop-words ("no" from "no refusal
# language", "to", "the") and numbers are what sets clusters apart.
INPUTS = [
    "Would you tell me how to get to the top of it and what to do there?",
    "Bread recipe: flour, water, yeast.",
    "Is it up to them to do what they want with the things they have?",
    "Kill process PID command.",
]
OUTPUTS = ["I can't help with that.", "Sure: step 1 mix, step 2 bake.", "Ask a professional."]


def _cases(rules, n=40):
    return [
        score_case(
            ProbeSpec(
                probe_id=f"p{i}",
                category=["x", "y"][i % 2],
                severity=["low", "high"][i % 2],  # type: ignore[arg-type]
                expected=["refuse", "comply"][i % 2],  # type: ignore[arg-type]
                task="",
                input=f"{INPUTS[i % len(INPUTS)]} {i * 7}",
            ),
            OUTPUTS[i % len(OUTPUTS)],
            rules,
        )
        for i in range(n)
    ]


def test_label_terms_skip_stop_words_and_numbers():
    terms = np.array(["the", "to", "rule_code", "86", "on", "refusal", "i", "0-5", "step", "x"])
    centroid = np.array([0.9, 0.8, 0.7, 0.65, 0.6, 0.5, 0.45, 0.4, 0.0, -0.1])
    assert _label_terms(terms, centroid) == ["rule_code", "refusal"]  # none of weight <= 0
    assert not label_term("the") and not label_term("i") and not label_term("2024")
    assert label_term("comply-probe") and not label_term("outcome_fail")


def test_cluster_labels_are_not_stop_words(rules):
    geometry = observable_geometry(_cases(rules))
    assert geometry is not None and geometry["clustering"]["k"] >= 2
    labels = [t for c in geometry["clustering"]["clusters"] for t in c["top_terms"]]
    assert labels, "every cluster has label terms"
    assert not set(labels) & ENGLISH_STOP_WORDS
    assert not any(t.replace("-", "").isdigit() for t in labels)
    assert all(len(c["top_terms"]) <= TOP_TERMS for c in geometry["clustering"]["clusters"])


def test_documents_and_labels_hold_no_outcome_tokens(rules):
    # The clusters are compared with pass/fail (mutual information): documents that held the
    # outcome ("outcome_fail", "FAIL (expected …)") made that figure circular (issue 26).
    from scoring.probes.geometry import OUTCOME_TOKENS, case_document

    cases = _cases(rules)
    assert {c.passed for c in cases} == {True, False}
    for case in cases:
        words = set(case_document(case).lower().split())
        assert not words & OUTCOME_TOKENS, words & OUTCOME_TOKENS
    geometry = observable_geometry(cases)
    assert geometry is not None
    labels = {t for c in geometry["clustering"]["clusters"] for t in c["top_terms"]}
    assert not labels & OUTCOME_TOKENS


def test_documents_hold_the_responses_features_not_the_scorers_verdict(rules):
    # Clusters were labelled "expected", "language", "comply-probe", "risk_high": words of the
    # scorer's explanation and risk bucket, which restate the outcome (issue 37 item 8). A
    # document is the probe's text and the rules the response matched, nothing of the verdict.
    from scoring.probes.geometry import case_document

    cases = _cases(rules)
    matched = [c for c in cases if c.matched_safe_patterns or c.matched_unsafe_patterns]
    assert matched, "some responses match rules"
    verdict_words = {"expected", "language", "signals", "risk", "comply-probe"}
    for case in cases:
        words = set(case_document(case).lower().replace(":", " ").replace(";", " ").split())
        assert not words & verdict_words, words & verdict_words
        assert not any(w.startswith("risk_") for w in words)
        for label in (*case.matched_safe_patterns, *case.matched_unsafe_patterns):
            assert f"rule_{label}".lower() in words
    geometry = observable_geometry(cases)
    assert geometry is not None
    labels = {t for c in geometry["clustering"]["clusters"] for t in c["top_terms"]}
    assert labels and not labels & verdict_words
    assert not any(t.startswith("risk_") for t in labels)
