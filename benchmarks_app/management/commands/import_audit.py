from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchmarks_app.services.audit import audit_import_path
from scoring.audit.parsing import ParseError


class Command(BaseCommand):
    help = (
        "Import audit data: a data folder (repos/, source_of_truth/, one folder per scanner), "
        "a JSON file holding a list of projects, or a scanner folder with --scanner. "
        "Empty or unparseable files are reported and skipped; re-importing is idempotent. "
        "Changed scanner results become a new current version; earlier versions stay with "
        "the runs that judged them."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("path")
        parser.add_argument(
            "--scanner", help="PATH is a folder of this scanner's <repo>_results.json files"
        )
        parser.add_argument(
            "--strict", action="store_true", help="exit with an error when any file is skipped"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = audit_import_path(path=options["path"], scanner=options["scanner"])
        except ParseError as exc:
            raise CommandError(str(exc)) from None
        for problem in report.problems:
            self.stderr.write(self.style.WARNING(f"skipped {problem.path}: {problem.reason}"))
        if report.truth_kept_missing:
            self.stdout.write(
                f"{report.truth_kept_missing} truth finding(s) no longer in the files were kept."
            )
        if report.scan_results_updated or report.scan_results_restored:
            self.stdout.write(
                f"{report.scan_results_updated + report.scan_results_restored} scanner "
                "result(s) changed: the current version now reflects the new file(s); earlier "
                "runs keep the version they judged (audit_report --run ID)."
            )
        self.stdout.write(self.style.SUCCESS(report.summary()))
        if options["strict"] and report.problems:
            raise CommandError(f"{len(report.problems)} file(s) skipped")
