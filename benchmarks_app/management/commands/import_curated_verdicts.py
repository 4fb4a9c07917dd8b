"""Import curated verdicts: recorded audit verdicts of a reference judge, XSTest human labels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks_app.selectors.judge_agreement import judge_agreement, judges_agreement
from benchmarks_app.selectors.judge_agreement_table import agreement_table
from benchmarks_app.services.curated_verdicts import (
    CuratedVerdictError,
    VerdictImportReport,
    curated_verdicts_import_audit_recorded,
    curated_verdicts_import_xstest,
)


class Command(BaseCommand):
    help = (
        "Import curated verdicts (--audit-recorded DIR --scanner NAME: a reference pipeline's "
        "recorded verdicts; --xstest CSV --suite NAME: XSTest final_label human labels), then "
        "print every judge's agreement with the curated verdicts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--audit-recorded", type=Path, help="folder of <repo>_results.json")
        parser.add_argument("--scanner", default="baseline", help="whose findings were judged")
        parser.add_argument("--xstest", type=Path, nargs="*", default=[], help="completions CSVs")
        parser.add_argument("--suite", default="xstest", help="the probe suite of --xstest")
        parser.add_argument("--judge", help="print only this judge's agreement")
        parser.add_argument("--format", choices=["text", "json"], default="text")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["audit_recorded"]:
                folder = options["audit_recorded"]
                report = curated_verdicts_import_audit_recorded(
                    folder=folder, scanner_name=options["scanner"]
                )
                self._report(f"audit {folder}", report)
            for path in options["xstest"]:
                if not path.is_file():
                    raise CommandError(f"--xstest: {path} is not a file")
                report = curated_verdicts_import_xstest(
                    suite_name=options["suite"],
                    text=path.read_text(encoding="utf-8"),
                    source_name=path.name,
                )
                self._report(f"probes {path}", report)
        except CuratedVerdictError as exc:
            raise CommandError(str(exc)) from None
        figures = judge_agreement(options["judge"]) if options["judge"] else judges_agreement()
        if options["format"] == "json":
            self.stdout.write(json.dumps(figures, indent=2))
            return
        self.stdout.write(agreement_table(figures))

    def _report(self, what: str, report: VerdictImportReport) -> None:
        self.stdout.write(f"Curated verdicts from {what}: {report.summary()}")
        for line in report.skipped[:20]:
            self.stdout.write(f"  skipped {line}")
        if len(report.skipped) > 20:
            self.stdout.write(f"  … and {len(report.skipped) - 20} more skipped")
