"""Submissions of a team: creation under the quota, queuing their assessment, withdrawal.

Extraction (seconds for a long PDF) happens before the team row is locked, so the lock that
makes the quota check safe against concurrent requests is held only for a few short queries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from benchmarks_app.models import (
    Benchmark,
    ChecklistAnswer,
    ChecklistQuestion,
    ChecklistSubmission,
    EvaluationRun,
    JudgeRecord,
    Membership,
    Paper,
    PaperKind,
    Phase,
    SubmissionKind,
    SubmissionStatus,
    Team,
)
from benchmarks_app.selectors.checklist import checklist_quota
from benchmarks_app.selectors.phases import PhaseClosed, phase_open_for
from benchmarks_app.services.checklist.boards import checklist_board_refresh_for_submission
from benchmarks_app.services.checklist.errors import (
    ChecklistSubmissionError,
    NotAllowed,
    QuotaExceeded,
)
from benchmarks_app.services.checklist.papers import (
    PaperUpload,
    checklist_extract_upload,
    paper_checks_allowance_check,
    paper_checks_count_refusal,
    questions_by_number,
)
from benchmarks_app.services.entry_metadata import METHOD_LABELS, method_metadata_check
from benchmarks_app.services.judge_records import judge_record_find
from benchmarks_app.services.runs import run_create
from scoring.checklist.extract import ExtractedPaper

JUDGES = ("offline", "openai", "recorded")


class PhaseNotOpen(NotAllowed):
    """No phase of the challenge is open now; the message gives the phases' dates."""

    code = "phase_closed"


def method_metadata(*, name: str = "", description: str = "", url: str = "") -> dict[str, str]:
    """The entry's method name, description and link, checked; raises naming the field."""
    values, problems = method_metadata_check(
        method_name=name, method_description=description, method_url=url
    )
    if problems:
        field, problem = next(iter(problems.items()))  # the form names one field at a time
        raise ChecklistSubmissionError(f"{METHOD_LABELS[field]}: {problem}.", field=field)
    return values


def submission_phase(challenge: Any) -> Phase | None:
    """The phase a submission made now lands in; refused with the phases' dates otherwise."""
    try:
        return phase_open_for(challenge)
    except PhaseClosed as exc:
        raise PhaseNotOpen(exc.message) from exc


def _check_combination(files: Mapping[str, PaperUpload | None]) -> None:
    """Accept G alone or the full G/A/T triplet, naming the field that is missing."""
    if not files.get(PaperKind.GENUINE):
        raise ChecklistSubmissionError(
            "A genuine (G) paper is required: submit G alone, or G with A and T.",
            field="genuine",
        )
    has_a = bool(files.get(PaperKind.ADVERSARIAL))
    has_t = bool(files.get(PaperKind.TRUTH))
    if has_a and not has_t:
        raise ChecklistSubmissionError(
            "An adversarial (A) paper needs its truth-adversarial (T) version: "
            "submit G alone, or the full G/A/T triplet.",
            field="truth",
        )
    if has_t and not has_a:
        raise ChecklistSubmissionError(
            "A truth-adversarial (T) paper needs its adversarial (A) version: "
            "submit G alone, or the full G/A/T triplet.",
            field="adversarial",
        )


