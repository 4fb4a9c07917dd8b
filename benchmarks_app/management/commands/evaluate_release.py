from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchmarks_app.models.audit import AuditDataset
from benchmarks_app.services.audit import AuditRunError, audit_release_evaluate_entries


class Command(BaseCommand):
    help = (
        "Evaluate the entries of a dataset release again with its official judge (or --judge): "
        "every scanner that was on a board of the dataset and has results for the release's "
        "repos, except those already on this board or with a run in progress. Use it after "
        "making a new release official, whose board starts empty. The runs go to the queue."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--dataset", required=True, help="dataset slug")
        parser.add_argument(
            "--release", type=int, help="release number (default: the official release)"
        )
        parser.add_argument("--judge", help="board judge (default: the release's official one)")

    def handle(self, *args: Any, **options: Any) -> None:
        dataset = AuditDataset.objects.filter(slug=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"dataset: no dataset {options['dataset']!r}")
        if options["release"] is not None:
            release = dataset.releases.filter(number=options["release"]).first()
            if release is None:
                raise CommandError(f"release: {dataset.slug} has no release {options['release']}")
        elif dataset.official_release is None:
            raise CommandError(f"release: {dataset.slug} has no official release; give --release")
        else:
            release = dataset.official_release
        try:
            outcome = audit_release_evaluate_entries(release=release, judge=options["judge"])
        except AuditRunError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(outcome.summary())
        for run in outcome.runs:
            self.stdout.write(f"  run #{run.pk}: {run.scanner.name if run.scanner else '?'}")
