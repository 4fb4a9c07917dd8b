"""Assessments made elsewhere, imported from the challenge's CSV format and scored here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from benchmarks_app.models import (
    ChecklistAnswer,
    ChecklistSubmission,
    EvaluationRun,
    Paper,
    PaperKind,
    SourceFormat,
    SubmissionKind,
    SubmissionStatus,
    Team,
)
from benchmarks_app.models.phases import Phase
from benchmarks_app.selectors.phases import PhaseClosed, phase_open_for
from benchmarks_app.services.checklist.errors import ChecklistSubmissionError
from benchmarks_app.services.checklist.papers import FIELD_FOR_KIND, questions_by_number
from benchmarks_app.services.checklist.submissions import checklist_submission_assess
from scoring.checklist.recorded import RecordedCsvError, RecordedRow, parse_recorded_csv


def checklist_import_assessed(
    *,
    team: Team,
    csvs: Mapping[str, tuple[str, bytes]],
    user: Any = None,
    label: str = "",
) -> EvaluationRun:
    """Import assessments made elsewhere (the challenge's CSV format) and score them.

    ``csvs`` maps paper kinds to (file name, content). The submission's answers come from the
    CSVs; the recorded c values are judged through the same queue as any other judge.
    An import is an entry of the team like any other and counts towards its quota.
    """
    if not csvs.get(PaperKind.GENUINE):
        raise ChecklistSubmissionError("--genuine is required", field="genuine")
    if bool(csvs.get(PaperKind.ADVERSARIAL)) != bool(csvs.get(PaperKind.TRUTH)):
        raise ChecklistSubmissionError(
            "--adversarial and --truth go together: give both or neither", field="truth"
        )
    questions = questions_by_number()
    texts = {q.question: q.number for q in questions.values()}
    rows: dict[str, list[RecordedRow]] = {}
    for kind, pair in csvs.items():
        if not pair:
            continue
        name, data = pair
        try:
            rows[kind] = parse_recorded_csv(data, file=name, question_texts=texts)
        except RecordedCsvError as exc:
            raise ChecklistSubmissionError(str(exc), field=FIELD_FOR_KIND[PaperKind(kind)]) from exc
    verdicts = {
        kind: {str(r.number): [r.correct, r.review] for r in kind_rows}
        for kind, kind_rows in rows.items()
    }
    with transaction.atomic():
        submission = ChecklistSubmission.objects.create(
            challenge=team.challenge,
            team=team,
            submitted_by=user if getattr(user, "is_authenticated", False) else None,
            kind=SubmissionKind.TRIPLET if len(rows) == 3 else SubmissionKind.GENUINE_ONLY,
            status=SubmissionStatus.EXTRACTED,
            label=label or "Imported assessments",
            phase=_import_phase(team.challenge),
        )
        for kind, kind_rows in rows.items():
            paper = Paper.objects.create(
                submission=submission,
                team=team,
                kind=kind,
                title=f"{FIELD_FOR_KIND[PaperKind(kind)]} paper (imported)",
                source_format=SourceFormat.CSV,
                original_name=csvs[kind][0][:255],
            )
            ChecklistAnswer.objects.bulk_create(
                [
                    ChecklistAnswer(
                        paper=paper,
                        question=questions[r.number],
                        answer=r.answer,
                        raw_answer=r.raw_answer,
                        justification=r.justification,
                    )
                    for r in kind_rows
                ]
            )
        return checklist_submission_assess(
            submission=submission,
            user=user,
            judge="recorded",
            judge_config={"verdicts": verdicts},
        )


def _import_phase(challenge: Any) -> Phase | None:
    """The open phase, as for a participant's submission; a maintainer's import outside every
    phase is kept on the board without phases rather than refused."""
    try:
        return phase_open_for(challenge)
    except PhaseClosed:
        return None
