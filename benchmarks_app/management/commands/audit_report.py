from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchmarks_app.selectors.audit import ReportNotFound, audit_report
from scoring.audit.metrics import render_markdown


class Command(BaseCommand):
    help = (
        "Print a scanner's audit report for one run (--run), or for its row on one board: a "
        "dataset release and a judge (default: the official ones). Never mixes releases or "
        "judges."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--scanner", required=True)
        parser.add_argument("--run", type=int)
        parser.add_argument("--dataset", help="dataset slug (default: the site's first)")
        parser.add_argument("--release", type=int, help="release number (default: official)")
        parser.add_argument(
            "--judge", help="board judge: offline, openai:MODEL, replay:DIR (default: official)"
        )
        parser.add_argument("--format", choices=["md", "json"], default="md")
        parser.add_argument("--out", help="write the report to this file instead of stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["run"] is not None and any(
            options[k] is not None for k in ("dataset", "release", "judge")
        ):
            raise CommandError("run: a run has its own release and judge; give --run alone")
        try:
            report = audit_report(
                scanner_name=options["scanner"],
                run_id=options["run"],
                dataset=options["dataset"],
                release=options["release"],
                judge=options["judge"],
            )
        except ReportNotFound as exc:
            raise CommandError(str(exc)) from None
        if not report["repos"]:
            where = (
                f" on {report['release']} with judge {report['judge']}"
                if report.get("release")
                else ""
            )
            raise CommandError(
                f"scanner: {options['scanner']!r} has no complete evaluation{where} yet; "
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
