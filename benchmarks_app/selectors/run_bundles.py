"""A run's bundle: everything needed to re-score it offline, in one archive (scoring.bundles).

What goes in, per benchmark: the inputs the judge saw (scan findings; responses; papers'
answers), the judge record (its API key's variable name, never a key), the judge-call ledger
with prompts and raw answers, every verdict with its votes, and the stored metrics.

Hidden truth never leaves: the truth findings of a repo that is not public go in with their
position, id and severity only (what the metrics need), and the verdict explanations of such a
repo, the prompts that quote its truth and the raw answers to them are left out, whoever
downloads. Which runs a user may download is the caller's (``visible_runs``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Max

from benchmarks_app.models import (
    AuditRepoResult,
    AuditRunScan,
    AuditTruthResult,
    Benchmark,
    ChecklistAssessment,
    ChecklistScore,
    EvaluationRun,
    JudgeCall,
    JudgePrompt,
    ProbeCaseResult,
    ProbeRunReport,
    ScanFinding,
    TruthFinding,
)
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.run_metrics import run_metrics
from scoring import bundles

WITHHELD = "[withheld: hidden truth]"


class RunBundleError(ValueError):
    """A run that has no bundle (yet); the message says why."""


def run_bundle_name(run: EvaluationRun) -> str:
    return f"run-{run.pk}-{run.benchmark}.zip"


def _judge_record(run: EvaluationRun) -> dict[str, Any] | None:
    record = run.judge_record
    if record is None:
        return None
    # Field by field on purpose: a field added to the record later (a secret, say) is not
    # exported until someone decides it may be.
    return {
        "name": record.name,
        "kind": record.kind,
        "base_url": record.base_url,
        "model": record.model,
        "api_key_env": record.api_key_env,
        "max_answer_tokens": record.max_answer_tokens,
        "temperature": record.temperature,
        "concurrency": record.concurrency,
        "timeout_s": record.timeout_s,
    }


def _run_member(run: EvaluationRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "benchmark": run.benchmark,
        "target": run.target_label,
        "status": run.status,
        "is_complete": run.is_complete,
        "failed_items": run.failed_items,
        "judge": run.judge,
        "judge_config": {k: v for k, v in (run.judge_config or {}).items() if "key" not in k},
        "judge_record": _judge_record(run),
        "release": str(run.release) if run.release_id else None,
        "phase": str(run.phase) if run.phase_id else None,
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


# --- Audit ----------------------------------------------------------------------------------


def _run_truth(run: EvaluationRun) -> list[TruthFinding]:
    if run.release_id is not None:
        qs = TruthFinding.objects.filter(releases=run.release_id, repo__in=run.repos.all())
    else:
        qs = TruthFinding.objects.current().filter(repo__in=run.repos.all())
    return list(qs.order_by("order", "id"))


def _audit(run: EvaluationRun) -> tuple[dict[str, Any], bool, list[str], list[str]]:
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
                    {
                        "index": f.index,
                        "severity": f.severity,
                        "title": f.title,
                        "description": f.description,
                        "vulnerability_type": f.vulnerability_type,
                        "file": f.file,
                        "location": f.location,
                    }
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
        hidden = row.repo_id in hidden_repos
        # A hidden repo's vote explanations and errors may quote its truth (or an answer
        # that does): only the verdicts, indices and vote numbers travel.
        votes = [
            {**v, **{k: WITHHELD for k in ("explanation", "error") if hidden and v.get(k)}}
            for v in (row.votes or [])
        ]
        results.append(
            {
                "repo": project.get(row.repo_id, str(row.repo_id)),
                "truth_key": row.truth_finding_id,
                "outcome": row.outcome,
                "scan_index": row.scan_finding.index if row.scan_finding else None,
                "explanation": WITHHELD if hidden and row.explanation else row.explanation,
                "notes": WITHHELD if hidden and row.notes else row.notes,
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
    stored: dict[str, Any] = {
        "repos": {
            project.get(r.repo_id, str(r.repo_id)): {
                "metrics": r.metrics,
                "false_positive_indices": r.false_positive_indices,
                "is_complete": r.is_complete,
            }
            for r in AuditRepoResult.objects.filter(id__in=latest)
        },
        "overall": run_metrics(run=run),
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


def _probes(run: EvaluationRun) -> dict[str, Any]:
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
                "output": row.response.output,
                "human_label": row.response.human_label,
            }
        )
        verdicts.append(
            {
                "response_id": row.response_id,
                "probe_id": row.probe.probe_id,
                "passed": row.passed,
                "risk_score": row.risk_score,
                "weighted_risk": row.weighted_risk,
                "case": row.case,
            }
        )
    report = ProbeRunReport.objects.filter(run=run).first()
    stored: dict[str, Any] = {}
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


def _checklist(run: EvaluationRun) -> dict[str, Any]:
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
            "raw_answer": answer.raw_answer,
            "justification": answer.justification,
        }
        assessments.append(
            {
                "paper_kind": paper.kind,
                "question": answer.question.number,
                "answer": answer.answer,
                "status": row.status,
                "correct": row.correct,
                "feedback": row.feedback,
                "votes": row.votes,
            }
        )
    score = ChecklistScore.objects.filter(run=run).first()
    stored: dict[str, Any] = {}
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


# --- The ledger -----------------------------------------------------------------------------


def _ledger(
    run: EvaluationRun, *, withheld: bool, public: list[str], secret: list[str]
) -> dict[str, Any]:
    """The judge calls and the prompts they asked; with hidden truth in the run, a prompt (and
    the answers to it) only where it quotes public truth and no hidden truth."""
    calls = list(JudgeCall.objects.filter(run=run).order_by("created_at", "id"))
    keys = {c.prompt_key for c in calls if c.prompt_key}
    prompts: dict[str, dict[str, str]] = {}
    for p in JudgePrompt.objects.filter(key__in=keys):
        text = f"{p.system}\n{p.user}"
        shown = not withheld or (
            any(t in text for t in public) and not any(t in text for t in secret)
        )
        if shown:
            prompts[p.key] = {"system": p.system, "user": p.user}
    rows = []
    for c in calls:
        shown = not withheld or c.prompt_key in prompts
        rows.append(
            {
                "judge": c.judge,
                "model": c.model,
                "prompt_hash": c.prompt_hash,
                "prompt_key": c.prompt_key,
                "vote_number": c.vote_number,
                "attempt": c.attempt,
                "status": c.status,
                "latency_ms": c.latency_ms,
                "tokens_in": c.tokens_in,
                "tokens_out": c.tokens_out,
                "tokens_reasoning": c.tokens_reasoning,
                "request": c.request,
                "error": c.error if shown else (WITHHELD if c.error else ""),
                "raw_response": c.raw_response if shown else (WITHHELD if c.raw_response else ""),
                "created_at": c.created_at.isoformat(),
            }
        )
    return {bundles.CALLS: rows, bundles.PROMPTS: prompts}


def run_bundle(*, run: EvaluationRun) -> bytes:
    """The run's bundle (a zip; see :mod:`scoring.bundles`). Raises :class:`RunBundleError`
    for a run still being judged."""
    if run.status in ACTIVE_STATUSES:
        raise RunBundleError(f"run #{run.pk} is {run.status}: its bundle is made once it ends")
    withheld, public, secret = False, list[str](), list[str]()
    if run.benchmark == Benchmark.AUDIT:
        members, withheld, public, secret = _audit(run)
    elif run.benchmark == Benchmark.PROBES:
        members = _probes(run)
    else:
        members = _checklist(run)
    members[bundles.RUN] = _run_member(run)
    members.update(_ledger(run, withheld=withheld, public=public, secret=secret))
    return bundles.write_bundle(
        benchmark=str(run.benchmark), run_id=int(run.pk), members=members, truth_withheld=withheld
    )
