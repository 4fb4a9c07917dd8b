"""Why a run's items could not be judged: the causes behind its failed items.

A failed vote's reason is stored with its item's result (``votes[*].error`` of a judge-failed
:class:`AuditTruthResult` or :class:`ChecklistAssessment`), tagged with its kind (see
:mod:`scoring.judges.failures`). Only the items that are failed *now* count: for each item the
latest result decides, so an item that failed once and was judged after a resume is not a
cause any more. An item whose result names no reason borrows one from the run's ledger.

Each function costs a fixed number of queries, whatever the number of items.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from benchmarks_app.models import (
    AssessmentStatus,
    AuditTruthResult,
    Benchmark,
    ChecklistAssessment,
    EvaluationRun,
    JudgeCall,
    JudgeCallStatus,
    MatchOutcome,
)
from benchmarks_app.models.runs import ACTIVE_STATUSES
from scoring.judges import failures
from scoring.judges.failures import FailureCause

# Ledger statuses that end a call without a verdict, and the kind each one tells.
_LEDGER_KINDS = {
    JudgeCallStatus.ERROR: "",  # the ledger keeps the raw message: its kind is not known
    JudgeCallStatus.INVALID: failures.INVALID,
    "truncated": failures.TRUNCATED,
}


def _vote_reasons(votes: Any) -> list[str]:
    if not isinstance(votes, list):
        return []
    return list(
        dict.fromkeys(
            str(v.get("error") or "") for v in votes if isinstance(v, dict) and v.get("error")
        )
    )


def _latest_failed_votes(rows: Iterable[tuple[Any, Any]]) -> list[Any]:
    """``rows``: (item id, votes) of failed results in storage order; the last one per item."""
    latest: dict[Any, Any] = {}
    for item, votes in rows:
        latest[item] = votes
    return list(latest.values())


def _audit_failed_votes(run: EvaluationRun) -> list[Any]:
    judged = AuditTruthResult.objects.filter(run=run).exclude(outcome=MatchOutcome.JUDGE_FAILED)
    rows = (
        AuditTruthResult.objects.filter(run=run, outcome=MatchOutcome.JUDGE_FAILED)
        .exclude(truth_finding_id__in=judged.values("truth_finding_id"))
        .order_by("created_at", "id")
        .values_list("truth_finding_id", "votes")
    )
    return _latest_failed_votes(rows)


def _checklist_failed_votes(run: EvaluationRun) -> list[Any]:
    decided = ChecklistAssessment.objects.filter(run=run).exclude(
        status=AssessmentStatus.JUDGE_FAILED
    )
    rows = (
        ChecklistAssessment.objects.filter(run=run, status=AssessmentStatus.JUDGE_FAILED)
        .exclude(answer_id__in=decided.values("answer_id"))
        .order_by("created_at", "id")
        .values_list("answer_id", "votes")
    )
    return _latest_failed_votes(rows)


def _ledger_reasons(run: EvaluationRun) -> list[str]:
    """One reason per call of this attempt of the run whose latest try gave no verdict.

    Newest first. The ledger does not say which item a call served (a call is one vote of one
    item, keyed by its prompt hash), so these stand in for items whose result has no reason.
    """
    calls = JudgeCall.objects.filter(run=run)
    if run.started_at is not None:
        calls = calls.filter(created_at__gte=run.started_at)
    failed = calls.filter(status__in=list(_LEDGER_KINDS)).exclude(error="")
    rows = (
        calls.filter(prompt_hash__in=failed.values("prompt_hash"))
        .order_by("created_at", "id")
        .values_list("prompt_hash", "status", "error")
    )
    last: dict[str, tuple[str, str]] = {}
    for prompt_hash, status, error in rows:
        last.pop(prompt_hash, None)  # keep the calls in the order of their latest try
        last[prompt_hash] = (status, error)
    reasons = []
    for status, error in reversed(list(last.values())):
        if status not in _LEDGER_KINDS or not error:
            continue
        kind = _LEDGER_KINDS[status]
        if kind and failures.kind_of(error) == failures.OTHER:
            error = failures.tag(kind, error)
        reasons.append(error)
    return reasons


def run_failed_item_reasons(*, run: EvaluationRun) -> list[list[str]]:
    """The reasons of each item of ``run`` that is failed now (one list per item).

    Audit: truth findings whose latest result is judge-failed; checklist: answers with a
    judge-failed assessment and no decided one. Other benchmarks have no judged items.
    """
    if run.benchmark == Benchmark.AUDIT:
        votes = _audit_failed_votes(run)
    elif run.benchmark == Benchmark.CHECKLIST:
        votes = _checklist_failed_votes(run)
    else:
        return []
    items = [_vote_reasons(v) for v in votes]
    missing = [i for i, reasons in enumerate(items) if not reasons]
    if missing:
        for i, reason in zip(missing, _ledger_reasons(run), strict=False):
            items[i] = [reason]
    return items


def run_failure_causes(*, run: EvaluationRun) -> list[FailureCause]:
    """The distinct causes of ``run``'s failed items, with counts of items, most frequent first.

    Empty when nothing failed, or when no reason was recorded anywhere.
    """
    return failures.summarize_items(run_failed_item_reasons(run=run))


def ended_run_failure_causes(*, run: EvaluationRun) -> list[FailureCause]:
    """:func:`run_failure_causes` of a run that ended with failed items; else none, no query.

    What pages and the API show: a queued or running run (a resumed one included) has no
    failed items yet.
    """
    if not run.failed_items or run.status in ACTIVE_STATUSES:
        return []
    return run_failure_causes(run=run)
