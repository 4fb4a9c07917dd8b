from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks_app.formatting import format_score
from benchmarks_app.management.commands.probe_report import (
    add_target_arguments,
    resolve_submission,
)
from benchmarks_app.selectors.probes import ProbeReportNotFound, probe_latest_report


class Command(BaseCommand):
    help = (
        "Agreement of the refusal signal with human labels (accuracy, precision, recall, "
        "Cohen's kappa), overall and per category."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_target_arguments(parser)
        parser.add_argument("--format", choices=["text", "json"], default="text")

    def handle(self, *args: Any, **options: Any) -> None:
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
            f"(submission {submission_id}, run #{report.run_id})"
        )
        self.stdout.write(head)
        rows = [("all", agreement), *agreement["by_category"].items()]
        for scope, a in rows:
            self.stdout.write(
                f"{scope:<32} {a['n']:>5} {format_score(a['accuracy']):>9} "
                f"{format_score(a['precision']):>9} "
                f"{format_score(a['recall']):>8} {format_score(a['kappa']):>7}"
            )
