from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks_app.selectors.probes import (
    ProbeReportNotFound,
    probe_report,
    probe_submission_for_model,
)
from scoring.probes.report import report_markdown


def resolve_submission(options: dict[str, Any]) -> int:
    """``--submission ID`` or ``--suite NAME --model NAME`` (that model's latest scored one)."""
    if options.get("submission") is not None:
        return int(options["submission"])
    if not (options.get("suite") and options.get("model")):
        raise CommandError("give --submission ID, or --suite NAME and --model NAME")
    try:
        return probe_submission_for_model(suite_name=options["suite"], model_name=options["model"])
    except ProbeReportNotFound as exc:
        raise CommandError(str(exc)) from exc


def add_target_arguments(parser: CommandParser) -> None:
    parser.add_argument("--submission", type=int)
    parser.add_argument("--suite")
    parser.add_argument("--model")


class Command(BaseCommand):
    help = "Print (or write) the report of a scored probe submission as JSON or Markdown."

    def add_arguments(self, parser: CommandParser) -> None:
        add_target_arguments(parser)
        parser.add_argument("--format", choices=["json", "md"], default="json")
        parser.add_argument("--out", type=Path, help="Write to this file instead of stdout.")

    def handle(self, *args: Any, **options: Any) -> None:
        submission_id = resolve_submission(options)
        try:
            report = probe_report(submission_id=submission_id)
        except ProbeReportNotFound as exc:
            raise CommandError(str(exc)) from exc
        if options["format"] == "md":
            text = report_markdown(report)
        else:
            text = json.dumps(report, indent=2, ensure_ascii=False)
        if options["out"]:
            options["out"].write_text(text + "\n", encoding="utf-8")
            self.stdout.write(f"Wrote {options['out']}")
        else:
            self.stdout.write(text)
