"""A run's per-item results, page by page (``/api/runs/<id>/items/``).

* audit: one row per truth finding judged (its latest result: a verdict wins over an earlier
  judge failure), with the matched scan finding's index and the judge's explanation. Hidden
  truth stays hidden: where the repo's truth is not public to the user
  (:func:`~benchmarks_app.selectors.visibility.truth_details_visible`), the title,
  description and explanation are ``None``, read through
  :func:`~benchmarks_app.selectors.visibility.truth_findings_redacted`;
* probes: one row per scored case (probe id, category, severity, passed, risk);
* checklist: one row per assessed answer the user may see (question number, paper, answer,
  correct, feedback).

The rows are read lazily: a page costs a fixed number of queries, whatever the run's size.
Visibility of the run itself is the caller's (``visible_runs``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, overload

from django.db.models import QuerySet

from benchmarks_app.models import (
    AssessmentStatus,
    AuditTruthResult,
    Benchmark,
    ChecklistAssessment,
    EvaluationRun,
    MatchOutcome,
    PaperKind,
    ProbeCaseResult,
)
from benchmarks_app.selectors.runs import FailedItem
from benchmarks_app.selectors.visibility import (
    truth_details_visible,
    truth_findings_redacted,
    visible_checklist_assessments,
)


class LazyRows(Sequence[dict[str, Any]]):
    """A queryset whose pages become dicts only when sliced (what a paginator needs)."""

    def __init__(
        self, queryset: QuerySet[Any], convert: Callable[[list[Any]], list[dict[str, Any]]]
    ) -> None:
        self.queryset = queryset
        self.convert = convert
        self._count: int | None = None

    def count(self) -> int:  # type: ignore[override]
        if self._count is None:
            self._count = self.queryset.count()
        return self._count

    def __len__(self) -> int:
        return self.count()

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return self.convert(list(self.queryset[index]))
        return self.convert([self.queryset[index]])[0]


def _failure(kind: str, item_id: str, where: str, votes: Any) -> str | None:
    reasons = tuple(
        str(v.get("error"))
        for v in (votes if isinstance(votes, list) else [])
        if isinstance(v, dict) and v.get("error")
    )
    return FailedItem(kind=kind, item_id=item_id, where=where, reasons=reasons).why


def _latest_ids(rows: Iterable[tuple[int, int, str]], failed: str) -> list[int]:
    """(row id, item id, status) in storage order → the row that counts for each item."""
    chosen: dict[int, tuple[int, str]] = {}
    for pk, item, status in rows:
        previous = chosen.get(item)
        # A verdict is final; a failure is replaced by the next attempt's row.
        if previous is None or previous[1] == failed:
            chosen[item] = (pk, status)
    return [pk for pk, _ in chosen.values()]


# --- audit -------------------------------------------------------------------------------


def _audit_rows(user: Any, results: list[AuditTruthResult]) -> list[dict[str, Any]]:
    texts = {
        t.pk: t
        for t in truth_findings_redacted(user).filter(pk__in=[r.truth_finding_id for r in results])
    }
    shown: dict[int, bool] = {}
    rows = []
    for r in results:
        if r.repo_id not in shown:
            shown[r.repo_id] = truth_details_visible(user, r.repo)
        text = texts.get(r.truth_finding_id)
        failed = r.outcome == MatchOutcome.JUDGE_FAILED
        rows.append(
            {
                "repo": r.repo.project_id,
                "finding_id": r.truth_finding.finding_id,
                "severity": r.truth_finding.severity,
                "title": getattr(text, "visible_title", None),
                "description": getattr(text, "visible_description", None),
                "outcome": r.outcome,
                "scan_index": r.scan_finding.index if r.scan_finding else None,
                "explanation": r.explanation if shown[r.repo_id] else None,
                "votes": len(r.votes) if isinstance(r.votes, list) else 0,
                "failure": _failure(
                    "truth_finding", r.truth_finding.finding_id, r.repo.project_id, r.votes
                )
                if failed
                else None,
            }
        )
    return rows


def audit_run_items(*, user: Any, run: EvaluationRun) -> LazyRows:
    ids = _latest_ids(
        AuditTruthResult.objects.filter(run=run)
        .order_by("id")
        .values_list("id", "truth_finding_id", "outcome"),
        MatchOutcome.JUDGE_FAILED,
    )
    queryset = (
        AuditTruthResult.objects.filter(id__in=ids)
        .select_related("repo", "truth_finding", "scan_finding")
        .order_by("repo__project_id", "truth_finding__order", "truth_finding_id")
    )
    return LazyRows(queryset, lambda results: _audit_rows(user, results))


# --- probes ------------------------------------------------------------------------------


def _probe_rows(cases: list[ProbeCaseResult]) -> list[dict[str, Any]]:
    return [
        {
            "probe_id": c.probe.probe_id,
            "category": c.probe.category,
            "severity": c.probe.severity,
            "passed": c.passed,
            "risk_score": c.risk_score,
            "weighted_risk": c.weighted_risk,
            "refusal_signal": c.boundary_or_refusal_signal,
        }
        for c in cases
    ]


def probe_run_items(*, run: EvaluationRun) -> LazyRows:
    """Probe submissions and their reports are public (see ``visible_probe_submissions``)."""
    queryset = ProbeCaseResult.objects.filter(run=run).select_related("probe").order_by("id")
    return LazyRows(queryset, _probe_rows)


# --- checklist ---------------------------------------------------------------------------


def _checklist_rows(assessments: list[ChecklistAssessment]) -> list[dict[str, Any]]:
    rows = []
    for a in assessments:
        kind = a.answer.paper.kind
        paper = PaperKind(kind).label if kind in PaperKind.values else kind
        failed = a.status == AssessmentStatus.JUDGE_FAILED
        rows.append(
            {
                "question": a.answer.question.number,
                "paper": paper,
                "answer": a.answer.answer,
                "status": a.status,
                "correct": None if a.correct is None else bool(a.correct),
                "feedback": a.feedback,
                "failure": _failure("question", str(a.answer.question.number), paper, a.votes)
                if failed
                else None,
            }
        )
    return rows


def checklist_run_items(*, user: Any, run: EvaluationRun) -> LazyRows:
    """Only the assessments of answers the user may read (their team's papers, or staff)."""
    visible = visible_checklist_assessments(user).filter(run=run)
    ids = _latest_ids(
        visible.order_by("id").values_list("id", "answer_id", "status"),
        AssessmentStatus.JUDGE_FAILED,
    )
    queryset = (
        ChecklistAssessment.objects.filter(id__in=ids)
        .select_related("answer__paper", "answer__question")
        .order_by("answer__paper__kind", "answer__question__number", "id")
    )
    return LazyRows(queryset, _checklist_rows)


def run_items(*, user: Any, run: EvaluationRun) -> LazyRows:
    """The per-item results of a run the user may see (see the module)."""
    if run.benchmark == Benchmark.AUDIT:
        return audit_run_items(user=user, run=run)
    if run.benchmark == Benchmark.PROBES:
        return probe_run_items(run=run)
    if run.benchmark == Benchmark.CHECKLIST:
        return checklist_run_items(user=user, run=run)
    return LazyRows(ProbeCaseResult.objects.none(), _probe_rows)
