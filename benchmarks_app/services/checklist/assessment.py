"""The queue's processor of checklist runs: judge every answer in batches, then score.

A run is resumable: answers that already have a verdict in the run are skipped, and those
the judge could not decide are retried, so a resumed run asks the judge only what is missing.
"""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from benchmarks_app.db_pool import orm_trip
from benchmarks_app.models import (
    AssessmentStatus,
    ChecklistAnswer,
    ChecklistAssessment,
    ChecklistScore,
    ChecklistSubmission,
    EvaluationRun,
    PaperKind,
    SubmissionStatus,
)
from benchmarks_app.services.judge_records import judge_record_concurrency
from benchmarks_app.services.judging import (
    DbJudgeCache,
    LedgerRecorder,
    ledger_recorder,
    llm_config_for_run,
    llm_config_probe,
)
from benchmarks_app.services.leases import until_cancelled
from benchmarks_app.services.run_state import run_advance, run_finish, run_set_total
from scoring.checklist.judges import (
    ChecklistItem,
    ChecklistJudge,
    ChecklistVerdict,
    OfflineChecklistJudge,
    RecordedChecklistJudge,
    assess_item,
    unsure,
)
from scoring.checklist.openai_judge import OpenAIChecklistJudge
from scoring.checklist.scores import (
    ChecklistScores,
    PaperAssessment,
    checklist_scores,
    s_interval,
)
from scoring.judges.consensus import ConsensusResult, gather_all
from scoring.judges.failures import JudgeUnavailable
from scoring.judges.llm import make_client
from scoring.judges.server import AdaptiveLimiter


def _build_judge(run: EvaluationRun) -> tuple[ChecklistJudge, LedgerRecorder | None]:
    """The run's judge and, for LLM judges, the ledger recorder to flush after each batch.

    Called inside the run's event loop: an LLM judge's client (and its pooled connections)
    belongs to that one loop and is closed by :func:`_close_judge` before the loop ends.
    """
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
        model = run.judge.split(":", 1)[1] if ":" in run.judge else settings.JUDGE_MODEL
        config = llm_config_for_run(run, model=model)
        recorder = ledger_recorder(run)
        judge = OpenAIChecklistJudge(
            client=make_client(config),
            config=config,
            cache=DbJudgeCache(),
            record=recorder,
            limiter=AdaptiveLimiter(judge_record_concurrency(run.judge_record)),
        )
        return judge, recorder
    raise ValueError(f"unknown checklist judge {run.judge!r}")


async def _close_judge(judge: ChecklistJudge) -> None:
    close = getattr(judge, "aclose", None)
    if close is not None:
        await close()


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


def checklist_vote_policy() -> str:
    """How many votes an answer gets (CHECKLIST_VOTES; CHECKLIST_SINGLE_VOTE=1 is "single")."""
    if getattr(settings, "CHECKLIST_SINGLE_VOTE", False):
        return "single"
    return str(getattr(settings, "CHECKLIST_VOTES", "adaptive"))


async def _assess_batch(
    judge: ChecklistJudge,
    items: list[ChecklistItem],
    iterations: int,
    concurrency: int,
    policy: str,
) -> list[ConsensusResult[ChecklistVerdict]]:
    gate = asyncio.Semaphore(concurrency)

    async def one(item: ChecklistItem) -> ConsensusResult[ChecklistVerdict]:
        async with gate:
            return await assess_item(judge, item, iterations=iterations, policy=policy)

    # The first JudgeUnavailable cancels the other answers' calls: the run pauses as a whole.
    return await gather_all(*(one(i) for i in items))


def _votes_json(result: ConsensusResult[ChecklistVerdict]) -> list[dict[str, Any]]:
    return [
        {
            "number": v.number,
            "correct": None if v.verdict is None else v.verdict.correct,
            "feedback": "" if v.verdict is None else v.verdict.feedback[:500],
            "error": v.error,
            # Why another vote was asked after this one, where it was unsure.
            "unsure": "" if v.verdict is None else unsure(v.verdict),
        }
        for v in result.votes
    ]


