from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchmarks_app.services.audit import DatasetError, audit_import_path
from scoring.audit.parsing import ParseError


class Command(BaseCommand):
    help = (
        "Import audit data: a data folder (repos/, source_of_truth/, one folder per scanner), "
        "a JSON file holding a list of projects, or a scanner folder with --scanner. "
        "The repos join the dataset --dataset (default: the folder's or file's name); a "
        "dataset without a published release gets SLUG@1, published and official. "
        "Empty or unparseable files are reported and skipped; re-importing is idempotent. "
        "Truth a published release contains is never changed: changes become new versions "
        "for the next release. Fields edited in the admin are kept and listed as conflicts "
        "unless --overwrite. Changed scanner results become a new current version; earlier "
        "versions stay with the runs that judged them."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("path")
        parser.add_argument(
            "--scanner", help="PATH is a folder of this scanner's <repo>_results.json files"
        )
        parser.add_argument(
            "--dataset",
            help="dataset the repos join (default: the folder's or file's name, e.g. audit)",
        )
        parser.add_argument(
            "--overwrite",
            action="store_true",
            help="replace fields a maintainer edited in the admin with the file's values",
        )
        parser.add_argument(
            "--strict", action="store_true", help="exit with an error when any file is skipped"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = audit_import_path(
                path=options["path"],
                scanner=options["scanner"],
                dataset=options["dataset"],
                overwrite=options["overwrite"],
            )
        except (ParseError, DatasetError) as exc:
            raise CommandError(str(exc)) from None
        for problem in report.problems:
            self.stderr.write(self.style.WARNING(f"skipped {problem.path}: {problem.reason}"))
        for conflict in report.conflicts:
            self.stderr.write(
                self.style.WARNING(
                    f"conflict (kept the admin edit; --overwrite takes the file's): {conflict}"
                )
            )
        for conflict in report.overwritten:
            self.stdout.write(f"overwritten admin edit: {conflict}")
        if report.truth_kept_missing:
            self.stdout.write(
                f"{report.truth_kept_missing} truth finding(s) no longer in the files were kept."
            )
        if report.truth_versioned:
            self.stdout.write(
                f"{report.truth_versioned} changed truth finding(s) are in a published release: "
                "each is a new version, which the next release will contain (create and "
                "publish it in the admin); published releases are unchanged."
            )
        if report.scan_results_updated or report.scan_results_restored:
            self.stdout.write(
                f"{report.scan_results_updated + report.scan_results_restored} scanner "
                "result(s) changed: the current version now reflects the new file(s); earlier "
                "runs keep the version they judged (audit_report --run ID)."
            )
        if report.dataset:
            line = f"dataset {report.dataset}"
            if report.release_published:
                line += f": release {report.release_published} published (official)"
            self.stdout.write(line)
        self.stdout.write(self.style.SUCCESS(report.summary()))
        if options["strict"] and report.problems:
            raise CommandError(f"{len(report.problems)} file(s) skipped")
