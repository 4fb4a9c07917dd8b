from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchmarks_app.selectors.audit import ReportNotFound, audit_report
from scoring.audit.metrics import render_markdown


class Command(BaseCommand):
    help = (
        "Print a scanner's audit report: each repo's latest complete evaluation, or one run's "
        "results with --run."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--scanner", required=True)
        parser.add_argument("--run", type=int)
        parser.add_argument("--format", choices=["md", "json"], default="md")
        parser.add_argument("--out", help="write the report to this file instead of stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = audit_report(scanner_name=options["scanner"], run_id=options["run"])
        except ReportNotFound as exc:
            raise CommandError(str(exc)) from None
        if not report["repos"]:
            raise CommandError(
                f"scanner: {options['scanner']!r} has no complete evaluation yet; "
                "run evaluate_audit first"
            )
        text = (
            json.dumps(report, indent=2) + "\n"
            if options["format"] == "json"
            else render_markdown(report)
        )
        if options["out"]:
            Path(options["out"]).write_text(text, encoding="utf-8")
            self.stdout.write(self.style.SUCCESS(f"Report written to {options['out']}"))
        else:
            self.stdout.write(text)
