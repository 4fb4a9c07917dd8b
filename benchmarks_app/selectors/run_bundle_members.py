"""What each benchmark's run puts in its bundle besides the run and its judge ledger: the
inputs the judge saw, every verdict with its votes, and the stored metrics, with hidden truth
and unpublished inputs withheld as :mod:`benchmarks_app.selectors.run_bundles` explains (that
module assembles the bundle and decides who gets which inputs)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Max

from benchmarks_app.models import (
    AuditRepoResult,
    AuditRunScan,
    AuditTruthResult,
    ChecklistAssessment,
    ChecklistScore,
    EvaluationRun,
    ProbeCaseResult,
    ProbeRunReport,
    ScanFinding,
    TruthFinding,
)
from benchmarks_app.selectors.run_metrics import run_metrics
from scoring import bundles

WITHHELD = "[withheld: hidden truth]"
INPUTS_WITHHELD = "[withheld: the participant's inputs are not published]"
# How much of a participant's inputs a bundle carries (see bundle_inputs_level).
ALL, SHOWN, NONE = "all", "shown", "none"
INPUT_LEVELS = (ALL, SHOWN, NONE)


def withheld_mark(hidden_truth: bool) -> str:
    return WITHHELD if hidden_truth else INPUTS_WITHHELD


# --- Audit ----------------------------------------------------------------------------------


def _run_truth(run: EvaluationRun) -> list[TruthFinding]:
    if run.release_id is not None:
        qs = TruthFinding.objects.filter(releases=run.release_id, repo__in=run.repos.all())
    else:
        qs = TruthFinding.objects.current().filter(repo__in=run.repos.all())
    return list(qs.order_by("order", "id"))


def _scan_row(f: ScanFinding, *, level: str, matched: set[tuple[int, int]]) -> dict[str, Any]:
    row: dict[str, Any] = {"index": f.index, "severity": f.severity}
    if level == ALL:
        row.update(
            title=f.title,
            description=f.description,
            vulnerability_type=f.vulnerability_type,
            file=f.file,
            location=f.location,
        )
    elif level == SHOWN and (f.scan_result_id, f.index) in matched:
        row["title"] = f.title
    return row


def audit_members(
    run: EvaluationRun, *, level: str = ALL
) -> tuple[dict[str, Any], bool, list[str], list[str]]:
    """The audit members, whether truth was withheld, and public and hidden truth titles
    (the ledger keeps a prompt only when it quotes public truth alone)."""
    repos = list(run.repos.order_by("project_id"))
    hidden_repos = {r.pk for r in repos if not r.is_public}
    truths: dict[int, list[TruthFinding]] = defaultdict(list)
    for t in _run_truth(run):
        truths[t.repo_id].append(t)
    # The versions the run judged; a run made before they were pinned judged the one its repo
    # result names.
    pinned = dict(
        AuditRepoResult.objects.filter(run=run, scan_result__isnull=False)
        .order_by("id")
        .values_list("repo_id", "scan_result_id")
    )
    pinned.update(AuditRunScan.objects.filter(run=run).values_list("repo_id", "scan_result_id"))
    findings: dict[int, list[ScanFinding]] = defaultdict(list)
    for f in ScanFinding.objects.filter(scan_result_id__in=pinned.values()).order_by("index"):
        findings[f.scan_result_id].append(f)
    # The scan findings the run matched: their titles are what the public run page shows.
    matched = set(
        AuditTruthResult.objects.filter(run=run, scan_finding__isnull=False).values_list(
            "scan_finding__scan_result_id", "scan_finding__index"
        )
    )
    inputs = {
        "batch_size": int((run.judge_config or {}).get("batch_size") or 10),
        "iterations": int((run.judge_config or {}).get("iterations") or 3),
        "repos": [
            {
                "project_id": r.project_id,
                "truth_public": r.pk not in hidden_repos,
                "truth": [
                    {
                        "key": t.pk,
                        "finding_id": t.finding_id,
                        "order": t.order,
                        "severity": t.severity,
                    }
                    for t in truths[r.pk]
                ],
                "scan": [
                    _scan_row(f, level=level, matched=matched)
                    for f in findings.get(pinned.get(r.pk, -1), [])
                ],
            }
            for r in repos
        ],
    }
    truth = {
        r.project_id: [
            {
                "key": t.pk,
                "finding_id": t.finding_id,
                "title": t.title,
                "description": t.description,
                "severity": t.severity,
                "category": t.category,
                "contracts": t.contracts,
            }
            for t in truths[r.pk]
        ]
        for r in repos
        if r.pk not in hidden_repos
    }
    project = {r.pk: r.project_id for r in repos}
    rows = AuditTruthResult.objects.filter(run=run).select_related("scan_finding").order_by("id")
    results = []
    for row in rows:
        # Hidden truth, or inputs not published: explanations quote one or the other.
        hidden = row.repo_id in hidden_repos or level != ALL
        # A hidden repo's vote explanations and errors may quote its truth (or an answer
        # that does): only the verdicts, indices and vote numbers travel.
        votes = [
            {
                **v,
                **{
                    k: withheld_mark(row.repo_id in hidden_repos)
                    for k in ("explanation", "error")
                    if hidden and v.get(k)
                },
            }
            for v in (row.votes or [])
        ]
        results.append(
            {
                "repo": project.get(row.repo_id, str(row.repo_id)),
                "truth_key": row.truth_finding_id,
                "outcome": row.outcome,
                "scan_index": row.scan_finding.index if row.scan_finding else None,
                "explanation": (
                    withheld_mark(row.repo_id in hidden_repos)
                    if hidden and row.explanation
                    else row.explanation
                ),
                "notes": withheld_mark(row.repo_id in hidden_repos)
                if hidden and row.notes
                else row.notes,
                "votes": votes,
                "created_at": row.created_at.isoformat(),
            }
        )
    latest = (
        AuditRepoResult.objects.filter(run=run)
        .values("repo_id")
        .annotate(latest=Max("id"))
        .values("latest")
    )
    repo_results = list(AuditRepoResult.objects.filter(id__in=latest))
    stored: dict[str, Any] = {
        "repos": {
            project.get(r.repo_id, str(r.repo_id)): {
                "metrics": r.metrics,
                "false_positive_indices": r.false_positive_indices,
                "is_complete": r.is_complete,
            }
            for r in repo_results
        },
        "overall": run_metrics(run=run),
        # The F1+ interval the board draws (same resamples, level and seed) over this run's
        # repos, so that a reader checks the board's figure too.
        "interval": bundles.audit_board_interval([r.metrics for r in repo_results])
        if repo_results
        else None,
    }
    members: dict[str, Any] = {
        bundles.INPUTS: inputs,
        bundles.VERDICTS: {"truth_results": results},
        bundles.METRICS: stored,
    }
    if truth:
        members[bundles.TRUTH] = truth
    public = [t.title for r in repos if r.pk not in hidden_repos for t in truths[r.pk] if t.title]
    secret = [t.title for r in repos if r.pk in hidden_repos for t in truths[r.pk] if t.title]
    return members, bool(hidden_repos), public, secret


# --- Probes ---------------------------------------------------------------------------------


def probe_members(run: EvaluationRun, *, level: str = ALL) -> dict[str, Any]:
    cases = (
        ProbeCaseResult.objects.filter(run=run)
        .select_related("response", "probe")
        .order_by("response_id", "id")
    )
    responses, verdicts = [], []
    for row in cases:
        responses.append(
            {
                "response_id": row.response_id,
                "probe_id": row.probe.probe_id,
                "category": row.probe.category,
                "severity": row.probe.severity,
                "expected": row.probe.expected,
                "input": row.probe.input,
                "human_label": row.response.human_label,
                **({"output": row.response.output} if level == ALL else {}),
            }
        )
        verdicts.append(
            {
                "response_id": row.response_id,
                "probe_id": row.probe.probe_id,
                "passed": row.passed,
                "risk_score": row.risk_score,
                "weighted_risk": row.weighted_risk,
                # The case's explanation may quote the response.
                "case": row.case
                if level == ALL or not (row.case or {}).get("explanation")
                else {**row.case, "explanation": INPUTS_WITHHELD},
            }
        )
    report = ProbeRunReport.objects.filter(run=run).first()
    # Every key written, null where the run stored nothing (a run that ended before its report).
    stored: dict[str, Any] = dict.fromkeys(("metrics", "ci", "agreement", "observability"))
    if report is not None:
        stored = {
            "metrics": report.metrics,
            "ci": report.ci,
            "agreement": report.agreement,
            "observability": report.observability,
        }
    return {
        bundles.INPUTS: {"responses": responses},
        bundles.VERDICTS: {"cases": verdicts},
        bundles.METRICS: stored,
    }


# --- Checklist ------------------------------------------------------------------------------


def checklist_members(run: EvaluationRun, *, level: str = ALL) -> dict[str, Any]:
    rows = (
        ChecklistAssessment.objects.filter(run=run)
        .select_related("answer__paper", "answer__question")
        .order_by("id")
    )
    papers: dict[int, dict[str, Any]] = {}
    assessments = []
    for row in rows:
        answer, paper = row.answer, row.answer.paper
        entry = papers.setdefault(
            paper.pk, {"kind": paper.kind, "title": paper.title, "answers": {}}
        )
        entry["answers"][answer.question.number] = {
            "question": answer.question.number,
            "answer": answer.answer,
            **(
                {"raw_answer": answer.raw_answer, "justification": answer.justification}
                if level == ALL
                else {}
            ),
        }
        assessments.append(
            {
                "paper_kind": paper.kind,
                "question": answer.question.number,
                "answer": answer.answer,
                "status": row.status,
                "correct": row.correct,
                # Feedback (the judge's and each vote's) quotes the justification.
                "feedback": row.feedback if level == ALL or not row.feedback else INPUTS_WITHHELD,
                "votes": row.votes
                if level == ALL
                else [
                    {
                        **v,
                        **{
                            k: INPUTS_WITHHELD
                            for k in ("feedback", "explanation", "error")
                            if v.get(k)
                        },
                    }
                    for v in (row.votes or [])
                ],
            }
        )
    score = ChecklistScore.objects.filter(run=run).first()
    stored: dict[str, Any] = {"scores": None, "ci": None}
    if score is not None:
        stored = {
            "scores": {k: getattr(score, k) for k in ("c_g", "c_a", "c_t", "r", "s")},
            "ci": score.ci,
        }
    return {
        bundles.INPUTS: {
            "papers": [
                {**p, "answers": [p["answers"][n] for n in sorted(p["answers"])]}
                for p in papers.values()
            ]
        },
        bundles.VERDICTS: {"assessments": assessments},
        bundles.METRICS: stored,
    }
