"""Write a run's bundle to a file (what /api/runs/<id>/bundle/ serves)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchmarks_app.models import Benchmark, EvaluationRun
from benchmarks_app.selectors.run_bundles import RunBundleError, run_bundle, run_bundle_name


class Command(BaseCommand):
    help = (
        "Write a run's bundle (inputs, judge record, every judge call, votes, verdicts, "
        "metrics; hidden truth left out) to --out. RUN is a run id; without it, the latest "
        "succeeded run (of --benchmark). Check it with verify_run."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("run", nargs="?", type=int, help="run id (default: the latest)")
        parser.add_argument("--benchmark", choices=list(Benchmark.values))
        parser.add_argument("--out", help="file to write (default run-<id>-<benchmark>.zip)")

    def handle(self, *args: Any, **options: Any) -> None:
        runs = EvaluationRun.objects.all()
        if options["benchmark"]:
            runs = runs.for_benchmark(options["benchmark"])
        if options["run"] is not None:
            run = runs.filter(pk=options["run"]).first()
            if run is None:
                raise CommandError(f"run: no run #{options['run']}")
        else:
            run = runs.succeeded().order_by("-created_at", "-id").first()
            if run is None:
                raise CommandError("run: no succeeded run yet; give a run id")
        try:
            data = run_bundle(run=run)
        except RunBundleError as exc:
            raise CommandError(f"run: {exc}") from None
        path = Path(options["out"] or run_bundle_name(run))
        try:
            path.write_bytes(data)
        except OSError as exc:
            raise CommandError(f"out: cannot write {path}: {exc.strerror or exc}") from None
        self.stdout.write(f"Wrote {path} ({len(data)} bytes): {run}")
