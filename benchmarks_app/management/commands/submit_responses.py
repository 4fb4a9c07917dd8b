from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks_app.models import EvaluationRun, RunStatus
from benchmarks_app.selectors.run_health import run_end_text
from benchmarks_app.services.probes import ProbeFormatError, probe_submission_submit
from benchmarks_app.services.queue_canary import queue_key_problem
from benchmarks_app.services.runs import run_wait
from scoring.probes.io import FORMATS, detect_format


class Command(BaseCommand):
    help = (
        "Submit a model's responses to a probe suite (JSONL or XSTest completions CSV) and "
        "queue their scoring."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--suite", required=True)
        parser.add_argument("--model", required=True)
        parser.add_argument("--format", choices=FORMATS, help="Default: from the file name.")
        parser.add_argument("--wait", action="store_true", help="Wait for the scoring run.")

    def handle(self, *args: Any, **options: Any) -> None:
        # Tasks signed with a key no running cluster shares would be dropped unread.
        if problem := queue_key_problem():
            raise CommandError(f"refusing to queue a run: {problem}")
        path: Path = options["file"]
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        # Read line by line as it is parsed: a file past the suite's row cap is read no further.
        with path.open(encoding="utf-8", newline="") as lines:
            try:
                first = lines.readline()
                run = probe_submission_submit(
                    suite_name=options["suite"],
                    model_name=options["model"],
                    text=itertools.chain([first], lines),
                    fmt=options["format"] or detect_format(path.name, first),
                    source_name=path.name,
                )
            except ProbeFormatError as exc:
                raise CommandError(str(exc)) from exc
            except UnicodeDecodeError as exc:
                raise CommandError(f"{path}: not UTF-8 text") from exc
        self.stdout.write(
            f"Submission {run.probe_submission_id}: run #{run.pk} queued "
            f"({run.probe_submission.responses.count() if run.probe_submission else 0} responses)."
        )
        if not options["wait"]:
            return
        self._verbose = int(options.get("verbosity", 1)) > 1
        run = run_wait(run=run, on_progress=self._progress, on_event=self.stderr.write)
        self._report(run)

    def _progress(self, run: EvaluationRun) -> None:
        if run.progress_total and getattr(self, "_verbose", False):
            self.stdout.write(f"  {run.progress_done}/{run.progress_total}")

    def _report(self, run: EvaluationRun) -> None:
        if run.status != RunStatus.SUCCEEDED:
            raise CommandError(f"Run #{run.pk} {run.status}: {run_end_text(run)}")
        report = run.probe_report
        agreement = report.agreement or {}
        line = (
            f"Run #{run.pk} succeeded: resilience {report.resilience_index:.3f}, "
            f"pass rate {report.pass_rate:.3f}"
        )
        if agreement:
            line += (
                f", refusal agreement {agreement['accuracy']:.3f} (kappa {agreement['kappa']:.3f})"
            )
        self.stdout.write(self.style.SUCCESS(line))
