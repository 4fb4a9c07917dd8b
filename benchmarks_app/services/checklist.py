"""Writes of the paper checklist challenge: teams, submissions under quota, assessment runs.

Extraction (seconds for a long PDF) happens before the team row is locked, so the lock that
makes the quota check safe against concurrent requests is held only for a few short queries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.utils import timezone

from benchmarks_app.models import (
    AssessmentStatus,
    Benchmark,
    Challenge,
    ChecklistAnswer,
    ChecklistAssessment,
    ChecklistQuestion,
    ChecklistScore,
    ChecklistSubmission,
    EvaluationRun,
    Membership,
    Paper,
    PaperKind,
    SourceFormat,
    SubmissionKind,
    SubmissionStatus,
    Team,
)
from benchmarks_app.selectors.checklist import QuotaStatus, checklist_quota
from benchmarks_app.services.runs import run_advance, run_create, run_finish, run_set_total
from benchmarks_app.services.uploads import upload_max_bytes
from scoring.checklist.extract import ExtractedPaper, ExtractionError, extract_paper
from scoring.checklist.judges import (
    ChecklistItem,
    ChecklistJudge,
    ChecklistVerdict,
    OfflineChecklistJudge,
    RecordedChecklistJudge,
    assess_item,
)
from scoring.checklist.recorded import RecordedCsvError, RecordedRow, parse_recorded_csv
from scoring.checklist.scores import PaperAssessment, checklist_scores
from scoring.judges.consensus import ConsensusResult

logger = logging.getLogger(__name__)

FIELD_FOR_KIND = {PaperKind.GENUINE: "genuine", PaperKind.ADVERSARIAL: "adversarial",
                  PaperKind.TRUTH: "truth"}  # fmt: skip
JUDGES = ("offline", "openai", "recorded")


class ChecklistSubmissionError(Exception):
    """A submission was refused; ``field`` names the form field (genuine, adversarial...)."""

    code = "invalid"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class QuotaExceeded(ChecklistSubmissionError):
    code = "quota_exceeded"

    def __init__(self, message: str, *, quota: QuotaStatus) -> None:
        super().__init__(message)
        self.quota = quota


class NotAllowed(ChecklistSubmissionError):
    code = "not_allowed"


@dataclass(frozen=True)
class PaperUpload:
    """One uploaded file as the service sees it (views convert Django's UploadedFile)."""

    name: str
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)


# --- teams ---------------------------------------------------------------------------------


@transaction.atomic
def checklist_team_create(*, challenge: Challenge, name: str, members: Iterable[Any] = ()) -> Team:
    team, _ = Team.objects.get_or_create(challenge=challenge, name=name)
    for user in members:
        checklist_membership_add(team=team, user=user)
    return team


@transaction.atomic
def checklist_membership_add(*, team: Team, user: Any) -> Membership:
    existing = Membership.objects.filter(user=user, challenge_id=team.challenge_id).first()
    if existing and existing.team_id != team.pk:
        raise ChecklistSubmissionError(
            f"{user} already belongs to team {existing.team} in this challenge"
        )
    if existing:
        return existing
    return Membership.objects.create(team=team, user=user, challenge_id=team.challenge_id)


class TeamError(ChecklistSubmissionError):
    """A team could not be created or joined; ``field`` is ``name`` or ``invite_code``."""


def _already_in_team(*, user: Any, challenge: Challenge, field: str) -> TeamError:
    team = Membership.objects.filter(user=user, challenge=challenge).select_related("team")
    current = team.first()
    where = f"team {current.team.name}" if current else "a team"
    return TeamError(
        f"You are already in {where} of {challenge.name}; a participant belongs to one team "
        "per challenge.",
        field=field,
    )


def _join(*, team: Team, user: Any, field: str) -> Membership:
    """Add the user under the one-team-per-challenge constraint, which also settles races."""
    challenge = team.challenge
    if Membership.objects.filter(user=user, challenge=challenge).exists():
        raise _already_in_team(user=user, challenge=challenge, field=field)
    try:
        # A savepoint: a concurrent request that got there first leaves the outer
        # transaction usable, and the clear message replaces the IntegrityError.
        with transaction.atomic():
            return Membership.objects.create(team=team, user=user, challenge=challenge)
    except IntegrityError as exc:
        raise _already_in_team(user=user, challenge=challenge, field=field) from exc


