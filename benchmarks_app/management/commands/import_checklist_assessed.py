"""Import assessments already made (the challenge's CSV format) and score them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks_app.models import PaperKind
from benchmarks_app.selectors.checklist import default_challenge
from benchmarks_app.selectors.runs import ended_run_failure_causes
from benchmarks_app.services.checklist import (
    ChecklistSubmissionError,
    checklist_import_assessed,
    checklist_team_create,
)
from benchmarks_app.services.queue_canary import queue_key_problem
from benchmarks_app.services.runs import run_wait
from scoring.judges import failures


class Command(BaseCommand):
    help = (
        "Import recorded assessments (CSV columns Question, Question_Title, Answer, "
        "Justification, Guidelines, Review, Correctness_Score) as a scored entry."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="Team name (created if missing)")
        parser.add_argument("--challenge", help="Challenge slug (default: the open one)")
        parser.add_argument("--genuine", required=True, type=Path)
        parser.add_argument("--adversarial", type=Path)
        parser.add_argument("--truth", type=Path)
        parser.add_argument("--label", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        # Tasks signed with a key no running cluster shares would be dropped unread.
        if problem := queue_key_problem():
            raise CommandError(f"refusing to queue a run: {problem}")
        challenge = default_challenge(options.get("challenge"))
        if challenge is None:
            raise CommandError("No challenge found: create one in the admin first.")
        csvs: dict[str, tuple[str, bytes]] = {}
        for kind, key in (
            (PaperKind.GENUINE, "genuine"),
            (PaperKind.ADVERSARIAL, "adversarial"),
            (PaperKind.TRUTH, "truth"),
        ):
            path = options.get(key)
            if path is None:
                continue
            if not path.is_file():
                raise CommandError(f"--{key} {path}: no such file")
            csvs[kind] = (path.name, path.read_bytes())
        team = checklist_team_create(challenge=challenge, name=options["team"])
        try:
            run = checklist_import_assessed(team=team, csvs=csvs, label=options["label"])
        except ChecklistSubmissionError as exc:
            raise CommandError(exc.message) from exc
        run = run_wait(run=run)
        score = getattr(run, "checklist_score", None)
        if score is None:
            causes = ended_run_failure_causes(run=run)
            if causes:
                self.stderr.write(
                    f"Why {run.failed_items} answer(s) could not be assessed:\n"
                    + failures.details(causes)
                )
            raise CommandError(f"Run #{run.pk} ended {run.status}: {run.error}")
        self.stdout.write(
            f"Imported submission #{run.checklist_submission_id} for team {team.name}: "
            f"C_G={score.c_g:.2f} C_A={score.c_a:.2f} C_T={score.c_t:.2f} R={score.r:.2f} "
            f"S={score.s:.2f}"
        )