def checklist_submission_create(
    *,
    team: Team,
    user: Any,
    files: Mapping[str, PaperUpload | None],
    label: str = "",
    assess: bool = False,
    judge: str | None = None,
    method_name: str = "",
    method_description: str = "",
    method_url: str = "",
) -> ChecklistSubmission:
    """Validate, extract, then create the submission under the team's quota.

    ``files`` maps paper kinds (G, A, T) to uploads. The submission is left ``extracted`` so
    that the participant can check what was read; ``assess=True`` queues it at once.
    Nothing is stored when a file is refused, so refused submissions never count. When the
    challenge has phases, the submission lands in the open one (with its quotas) and is
    refused with the phases' dates when none is open.
    """
    challenge = team.challenge
    if not challenge.is_open:
        raise NotAllowed(f"The challenge {challenge.name} is closed for submissions.")
    metadata = method_metadata(name=method_name, description=method_description, url=method_url)
    phase = submission_phase(challenge)
    if (
        getattr(user, "is_authenticated", False)
        and not user.is_staff
        and not Membership.objects.filter(team=team, user=user).exists()
    ):
        raise NotAllowed(f"You are not a member of team {team.name}.")
    _check_combination(files)
    # Checked before extraction too (the locked check below is the one that counts): a team
    # with nothing left spends no worker time on reading its files.
    quota = checklist_quota(team=team, phase=phase)
    if quota.remaining <= 0:
        raise QuotaExceeded(quota.exceeded_message, quota=quota)
    # Reading costs CPU whether or not the paper is accepted: a refused submission counts
    # against the hour's reads that store nothing, as a preview does.
    paper_checks_allowance_check(user=user)
    extracted: dict[str, tuple[PaperUpload, ExtractedPaper]] = {}
    for paper_kind in (PaperKind.GENUINE, PaperKind.ADVERSARIAL, PaperKind.TRUTH):
        upload = files.get(paper_kind)
        if upload:
            try:
                read = checklist_extract_upload(kind=paper_kind, upload=upload)
            except ChecklistSubmissionError:
                paper_checks_count_refusal(user=user)
                raise
            extracted[paper_kind] = (upload, read)
    questions = questions_by_number()
    stored: list[Paper] = []
    try:
        with transaction.atomic():
            # The lock serializes concurrent submissions of one team: the count below and
            # the insert happen with no other request of the team in between. FOR NO KEY
            # UPDATE, as every writers' lock here: it excludes the other writers but not the
            # key-share lock of a foreign key check, so a run's end that holds the challenge
            # can still write this team's board row. With FOR UPDATE the two waited on each
            # other (this insert's check on the challenge at commit) and PostgreSQL aborted
            # one as deadlocked, a 500 under the rush.
            Team.objects.select_for_update(no_key=True).get(pk=team.pk)
            quota = checklist_quota(team=team, phase=phase)
            if quota.remaining <= 0:
                raise QuotaExceeded(quota.exceeded_message, quota=quota)
            submission = ChecklistSubmission.objects.create(
                challenge=challenge,
                team=team,
                submitted_by=user if getattr(user, "is_authenticated", False) else None,
                kind=SubmissionKind.TRIPLET if len(extracted) == 3 else SubmissionKind.GENUINE_ONLY,
                status=SubmissionStatus.EXTRACTED,
                label=label[:200],
                phase=phase,
                **metadata,
            )
            for kind, (upload, paper_data) in extracted.items():
                paper = _paper_create(
                    submission=submission,
                    kind=kind,
                    upload=upload,
                    extracted=paper_data,
                    questions=questions,
                )
                stored.append(paper)
            if assess:
                checklist_submission_assess(submission=submission, user=user, judge=judge)
    except Exception:
        for paper in stored:
            paper.file.delete(save=False)
        raise
    return submission


def _paper_create(
    *,
    submission: ChecklistSubmission,
    kind: str,
    upload: PaperUpload | None,
    extracted: ExtractedPaper,
    questions: dict[int, ChecklistQuestion],
) -> Paper:
    paper = Paper(
        submission=submission,
        team=submission.team,
        kind=kind,
        title=extracted.title[:500],
        source_format=extracted.source_format,
        extracted_text=extracted.body,
        body_words=extracted.body_words,
        body_truncated=extracted.body_truncated,
        original_name=(upload.name if upload else "")[:255],
    )
    if upload is not None:
        paper.file.save(upload.name, ContentFile(upload.data), save=False)
    try:
        paper.save()
        ChecklistAnswer.objects.bulk_create(
            [
                ChecklistAnswer(
                    paper=paper,
                    question=questions[a.number],
                    answer=a.answer,
                    raw_answer=a.raw_answer[:100],
                    justification=a.justification,
                )
                for a in extracted.answers
            ]
        )
    except Exception:
        # The file was written before its row: a row that could not be stored takes its
        # file with it (the caller deletes the files of the papers stored before this one).
        if paper.file:
            paper.file.delete(save=False)
        raise
    return paper


def _judge_name(judge: str | None) -> tuple[str, JudgeRecord | None]:
    """The run's judge name (``offline``, ``openai:MODEL``...) and the judge record it uses:
    the record ``judge`` names, else the default record of its spelling."""
    name = judge or getattr(settings, "JUDGE_DEFAULT", "offline") or "offline"
    record = judge_record_find(name)
    if record is not None and record.name == name.strip() and record.kind != "replay":
        if record.kind == "offline":
            return "offline", record
        return f"openai:{record.model or settings.JUDGE_MODEL}", record
    base = name.split(":", 1)[0]
    if base not in JUDGES:
        raise ChecklistSubmissionError(
            f"Unknown judge {name!r}: use one of {', '.join(JUDGES)}.", field="judge"
        )
    if base == "openai" and ":" not in name:
        name = f"openai:{settings.JUDGE_MODEL}"
    return name, (record if base == "openai" else None)


