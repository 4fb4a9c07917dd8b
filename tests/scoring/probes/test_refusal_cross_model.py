"""Leave-one-model-out figures: the held-out model is never trained on."""

from __future__ import annotations

from typing import Any

import pytest

import scoring.probes.refusal_train as refusal_train
from scoring.probes.refusal_train import (
    cross_model_agreement,
    format_cross_model,
    held_out_summary,
    labelled_examples,
    train_with_figures,
)
from tests.scoring.probes.conftest import TEST_RULES

# Three "models", each with its own refusal idiom and answer style.
MODELS = {
    "alpha": [(f"Sorry, but I can't assist with {t}.", True) for t in "abcdefgh"]
    + [(f"Here are some ideas about {t}: first, read.", False) for t in "abcdefgh"],
    "beta": [(f"I'm not able to provide help with {t}.", True) for t in "abcdefgh"]
    + [(f"Sure! {t} is done like this. Step 1, start.", False) for t in "abcdefgh"],
    "gamma": [(f"It is not appropriate to discuss {t}.", True) for t in "abcdefgh"]
    + [(f"There are several ways to do {t}.", False) for t in "abcdefgh"],
}


def test_each_model_is_scored_by_a_classifier_that_never_saw_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[list[str]] = []
    real = refusal_train.train_refusal_classifier

    def spy(examples: Any, **kwargs: Any) -> Any:
        seen.append([t for t, _ in examples])
        return real(examples, **kwargs)

    monkeypatch.setattr(refusal_train, "train_refusal_classifier", spy)
    rows = cross_model_agreement(MODELS)
    assert [r["held_out"] for r in rows] == ["alpha", "beta", "gamma"]
    for row, trained_texts in zip(rows, seen, strict=True):
        held_texts = {t for t, _ in MODELS[row["held_out"]]}
        assert row["trained_on"] == sorted(set(MODELS) - {row["held_out"]})
        assert not held_texts & set(trained_texts)
        assert len(trained_texts) == sum(len(MODELS[m]) for m in row["trained_on"])
        assert row["n"] == 16 and row["classifier"]["n"] == 16
        assert set(row) == {"held_out", "trained_on", "n", "classifier", "string_match"}


def test_string_match_baseline_is_reported_on_the_same_responses() -> None:
    rows = {r["held_out"]: r for r in cross_model_agreement(MODELS)}
    # XSTest's prefixes catch "Sorry"/"I'm not able"/"It is not appropriate" openings: all
    # 8 refusals of each model, and none of the answers.
    for row in rows.values():
        assert row["string_match"]["confusion"] == {"tp": 8, "fp": 0, "fn": 0, "tn": 8}
    # Trained on the two other idioms (and the seeds), the classifier finds the third.
    assert rows["gamma"]["classifier"]["recall"] == 1.0


def test_rules_are_reported_but_never_stored_as_held_out() -> None:
    from scoring.probes.rules import CompiledRuleSet

    rows = cross_model_agreement(MODELS, rules=CompiledRuleSet(TEST_RULES))
    assert all("rules" in r for r in rows)
    text = format_cross_model(rows)
    assert "rules*" in text and "in-sample" in text and "string-match" in text
    assert all("rules" not in r for r in held_out_summary(rows))
    assert set(held_out_summary(rows)[0]["classifier"]) == {
        "accuracy",
        "precision",
        "recall",
        "kappa",
    }


def test_one_labelled_model_is_not_enough() -> None:
    with pytest.raises(ValueError, match="at least two models"):
        cross_model_agreement({"alpha": MODELS["alpha"], "beta": []})
    classifier, rows = train_with_figures({"alpha": MODELS["alpha"]}, name="one")
    assert rows == [] and classifier.metadata["held_out"] == []


def test_labelled_examples_count_partial_refusals_as_refusals() -> None:
    rows = [
        ("a", "1_full_compliance"),
        ("b", "2_full_refusal"),
        ("c", "3_partial_refusal"),
        ("d", ""),
        ("e", "unknown"),
    ]
    assert labelled_examples(rows) == [("a", False), ("b", True), ("c", True)]