async def _judge_all(run: EvaluationRun, to_judge: list[ChecklistAnswer]) -> int:
    """Judge every batch in ONE event loop; returns how many answers could not be assessed.

    One loop for the whole run, because an ``AsyncOpenAI`` client's pooled keep-alive
    connections belong to the loop that opened them: a new loop per batch made every pooled
    connection fail from the second batch on ("Event loop is closed"). Results are stored
    after each batch (on the processor's thread), so a crashed run resumes from there.
    """
    judge, recorder = _build_judge(run)
    try:
        if isinstance(judge, OpenAIChecklistJudge):
            await llm_config_probe(
                run, client=judge.client, config=judge.config, limiter=judge.limiter
            )
        iterations = int(settings.JUDGE_ITERATIONS)
        batch_size = int(settings.JUDGE_BATCH_SIZE)
        concurrency = int(settings.JUDGE_CONCURRENCY)
        policy = checklist_vote_policy()
        await orm_trip(_record_policy)(run.pk, policy)
        failed = 0
        for start in range(0, len(to_judge), batch_size):
            batch = to_judge[start : start + batch_size]
            results = await until_cancelled(
                _assess_batch(judge, [_item(a) for a in batch], iterations, concurrency, policy),
                run_id=run.pk,
            )
            failed += await orm_trip(_store_batch)(run, batch, results, recorder)
        return failed
    finally:
        await _close_judge(judge)


def _record_policy(run_id: int, policy: str) -> None:
    # The run says how its answers were voted on (the run page shows it with what it cost).
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().get(pk=run_id)
        run.judge_config = {**(run.judge_config or {}), "votes": policy}
        run.save(update_fields=["judge_config", "updated_at"])


def _store_batch(
    run: EvaluationRun,
    batch: list[ChecklistAnswer],
    results: list[ConsensusResult[ChecklistVerdict]],
    recorder: LedgerRecorder | None,
) -> int:
    failed = 0
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
                    feedback=f"The judge could not decide ({result.reason}): {errors}"[:2000],
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
        run_advance(run=run, by=len(batch) - failed)
    if recorder is not None:
        recorder.flush()
    return failed


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
    except JudgeUnavailable:
        # The judge is down, not the submission: the run pauses ("waiting for judge") and is
        # picked up again by itself, so the submission stays where it is.
        raise
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
    # Loaded here: the judge is built inside the event loop, where the ORM may not run.
    _ = run.judge_record
    failed = async_to_sync(_judge_all)(run, to_judge) if to_judge else 0

    if failed:
        # The run's error says why the answers failed and whether resuming helps.
        run = run_finish(run=run, failed_items=failed)
        ChecklistSubmission.objects.filter(pk=submission.pk).update(
            status=SubmissionStatus.FAILED,
            # Still an accepted entry: it keeps its quota slot (see counting_towards_quota).
            error=f"{run.error} The submission still counts towards the team's quota."[:2000],
        )
        return
    scores, ci = _score(run, submission)
    with transaction.atomic():
        ChecklistScore.objects.create(
            run=run,
            submission=submission,
            c_g=scores.c_g,
            c_a=scores.c_a,
            c_t=scores.c_t,
            r=scores.r,
            s=scores.s,
            # Computed once here, not per request: the board only reads it.
            ci=ci,
        )
        ChecklistSubmission.objects.filter(pk=submission.pk).update(
            status=SubmissionStatus.SCORED, error="", updated_at=timezone.now()
        )
    run_finish(run=run)


def _score(
    run: EvaluationRun, submission: ChecklistSubmission
) -> tuple[ChecklistScores, dict[str, Any] | None]:
    """The submission's C, R and S, and the bootstrap interval of S over questions."""
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
    triplet = (
        papers[PaperKind.GENUINE],
        papers.get(PaperKind.ADVERSARIAL),
        papers.get(PaperKind.TRUTH),
    )
    return checklist_scores(*triplet), s_interval(*triplet)