@transaction.atomic
def checklist_submission_assess(
    *,
    submission: ChecklistSubmission,
    user: Any = None,
    judge: str | None = None,
    judge_config: dict[str, Any] | None = None,
) -> EvaluationRun:
    """Queue the assessment of an extracted submission (staff may re-assess any time)."""
    locked = ChecklistSubmission.objects.select_for_update().get(pk=submission.pk)
    staff = bool(getattr(user, "is_staff", False))
    if locked.status not in (SubmissionStatus.EXTRACTED, SubmissionStatus.RECEIVED) and not staff:
        raise NotAllowed(
            f"Submission #{locked.pk} is {locked.get_status_display().lower()}; "
            "it is assessed only once."
        )
    name, record = _judge_name(judge)
    if name == "recorded" and not (judge_config or {}).get("verdicts"):
        raise ChecklistSubmissionError(
            "The recorded judge needs imported assessments (import_checklist_assessed).",
            field="judge",
        )
    locked.status = SubmissionStatus.ASSESSING
    locked.error = ""
    locked.save(update_fields=["status", "error", "updated_at"])
    submission.status = locked.status
    return run_create(
        benchmark=Benchmark.CHECKLIST,
        judge=name,
        judge_config=judge_config or {},
        judge_record=record,
        created_by=user,
        checklist_submission=locked,
        phase_id=locked.phase_id,
        method_name=locked.method_name,
        method_description=locked.method_description,
        method_url=locked.method_url,
    )


def _files_delete(names: list[str]) -> None:
    for name in names:
        default_storage.delete(name)


def _member_or_refuse(*, user: Any, team_id: int) -> None:
    if not (
        getattr(user, "is_authenticated", False)
        and Membership.objects.filter(team_id=team_id, user=user).exists()
    ):
        raise NotAllowed("Only a member of the team that made this submission may do that.")


@transaction.atomic
def checklist_submission_discard(*, submission: ChecklistSubmission, user: Any = None) -> None:
    """Withdraw a submission that was extracted but not assessed; its papers' files are deleted.

    It frees its slot of the total quota but still counts on the day it was uploaded (see
    ``checklist_quota``). The files go once the withdrawal commits, so a rollback keeps them.
    With ``user``, only a member of the submission's team may withdraw it.
    """
    if user is not None:
        _member_or_refuse(user=user, team_id=submission.team_id)
    locked = ChecklistSubmission.objects.select_for_update().get(pk=submission.pk)
    if locked.status != SubmissionStatus.EXTRACTED:
        raise NotAllowed("Only a submission that has not been assessed can be withdrawn.")
    was_on_board = locked.board_choice or locked.scores.exists()
    locked.status = SubmissionStatus.WITHDRAWN
    locked.error = "Withdrawn by the team before assessment; its files were deleted."
    locked.board_choice = False
    locked.save(update_fields=["status", "error", "board_choice", "updated_at"])
    papers = Paper.objects.filter(submission=locked).exclude(file="")
    names = [str(name) for name in papers.values_list("file", flat=True)]
    papers.update(file="")
    transaction.on_commit(lambda: _files_delete(names))
    if was_on_board:
        checklist_board_refresh_for_submission(submission=locked)


@transaction.atomic
def checklist_submission_choose(*, user: Any, submission: ChecklistSubmission) -> None:
    """Make ``submission`` its team's entry on the board of its phase (members only).

    Only a scored submission can represent a team; choosing one clears the team's earlier
    choice in the same phase, and the board is rewritten at once.
    """
    _member_or_refuse(user=user, team_id=submission.team_id)
    # The team row lock orders concurrent choices of one team: one choice per phase stays.
    Team.objects.select_for_update(no_key=True).get(pk=submission.team_id)
    locked = ChecklistSubmission.objects.select_for_update().get(pk=submission.pk)
    if locked.status != SubmissionStatus.SCORED or not locked.scores.exists():
        raise NotAllowed(
            f"Submission #{locked.pk} has no score yet: only a scored entry can represent "
            "the team on the board."
        )
    ChecklistSubmission.objects.filter(
        team_id=locked.team_id, phase=locked.phase_id, board_choice=True
    ).exclude(pk=locked.pk).update(board_choice=False)
    if not locked.board_choice:
        locked.board_choice = True
        locked.save(update_fields=["board_choice", "updated_at"])
    submission.board_choice = True
    checklist_board_refresh_for_submission(submission=locked)


@transaction.atomic
def checklist_submission_unchoose(*, user: Any, submission: ChecklistSubmission) -> None:
    """Drop the team's choice: its best entry represents it again (members only)."""
    _member_or_refuse(user=user, team_id=submission.team_id)
    Team.objects.select_for_update(no_key=True).get(pk=submission.team_id)
    locked = ChecklistSubmission.objects.select_for_update().get(pk=submission.pk)
    if not locked.board_choice:
        raise NotAllowed(f"Submission #{locked.pk} is not the team's chosen entry.")
    locked.board_choice = False
    locked.save(update_fields=["board_choice", "updated_at"])
    submission.board_choice = False
    checklist_board_refresh_for_submission(submission=locked)
