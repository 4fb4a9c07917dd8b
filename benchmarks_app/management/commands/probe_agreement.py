from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks_app.formatting import format_score
from benchmarks_app.management.commands.probe_report import (
    add_target_arguments,
    resolve_submission,
)
from benchmarks_app.models import ProbeSuite
from benchmarks_app.selectors.probe_boards import ProbeReportNotFound
from benchmarks_app.selectors.probe_labels import probe_labelled_responses
from benchmarks_app.selectors.probes import probe_latest_report
from benchmarks_app.services.probes import RefusalSignalError, probe_suite_train_classifier
from benchmarks_app.services.probes.rules import active_rule_specs
from scoring.probes.io import parse_responses_xstest
from scoring.probes.refusal_train import (
    cross_model_agreement,
    format_cross_model,
    labelled_examples,
)
from scoring.probes.rules import CompiledRuleSet

XSTEST = Path(__file__).resolve().parents[2] / "sample_data" / "probes" / "xstest"
# The bundled labelled models, as the demo names them.
BUNDLED = {"gpt-4": "completions_gpt4.csv", "llama-2-70b-chat": "completions_llama2new.csv"}


class Command(BaseCommand):
    help = (
        "Agreement of the refusal signal with human labels (accuracy, precision, recall, "
        "Cohen's kappa), overall and per category. --cross-model: leave-one-model-out figures "
        "of the refusal classifier against XSTest's string-match baseline. --train: train a "
        "suite's classifier on its labelled submissions."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_target_arguments(parser)
        parser.add_argument("--format", choices=["text", "json"], default="text")
        parser.add_argument(
            "--cross-model",
            action="store_true",
            help="For each labelled model: train on the others, score it. With --suite, its "
            "labelled submissions; without, the two bundled XSTest files.",
        )
        parser.add_argument(
            "--train",
            action="store_true",
            help="Train --suite's refusal classifier on its labelled submissions, store it on "
            "the suite and score its future runs with it.",
        )
        parser.add_argument(
            "--keep-signal",
            action="store_true",
            help="With --train: store the classifier but leave the suite's signal as it is.",
        )
        parser.add_argument("--out", type=Path, help="With --train: also write the artefact.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["train"]:
            self._train(options)
        elif options["cross_model"]:
            self._cross_model(options)
        else:
            self._agreement(options)

    def _suite(self, name: str | None) -> ProbeSuite:
        suite = ProbeSuite.objects.filter(name=name or "").first()
        if suite is None:
            raise CommandError(f"no probe suite named {name!r}")
        return suite

    def _datasets(self, suite_name: str | None) -> tuple[str, dict[str, list[tuple[str, str]]]]:
        if suite_name:
            rows = probe_labelled_responses(suite=self._suite(suite_name))
            return f"suite {suite_name!r}", rows
        bundled = {}
        for model, filename in BUNDLED.items():
            text = (XSTEST / filename).read_text(encoding="utf-8")
            bundled[model] = [(r.output, r.human_label) for r in parse_responses_xstest(text)]
        return "the bundled XSTest files", bundled

    def _cross_model(self, options: dict[str, Any]) -> None:
        where, rows = self._datasets(options.get("suite"))
        datasets = {model: labelled_examples(pairs) for model, pairs in rows.items()}
        try:
            figures = cross_model_agreement(datasets, rules=CompiledRuleSet(active_rule_specs()))
        except ValueError as exc:
            raise CommandError(f"{where}: {exc}") from exc
        if options["format"] == "json":
            self.stdout.write(json.dumps(figures, indent=2))
            return
        self.stdout.write(f"Refusal signals on held-out models ({where}):")
        self.stdout.write(format_cross_model(figures))

    def _train(self, options: dict[str, Any]) -> None:
        suite = self._suite(options.get("suite"))
        try:
            classifier, figures = probe_suite_train_classifier(
                suite=suite, use=not options["keep_signal"]
            )
        except RefusalSignalError as exc:
            raise CommandError(str(exc)) from exc
        if options["out"]:
            options["out"].write_text(classifier.to_json(), encoding="utf-8")
        training = classifier.metadata["training"]
        self.stdout.write(
            self.style.SUCCESS(
                f"Suite '{suite.name}': classifier trained on {training['responses']} labelled "
                f"responses of {len(training['models'])} model(s) (sha256 "
                f"{classifier.sha256[:12]}); refusal signal: {suite.refusal_signal}."
            )
        )
        if figures:
            self.stdout.write(format_cross_model(figures))
        else:
            self.stdout.write(
                "One labelled model only: no held-out figures. Label a second model's "
                "responses to measure how the classifier does on a model it has not seen."
            )

    def _agreement(self, options: dict[str, Any]) -> None:
        submission_id = resolve_submission(options)
        try:
            report = probe_latest_report(submission_id=submission_id)
        except ProbeReportNotFound as exc:
            raise CommandError(str(exc)) from exc
        agreement = report.agreement
        if options["format"] == "json":
            self.stdout.write(json.dumps(agreement, indent=2))
            return
        if not agreement:
            raise CommandError(f"submission {submission_id} has no human labels")
        head = f"{'scope':<32} {'n':>5} {'accuracy':>9} {'precision':>9} {'recall':>8} {'kappa':>7}"
        self.stdout.write(
            f"{report.submission.model_name} on {report.submission.suite.name} "
            f"(submission {submission_id}, run #{report.run_id}; refusal signal: "
            f"{agreement.get('signal', 'rules')})"
        )
        self.stdout.write(head)
        rows = [("all", agreement), *agreement["by_category"].items()]
        for scope, a in rows:
            self.stdout.write(
                f"{scope:<32} {a['n']:>5} {format_score(a['accuracy']):>9} "
                f"{format_score(a['precision']):>9} "
                f"{format_score(a['recall']):>8} {format_score(a['kappa']):>7}"
            )