@transaction.atomic
def team_create(*, user: Any, challenge: Challenge, name: str) -> Team:
    """A participant creates a team of ``challenge`` and becomes its first member."""
    name = " ".join(name.split())
    if not name:
        raise TeamError("Give the team a name.", field="name")
    if len(name) > 100:
        raise TeamError("The team name is longer than 100 characters.", field="name")
    if not challenge.is_open:
        raise TeamError(f"The challenge {challenge.name} is closed.", field="challenge")
    if Membership.objects.filter(user=user, challenge=challenge).exists():
        raise _already_in_team(user=user, challenge=challenge, field="name")
    taken = TeamError(
        f"The team name {name!r} is already taken in {challenge.name}; choose another, or ask "
        "that team for its invite code.",
        field="name",
    )
    if Team.objects.filter(challenge=challenge, name__iexact=name).exists():
        raise taken
    try:
        with transaction.atomic():
            team = Team.objects.create(challenge=challenge, name=name)
    except IntegrityError as exc:
        raise taken from exc
    _join(team=team, user=user, field="name")
    return team


@transaction.atomic
def team_join(*, user: Any, invite_code: str) -> Membership:
    """Join the team whose invite code this is (one team per user per challenge)."""
    code = invite_code.strip()
    team = (
        Team.objects.select_related("challenge").filter(invite_code=code).first() if code else None
    )
    if team is None:
        raise TeamError(
            "Unknown invite code: check it with a member of the team.", field="invite_code"
        )
    if not team.challenge.is_open:
        raise TeamError(f"The challenge {team.challenge.name} is closed.", field="invite_code")
    return _join(team=team, user=user, field="invite_code")


# --- submissions ---------------------------------------------------------------------------


def _word_cap() -> int:
    return int(getattr(settings, "CHECKLIST_BODY_WORD_CAP", 15000))


def _check_combination(files: Mapping[str, PaperUpload | None]) -> None:
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


def checklist_extract_upload(*, kind: str, upload: PaperUpload) -> ExtractedPaper:
    """Size check and extraction of one file; errors name the field and the file."""
    field = FIELD_FOR_KIND[PaperKind(kind)]
    limit = upload_max_bytes()
    if upload.size > limit:
        raise ChecklistSubmissionError(
            f"{field} paper {upload.name!r} is {upload.size / 2**20:.1f} MB; the upload limit "
            f"is {limit // 2**20} MB.",
            field=field,
        )
    if upload.size == 0:
        raise ChecklistSubmissionError(f"{field} paper {upload.name!r} is empty.", field=field)
    try:
        return extract_paper(upload.data, upload.name, word_cap=_word_cap())
    except ExtractionError as exc:
        raise ChecklistSubmissionError(f"{field} paper: {exc}", field=field) from exc


def _questions_by_number() -> dict[int, ChecklistQuestion]:
    questions = {q.number: q for q in ChecklistQuestion.objects.all()}
    if len(questions) < 15:
        raise ChecklistSubmissionError(
            "The checklist questions are not loaded (run the migrations)."
        )
    return questions


def checklist_submission_create(
    *,
    team: Team,
    user: Any,
    files: Mapping[str, PaperUpload | None],
    label: str = "",
    assess: bool = False,
    judge: str | None = None,
) -> ChecklistSubmission:
    """Validate, extract, then create the submission under the team's quota.

    ``files`` maps paper kinds (G, A, T) to uploads. The submission is left ``extracted`` so
    that the participant can check what was read; ``assess=True`` queues it at once.
    Nothing is stored when a file is refused, so refused submissions never count.
    """
    challenge = team.challenge
    if not challenge.is_open:
        raise NotAllowed(f"The challenge {challenge.name} is closed for submissions.")
    if (
        getattr(user, "is_authenticated", False)
        and not user.is_staff
        and not Membership.objects.filter(team=team, user=user).exists()
    ):
        raise NotAllowed(f"You are not a member of team {team.name}.")
    _check_combination(files)
    extracted: dict[str, tuple[PaperUpload, ExtractedPaper]] = {}
    for paper_kind in (PaperKind.GENUINE, PaperKind.ADVERSARIAL, PaperKind.TRUTH):
        upload = files.get(paper_kind)
        if upload:
            extracted[paper_kind] = (
                upload,
                checklist_extract_upload(kind=paper_kind, upload=upload),
            )
    questions = _questions_by_number()
    stored: list[Paper] = []
    try:
        with transaction.atomic():
            # The lock serializes concurrent submissions of one team: the count below and
            # the insert happen with no other request of the team in between.
            Team.objects.select_for_update().get(pk=team.pk)
            quota = checklist_quota(team=team)
            if quota.remaining <= 0:
                raise QuotaExceeded(quota.exceeded_message, quota=quota)
            submission = ChecklistSubmission.objects.create(
                challenge=challenge,
                team=team,
                submitted_by=user if getattr(user, "is_authenticated", False) else None,
                kind=SubmissionKind.TRIPLET if len(extracted) == 3 else SubmissionKind.GENUINE_ONLY,
                status=SubmissionStatus.EXTRACTED,
                label=label[:200],
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
    return paper


def _judge_name(judge: str | None) -> str:
    name = judge or getattr(settings, "JUDGE_DEFAULT", "offline") or "offline"
    base = name.split(":", 1)[0]
    if base not in JUDGES:
        raise ChecklistSubmissionError(
            f"Unknown judge {name!r}: use one of {', '.join(JUDGES)}.", field="judge"
        )
    if base == "openai" and ":" not in name:
        name = f"openai:{settings.JUDGE_MODEL}"
    return name


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
    name = _judge_name(judge)
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
        created_by=user,
        checklist_submission=locked,
    )


