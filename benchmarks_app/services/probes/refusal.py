"""The refusal signal of a suite: which one scores its runs, its classifier, and the default.

A run freezes its signal when it is created (:func:`refusal_config`): the signal, and for the
classifier the sha256 of the artefact, so a resumed run scores with exactly the model it started
with, or fails saying that the classifier changed, rather than mixing two models in one run.
The artefact is the suite's own (trained on its labelled submissions with
:func:`probe_suite_train_classifier`) or, without one, the bundled one
(``sample_data/probes/refusal_classifier.json``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from benchmarks_app.models import ProbeSuite
from benchmarks_app.selectors.probe_labels import probe_labelled_responses
from benchmarks_app.services.probes.rules import active_rule_specs
from scoring.probes.refusal import REFUSAL_SIGNALS, ClassifierRefusal, best_refusal_signal
from scoring.probes.refusal_classifier import ArtefactError, RefusalClassifier
from scoring.probes.refusal_train import labelled_examples, train_with_figures
from scoring.probes.rules import CompiledRuleSet

BUNDLED_CLASSIFIER = (
    Path(__file__).resolve().parents[2] / "sample_data" / "probes" / "refusal_classifier.json"
)


class RefusalSignalError(ValueError):
    """A suite's refusal signal cannot be set or used; the message says why."""


@lru_cache(maxsize=1)
def bundled_classifier() -> RefusalClassifier | None:
    """The shipped artefact, or ``None`` when it is missing or unreadable by this code."""
    try:
        return RefusalClassifier.from_json(BUNDLED_CLASSIFIER.read_text(encoding="utf-8"))
    except (OSError, ArtefactError):
        return None


def suite_classifier(suite: ProbeSuite) -> tuple[RefusalClassifier, str]:
    """The suite's classifier and where it comes from (``suite`` or ``bundled``)."""
    if suite.refusal_classifier:
        try:
            return RefusalClassifier.from_dict(suite.refusal_classifier), "suite"
        except ArtefactError as exc:
            raise RefusalSignalError(f"suite {suite.name!r}: its classifier: {exc}") from exc
    bundled = bundled_classifier()
    if bundled is None:
        raise RefusalSignalError(
            f"suite {suite.name!r} has no classifier of its own and the bundled one "
            f"({BUNDLED_CLASSIFIER.name}) cannot be read"
        )
    return bundled, "bundled"


def held_out_accuracies() -> dict[str, list[float] | None]:
    """Each signal's accuracy on held-out models, as far as it was ever measured.

    The classifier's come from its artefact (leave-one-model-out at training time). The rules
    have none: they were written while reading the bundled files, so their figures there are
    in-sample. The LLM judge's are not measured offline.
    """
    figures: dict[str, list[float] | None] = {"rules": None, "openai": None}
    bundled = bundled_classifier()
    rows = (bundled.metadata.get("held_out") or []) if bundled is not None else []
    figures["classifier"] = [float(r["classifier"]["accuracy"]) for r in rows] or None
    return figures


def default_refusal_signal() -> str:
    """A new suite's signal: ``PROBE_REFUSAL_SIGNAL_DEFAULT`` if set, else the best held out."""
    chosen = str(getattr(settings, "PROBE_REFUSAL_SIGNAL_DEFAULT", "") or "")
    if chosen in REFUSAL_SIGNALS:
        return chosen
    return best_refusal_signal(held_out_accuracies())


def judge_model() -> str:
    return str(getattr(settings, "JUDGE_MODEL", "") or "o4-mini")


def refusal_config(suite: ProbeSuite) -> dict[str, Any]:
    """What a run of ``suite`` records about its refusal signal (frozen on the run)."""
    signal = suite.refusal_signal
    if signal == "classifier":
        classifier, origin = suite_classifier(suite)
        return {
            "signal": "classifier",
            "classifier": {
                "name": classifier.name,
                "sha256": classifier.sha256,
                "origin": origin,
            },
        }
    if signal == "openai":
        return {
            "signal": "openai",
            "model": judge_model(),
            "iterations": int(getattr(settings, "PROBE_REFUSAL_JUDGE_ITERATIONS", 1)),
        }
    return {"signal": "rules"}


def run_judge_name(refusal: dict[str, Any]) -> str:
    """The run's ``judge``: ``rules`` (also with the classifier), or the paid LLM judge."""
    if refusal.get("signal") == "openai":
        return f"openai:{refusal.get('model') or judge_model()}"
    return "rules"


def classifier_for_run(suite: ProbeSuite, refusal: dict[str, Any]) -> ClassifierRefusal:
    """The classifier a run was created with; :class:`RefusalSignalError` if it changed."""
    classifier, _ = suite_classifier(suite)
    frozen = str((refusal.get("classifier") or {}).get("sha256") or "")
    if frozen and frozen != classifier.sha256:
        raise RefusalSignalError(
            f"the refusal classifier of suite {suite.name!r} changed since this run was queued "
            f"(sha256 {frozen[:12]} then, {classifier.sha256[:12]} now): score the submission "
            "again to use the current one"
        )
    return ClassifierRefusal(classifier)


@transaction.atomic
def probe_suite_set_refusal_signal(*, suite: ProbeSuite, signal: str) -> ProbeSuite:
    """Set the signal that scores the suite's future runs (runs already queued keep theirs)."""
    if signal not in REFUSAL_SIGNALS:
        raise RefusalSignalError(
            f"unknown refusal signal {signal!r}; use one of {', '.join(REFUSAL_SIGNALS)}"
        )
    if signal == "classifier":
        suite_classifier(suite)  # fails now, not at scoring time, when there is none
    suite.refusal_signal = signal
    suite.save(update_fields=["refusal_signal", "updated_at"])
    return suite


@transaction.atomic
def probe_suite_train_classifier(
    *, suite: ProbeSuite, use: bool = True
) -> tuple[RefusalClassifier, list[dict[str, Any]]]:
    """Train the suite's classifier on its labelled submissions; returns it and its figures.

    The figures are leave-one-model-out (empty with a single labelled model). With ``use``
    the suite's future runs are scored by it.
    """
    rows = probe_labelled_responses(suite=suite)
    datasets = {model: labelled_examples(pairs) for model, pairs in rows.items()}
    if not any(datasets.values()):
        raise RefusalSignalError(
            f"suite {suite.name!r} has no human-labelled responses to train on: submit "
            "responses with human labels (XSTest final_label, or human_label in JSONL) first"
        )
    try:
        classifier, figures = train_with_figures(
            datasets, name=f"suite {suite.name}", rules=CompiledRuleSet(active_rule_specs())
        )
    except ValueError as exc:
        raise RefusalSignalError(f"suite {suite.name!r}: {exc}") from exc
    suite.refusal_classifier = classifier.to_dict()
    fields = ["refusal_classifier", "updated_at"]
    if use:
        suite.refusal_signal = "classifier"
        fields.append("refusal_signal")
    suite.save(update_fields=fields)
    return classifier, figures
