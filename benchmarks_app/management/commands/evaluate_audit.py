from __future__ import annotations

import sys
from typing import Any

from django.core.checks import Tags
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from benchmarks_app.models import EvaluationRun, Repo, Scanner
from benchmarks_app.models.audit import AuditDataset
from benchmarks_app.selectors.run_health import run_end_text
from benchmarks_app.selectors.runs import ended_run_failure_causes, run_judge_usage
from benchmarks_app.services.audit import AuditRunError, audit_run_create
from benchmarks_app.services.audit.processing import audit_run_set_prefilter
from benchmarks_app.services.queue_canary import queue_key_problem
from benchmarks_app.services.runs import run_wait
from scoring.judges import failures


def progress_bar(run: EvaluationRun, width: int = 30) -> str:
    total = run.progress_total or 0
    done = min(run.progress_done, total) if total else 0
    filled = int(width * done / total) if total else 0
    return (
        f"\rrun #{run.pk} [{'#' * filled}{'.' * (width - filled)}] "
        f"{done}/{total} truth findings · {run.status}"
    )


class Command(BaseCommand):
    help = (
        "Evaluate a scanner's imported results against the frozen truth of a dataset release "
        "(--dataset, --release; default: the official release of the dataset holding the "
        "scanner's repos) on the queue. "
        "With --wait, show progress until the run ends (and process it here when no worker "
        "is running)."
    )
    # The models' checks only: the others import every view and URL of the site (0.3-0.5 s
    # before a run is even created) for a command that serves none; `manage.py check` and the
    # site's own start run them all.
    requires_system_checks = [Tags.models, Tags.database]

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--scanner", required=True)
        parser.add_argument(
            "--repo", action="append", default=[], help="project id (repeatable); default all"
        )
        parser.add_argument("--dataset", help="dataset slug (default: the one covering the repos)")
        parser.add_argument(
            "--release", type=int, help="release number (default: the dataset's official one)"
        )
        parser.add_argument(
            "--judge",
            help="judge record NAME (judge_add, admin), or offline | openai | replay:DIR "
            "(default JUDGE_DEFAULT)",
        )
        parser.add_argument("--model", help="model of the openai judge (default JUDGE_MODEL)")
        parser.add_argument("--iterations", type=int)
        parser.add_argument("--batch-size", type=int)
        parser.add_argument("--json-mode", action="store_true", default=None)
        parser.add_argument(
            "--prefilter",
            type=int,
            metavar="K",
            help="judge the K scan findings most similar to each truth finding first (TF-IDF); "
            "changes batch composition, so verdicts may differ; off by default",
        )
        parser.add_argument("--wait", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        # Tasks signed with a key no running cluster shares would be dropped unread.
        if problem := queue_key_problem():
            raise CommandError(f"refusing to queue a run: {problem}")
        scanner = Scanner.objects.filter(name=options["scanner"]).first()
        if scanner is None:
            raise CommandError(f"scanner: no scanner named {options['scanner']!r}; import first")
        repos = None
        if options["repo"]:
            found = {r.project_id: r for r in Repo.objects.filter(project_id__in=options["repo"])}
            unknown = [p for p in options["repo"] if p not in found]
            if unknown:
                raise CommandError(f"repo: unknown project id(s) {', '.join(unknown)}")
            repos = [found[p] for p in options["repo"]]
        dataset = release = None
        if options["dataset"]:
            dataset = AuditDataset.objects.filter(slug=options["dataset"]).first()
            if dataset is None:
                raise CommandError(f"dataset: no dataset {options['dataset']!r}")
        if options["release"] is not None:
            if dataset is None:
                raise CommandError("release: give the dataset too (--dataset SLUG)")
            release = dataset.releases.filter(number=options["release"]).first()
            if release is None:
                raise CommandError(f"release: {dataset.slug} has no release {options['release']}")
        if options["prefilter"] is not None and options["prefilter"] < 1:
            raise CommandError(f"prefilter: must be at least 1, got {options['prefilter']}")
        try:
            # One transaction: the run is queued on commit, with its pre-filter recorded.
            with transaction.atomic():
                run = self._create(scanner, repos, dataset, release, options)
        except AuditRunError as exc:
            raise CommandError(str(exc)) from None
        self._report(run, scanner, options)

    def _create(
        self, scanner: Scanner, repos: Any, dataset: Any, release: Any, options: dict[str, Any]
    ) -> EvaluationRun:
        run = audit_run_create(
            scanner=scanner,
            repos=repos,
            dataset=dataset,
            release=release,
            judge=options["judge"],
            model=options["model"],
            iterations=options["iterations"],
            batch_size=options["batch_size"],
            json_mode=options["json_mode"],
        )
        if options["prefilter"]:
            run = audit_run_set_prefilter(run=run, k=options["prefilter"])
        return run

    def _report(self, run: EvaluationRun, scanner: Scanner, options: dict[str, Any]) -> None:
        on = (
            f"on {run.release}" if run.release_id else "on the current truth (no release: no board)"
        )
        self.stdout.write(f"Queued run #{run.pk}: {scanner.name} {on} with judge {run.judge_label}")
        if not options["wait"]:
            return
        tty = getattr(self.stdout, "isatty", lambda: False)() or sys.stdout.isatty()
        last = [""]

        def show(r: EvaluationRun) -> None:
            line = progress_bar(r)
            if line != last[0]:
                self.stdout.write(line if tty else line.lstrip("\r"), ending="" if tty else "\n")
                last[0] = line

        def tell(message: str) -> None:
            # Why the run waits (the line its page shows), on a line of its own.
            self.stderr.write(("\n" if tty else "") + message)

        run = run_wait(run=run, on_progress=show, on_event=tell)
        if tty:
            self.stdout.write("")
        usage = run_judge_usage(run=run).line()
        if run.status == "succeeded":
            self.stdout.write(
                self.style.SUCCESS(
                    f"Run #{run.pk} succeeded (judge {run.judge_label}). Report: "
                    f"manage.py audit_report "
                    f"--scanner {scanner.name} --run {run.pk}"
                )
            )
            self.stdout.write(usage)
        else:
            self.stdout.write(usage)
            causes = ended_run_failure_causes(run=run)
            if causes:
                self.stderr.write(
                    f"Why {run.failed_items} truth finding(s) could not be judged:\n"
                    + failures.details(causes)
                )
            raise CommandError(f"Run #{run.pk} {run.status}: {run_end_text(run)}")