@transaction.atomic
def checklist_submission_discard(*, submission: ChecklistSubmission) -> None:
    """Withdraw a submission that was extracted but not assessed: it stops counting."""
    locked = ChecklistSubmission.objects.select_for_update().get(pk=submission.pk)
    if locked.status != SubmissionStatus.EXTRACTED:
        raise NotAllowed("Only a submission that has not been assessed can be withdrawn.")
    locked.status = SubmissionStatus.FAILED
    locked.error = "Withdrawn by the team before assessment."
    locked.save(update_fields=["status", "error", "updated_at"])


# --- recorded assessments ------------------------------------------------------------------


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
    questions = _questions_by_number()
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


# --- assessment (the queue's processor) ----------------------------------------------------


def _build_judge(run: EvaluationRun) -> tuple[ChecklistJudge, Any]:
    """The run's judge and, for LLM judges, the ledger recorder to flush after each batch."""
    base = run.judge.split(":", 1)[0]
    if base == "offline":
        return OfflineChecklistJudge(), None
    if base == "recorded":
        raw = (run.judge_config or {}).get("verdicts", {})
        verdicts = {
            (kind, int(number)): (int(value[0]), str(value[1]))
            for kind, by_number in raw.items()
            for number, value in by_number.items()
        }
        return RecordedChecklistJudge(verdicts), None
    if base == "openai":
        from benchmarks_app.services.judging import DbJudgeCache, ledger_recorder
        from scoring.checklist.openai_judge import OpenAIChecklistJudge
        from scoring.judges.llm import LLMConfig, make_client

        model = run.judge.split(":", 1)[1] if ":" in run.judge else settings.JUDGE_MODEL
        config = LLMConfig(
            model=model,
            api_key=settings.OPENAI_API_KEY,
            base_url=settings.OPENAI_BASE_URL,
            timeout_s=settings.JUDGE_TIMEOUT_S,
            max_retries=settings.JUDGE_MAX_RETRIES,
            json_mode=settings.JUDGE_JSON_MODE,
        )
        recorder = ledger_recorder(run)
        judge = OpenAIChecklistJudge(
            client=make_client(config),
            config=config,
            cache=DbJudgeCache(),
            record=recorder,
        )
        return judge, recorder
    raise ValueError(f"unknown checklist judge {run.judge!r}")


def _item(answer: ChecklistAnswer) -> ChecklistItem:
    q = answer.question
    return ChecklistItem(
        paper_kind=answer.paper.kind,
        number=q.number,
        title=q.title,
        question=q.question,
        guidelines=q.guidelines,
        answer=answer.answer,
        justification=answer.justification,
        paper_text=answer.paper.extracted_text,
    )


async def _assess_batch(
    judge: ChecklistJudge, items: list[ChecklistItem], iterations: int, concurrency: int
) -> list[ConsensusResult[ChecklistVerdict]]:
    gate = asyncio.Semaphore(concurrency)

    async def one(item: ChecklistItem) -> ConsensusResult[ChecklistVerdict]:
        async with gate:
            return await assess_item(judge, item, iterations=iterations)

    return list(await asyncio.gather(*(one(i) for i in items)))


def _votes_json(result: ConsensusResult[ChecklistVerdict]) -> list[dict[str, Any]]:
    return [
        {
            "number": v.number,
            "correct": None if v.verdict is None else v.verdict.correct,
            "feedback": "" if v.verdict is None else v.verdict.feedback[:500],
            "error": v.error,
        }
        for v in result.votes
    ]


def process_checklist(run: EvaluationRun) -> None:
    """Assess every answer still without a verdict in this run, then score the submission."""
    submission = run.checklist_submission
    if submission is None:
        raise ValueError(f"run #{run.pk} has no checklist submission")
    ChecklistSubmission.objects.filter(pk=submission.pk).update(
        status=SubmissionStatus.ASSESSING, error="", updated_at=timezone.now()
    )
    try:
        _process(run, submission)
    except Exception as exc:
        # A platform failure, not a refused submission: it keeps counting towards the quota.
        ChecklistSubmission.objects.filter(pk=submission.pk).update(
            status=SubmissionStatus.FAILED, error=f"Assessment failed: {exc}"[:2000]
        )
        raise


