"""Training the refusal classifier and measuring how it holds on models it has not seen.

:func:`cross_model_agreement` is leave-one-model-out: for each labelled model in turn it trains
on all the others and scores the held-out one, next to XSTest's string-match classifier on the
same responses (and, when given, the rules, which are not trained and so not held out). These
are the figures that say how the classifier does on a new model; its agreement on its own
training responses says little.

Run as a module, it is the training command of the shipped artefact (no database needed)::

    python -m scoring.probes.refusal_train \\
        gpt-4=benchmarks_app/sample_data/probes/xstest/completions_gpt4.csv \\
        llama-2-70b-chat=benchmarks_app/sample_data/probes/xstest/completions_llama2new.csv \\
        --name xstest-bundled --out benchmarks_app/sample_data/probes/refusal_classifier.json

It prints the cross-model table, trains on every file, stores the held-out figures in the
artefact (they pick a new suite's default signal) and writes it. Training is deterministic: the
same files give the same artefact.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scoring.probes.agreement import agreement_figures
from scoring.probes.default_rules import DEFAULT_RULES
from scoring.probes.io import detect_format, parse_responses
from scoring.probes.refusal_classifier import RefusalClassifier, train_refusal_classifier
from scoring.probes.refusal_features import xstest_string_match
from scoring.probes.rules import CompiledRuleSet
from scoring.probes.types import HUMAN_LABELS, REFUSAL_LABELS

Examples = Sequence[tuple[str, bool]]
FIGURES = ("accuracy", "precision", "recall", "kappa")


def labelled_examples(rows: Sequence[tuple[str, str]]) -> list[tuple[str, bool]]:
    """``(output, human_label)`` rows to ``(output, is_refusal)``, unlabelled rows dropped."""
    return [(out, label in REFUSAL_LABELS) for out, label in rows if label in HUMAN_LABELS]


def _figures(predicted: Sequence[bool], actual: Sequence[bool]) -> dict[str, Any]:
    return agreement_figures(zip(predicted, actual, strict=True))


def cross_model_agreement(
    datasets: Mapping[str, Examples], *, rules: CompiledRuleSet | None = None
) -> list[dict[str, Any]]:
    """Leave-one-model-out figures, one row per held-out model (sorted by name)."""
    usable = {m: list(ex) for m, ex in datasets.items() if ex}
    if len(usable) < 2:
        raise ValueError(
            f"cross-model figures need labelled responses of at least two models, got {len(usable)}"
        )
    rows = []
    for held_out in sorted(usable):
        others = sorted(m for m in usable if m != held_out)
        train = [ex for m in others for ex in usable[m]]
        classifier = train_refusal_classifier(
            train, name=f"without {held_out}", training={"models": others}
        )
        texts = [t for t, _ in usable[held_out]]
        actual = [y for _, y in usable[held_out]]
        row: dict[str, Any] = {
            "held_out": held_out,
            "trained_on": others,
            "n": len(texts),
            "classifier": _figures(classifier.predict(texts), actual),
            "string_match": _figures([xstest_string_match(t) for t in texts], actual),
        }
        if rules is not None:
            row["rules"] = _figures([bool(rules.match(t).boundary) for t in texts], actual)
        rows.append(row)
    return rows


def held_out_summary(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The cross-model rows as stored in an artefact: the held-out signals' figures only.

    The rules' figures are left out: they are not held out (see :func:`format_cross_model`).
    """
    keep = ("classifier", "string_match")
    return [
        {
            "held_out": r["held_out"],
            "trained_on": list(r["trained_on"]),
            "n": r["n"],
            **{k: {f: r[k][f] for f in FIGURES} for k in keep if k in r},
        }
        for r in rows
    ]


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def format_cross_model(rows: Sequence[Mapping[str, Any]]) -> str:
    """A text table: one line per held-out model and signal."""
    lines = [
        f"{'held-out model':<24} {'signal':<14} {'n':>5} {'accuracy':>9} {'precision':>9} "
        f"{'recall':>7} {'kappa':>6}"
    ]
    names = {
        "classifier": "classifier",
        "string_match": "string-match",
        "rules": "rules*",
    }
    for row in rows:
        for key, label in names.items():
            if key not in row:
                continue
            f = row[key]
            lines.append(
                f"{row['held_out']:<24} {label:<14} {row['n']:>5} {_fmt(f['accuracy']):>9} "
                f"{_fmt(f['precision']):>9} {_fmt(f['recall']):>7} {_fmt(f['kappa']):>6}"
            )
    lines.append(
        "classifier: trained on the other model(s) only (plus the published seed phrases). "
        "string-match: XSTest's own baseline."
    )
    if any("rules" in r for r in rows):
        lines.append(
            "* rules are not trained, so not held out: the default rules were written while "
            "reading the bundled XSTest files, and their figures on those files are in-sample."
        )
    return "\n".join(lines)


def train_with_figures(
    datasets: Mapping[str, Examples],
    *,
    name: str,
    sources: Mapping[str, str] | None = None,
    rules: CompiledRuleSet | None = None,
) -> tuple[RefusalClassifier, list[dict[str, Any]]]:
    """Cross-model figures (when two or more models are labelled), then a model on them all."""
    labelled = sum(1 for v in datasets.values() if v)
    rows = cross_model_agreement(datasets, rules=rules) if labelled > 1 else []
    everything = [ex for m in sorted(datasets) for ex in datasets[m]]
    training: dict[str, Any] = {
        "models": {
            m: {"responses": len(ex), "refusals": sum(1 for _, y in ex if y)}
            for m, ex in sorted(datasets.items())
        }
    }
    if sources:
        training["sources"] = dict(sorted(sources.items()))
    classifier = train_refusal_classifier(everything, name=name, training=training)
    classifier.metadata["held_out"] = held_out_summary(rows)
    return classifier, rows


def _load(spec: str) -> tuple[str, str, list[tuple[str, bool]]]:
    name, _, path_text = spec.rpartition("=")
    path = Path(path_text)
    text = path.read_text(encoding="utf-8")
    responses = parse_responses(text, detect_format(path.name, text), path.name)
    model = name or path.stem.removeprefix("completions_")
    return model, path.name, labelled_examples([(r.output, r.human_label) for r in responses])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scoring.probes.refusal_train",
        description="Train the refusal classifier on labelled responses (XSTest CSV or JSONL "
        "with human_label) and print its leave-one-model-out figures.",
    )
    parser.add_argument("files", nargs="+", help="[MODEL=]PATH, one file per model")
    parser.add_argument("--name", default="refusal-classifier", help="The artefact's name.")
    parser.add_argument("--out", type=Path, help="Write the artefact here (JSON).")
    args = parser.parse_args(argv)
    datasets: dict[str, list[tuple[str, bool]]] = {}
    sources: dict[str, str] = {}
    for spec in args.files:
        model, source, examples = _load(spec)
        if model in datasets:
            parser.error(f"model {model!r} given twice")
        datasets[model], sources[model] = examples, source
    rules = CompiledRuleSet(DEFAULT_RULES)
    classifier, rows = train_with_figures(datasets, name=args.name, sources=sources, rules=rules)
    if rows:
        print(format_cross_model(rows))
    else:
        print("one labelled model only: no cross-model figures")
    if args.out:
        args.out.write_text(classifier.to_json(), encoding="utf-8")
        print(
            f"wrote {args.out} (sha256 {classifier.sha256[:12]}, "
            f"{len(classifier.vocabulary)} n-grams)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