def _process(run: EvaluationRun, submission: ChecklistSubmission) -> None:
    answers = list(
        ChecklistAnswer.objects.filter(paper__submission=submission)
        .select_related("paper", "question")
        .order_by("paper__kind", "question__number")
    )
    done_ids = set(
        ChecklistAssessment.objects.filter(run=run)
        .exclude(status=AssessmentStatus.JUDGE_FAILED)
        .values_list("answer_id", flat=True)
    )
    pending = [a for a in answers if a.pk not in done_ids]
    run_set_total(run=run, total=len(answers), done=len(answers) - len(pending))

    todo = [a for a in pending if a.answer == "TODO"]
    if todo:
        ChecklistAssessment.objects.bulk_create(
            [
                ChecklistAssessment(
                    run=run,
                    answer=a,
                    status=AssessmentStatus.SKIPPED_TODO,
                    correct=0,
                    feedback="The answer is TODO: counted as incorrect without assessment.",
                )
                for a in todo
            ]
        )
        run_advance(run=run, by=len(todo))

    to_judge = [a for a in pending if a.answer != "TODO"]
    failed = 0
    if to_judge:
        judge, recorder = _build_judge(run)
        iterations = int(settings.JUDGE_ITERATIONS)
        batch_size = int(settings.JUDGE_BATCH_SIZE)
        concurrency = int(settings.JUDGE_CONCURRENCY)
        for start in range(0, len(to_judge), batch_size):
            batch = to_judge[start : start + batch_size]
            results = async_to_sync(_assess_batch)(
                judge, [_item(a) for a in batch], iterations, concurrency
            )
            rows = []
            for answer, result in zip(batch, results, strict=True):
                if result.failed or result.verdict is None:
                    failed += 1
                    errors = "; ".join(v.error for v in result.votes if v.error)
                    rows.append(
                        ChecklistAssessment(
                            run=run,
                            answer=answer,
                            status=AssessmentStatus.JUDGE_FAILED,
                            correct=None,
                            feedback=f"The judge could not decide ({result.reason}): {errors}"[
                                :2000
                            ],
                            votes=_votes_json(result),
                        )
                    )
                else:
                    rows.append(
                        ChecklistAssessment(
                            run=run,
                            answer=answer,
                            status=AssessmentStatus.OK,
                            correct=1 if result.verdict.correct else 0,
                            feedback=result.verdict.feedback[:2000],
                            votes=_votes_json(result),
                        )
                    )
            with transaction.atomic():
                ChecklistAssessment.objects.bulk_create(rows)
                run_advance(run=run, by=len(batch) - sum(r.correct is None for r in rows))
            if recorder is not None:
                recorder.flush()

    if failed:
        ChecklistSubmission.objects.filter(pk=submission.pk).update(
            status=SubmissionStatus.FAILED,
            # Still an accepted entry: it keeps its quota slot (see counting_towards_quota).
            error=f"{failed} answer(s) could not be assessed by the judge; "
            "the run can be resumed to retry them. The submission still counts towards the "
            "team's quota.",
        )
        run_finish(run=run, failed_items=failed)
        return
    scores = _score(run, submission)
    with transaction.atomic():
        ChecklistScore.objects.create(
            run=run,
            submission=submission,
            c_g=scores.c_g,
            c_a=scores.c_a,
            c_t=scores.c_t,
            r=scores.r,
            s=scores.s,
        )
        ChecklistSubmission.objects.filter(pk=submission.pk).update(
            status=SubmissionStatus.SCORED, error="", updated_at=timezone.now()
        )
    run_finish(run=run)


def _score(run: EvaluationRun, submission: ChecklistSubmission) -> Any:
    assessments = ChecklistAssessment.objects.filter(run=run).exclude(
        status=AssessmentStatus.JUDGE_FAILED
    )
    by_kind: dict[str, tuple[dict[int, str], dict[int, int]]] = {}
    for kind, number, answer, correct in assessments.values_list(
        "answer__paper__kind", "answer__question__number", "answer__answer", "correct"
    ):
        answers, correct_map = by_kind.setdefault(kind, ({}, {}))
        answers[number] = answer
        correct_map[number] = int(correct or 0)
    papers = {k: PaperAssessment(answers=a, correct=c) for k, (a, c) in by_kind.items()}
    if PaperKind.GENUINE not in papers:
        raise ValueError(f"submission #{submission.pk} has no genuine paper")
    return checklist_scores(
        papers[PaperKind.GENUINE],
        papers.get(PaperKind.ADVERSARIAL),
        papers.get(PaperKind.TRUTH),
    )
