"""Processing an audit run: the processor that the queue task calls.

The matching itself is :func:`scoring.audit.matching.match_repo` (async). The processor drives
it with ``async_to_sync`` so that every ORM call made from inside the loop (through
``sync_to_async(thread_sensitive=True)``: results, progress, cache, ledger) runs on the
processor's own thread and connection. Repos are matched concurrently; judge calls are capped
by ``JUDGE_CONCURRENCY``.

Each truth finding's result is written as soon as it is known, so a crashed or failed run
resumes where it stopped: truth findings with a final result are kept, judge-failed ones are
judged again (new rows; the old ones stay as history), and repos with a complete result are
skipped. Cached verdicts make the redone comparisons free. Within a repo, a judge failure
stops the matching (see :mod:`scoring.audit.matching`): nothing is stored for the later truth
findings, and the resumed run judges them in truth order, so its result is the one an
uninterrupted run would have had.

A run judges the scan result versions that were current when it was created
(:class:`AuditRunScan`); results imported later become new versions and never change what a
run judged, also when it resumes.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence

from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction

from benchmarks_app.models import (
    AuditRepoResult,
    AuditTruthResult,
    EvaluationRun,
    MatchOutcome,
    Repo,
    ScanFinding,
    ScanResult,
    TruthFinding,
)
from benchmarks_app.models.audit import AuditRunScan
from benchmarks_app.services.audit.runs import AuditRunError, _setting
from benchmarks_app.services.judging import (
    DbJudgeCache,
    LedgerRecorder,
    ledger_recorder,
    llm_config_for_run,
    llm_config_probe,
)
from benchmarks_app.services.runs import run_advance, run_finish, run_set_total
from scoring.audit.judges import make_judge, parse_judge_spec
from scoring.audit.judges.llm import OpenAIAuditJudge
from scoring.audit.matching import AuditJudge, RepoMatch, match_repo
from scoring.audit.metrics import repo_metrics
from scoring.audit.types import JUDGE_FAILED, MATCH, PARTIAL, ScanItem, TruthItem, TruthOutcome


def make_run_judge(run: EvaluationRun, *, recorder: LedgerRecorder) -> AuditJudge:
    return make_judge(
        parse_judge_spec(run.judge),
        llm=llm_config_for_run(run),
        cache=DbJudgeCache(),
        record=recorder,
        concurrency=int(_setting("JUDGE_CONCURRENCY", 4)),
        http_client=_setting("JUDGE_HTTP_CLIENT", None),
    )


def _scanner_id(run: EvaluationRun) -> int:
    if run.scanner_id is None:
        raise AuditRunError(f"run #{run.pk} has no scanner")
    return int(run.scanner_id)


def truth_item(t: TruthFinding) -> TruthItem:
    return TruthItem.of(t, key=t.pk)


def scan_item(f: ScanFinding) -> ScanItem:
    return ScanItem.of(f)


class _RepoJob:
    def __init__(
        self,
        repo: Repo,
        scan_result: ScanResult | None,
        truths: list[TruthFinding],
        findings: list[ScanFinding],
        done: list[TruthOutcome],
    ) -> None:
        self.repo = repo
        self.scan_result = scan_result
        self.truths = truths
        self.findings = findings
        self.findings_by_index = {f.index: f for f in findings}
        self.done = done


def _save_outcome(
    run: EvaluationRun, job: _RepoJob, outcome: TruthOutcome, recorder: LedgerRecorder
) -> None:
    scan = job.findings_by_index.get(outcome.scan_index) if outcome.scan_index is not None else None
    with transaction.atomic():
        AuditTruthResult.objects.create(
            run=run,
            repo=job.repo,
            truth_finding_id=outcome.truth_key,
            outcome=outcome.outcome,
            scan_finding=scan,
            explanation=outcome.explanation,
            votes=[v.as_dict() for v in outcome.votes],
            notes="\n".join(outcome.notes),
        )
        if not outcome.failed:
            run_advance(run=run)
    recorder.flush()


def _save_repo_result(run: EvaluationRun, job: _RepoJob, match: RepoMatch) -> None:
    metrics = repo_metrics(
        repo=job.repo.project_id,
        truth_severities=[t.severity for t in job.truths],
        scan_severities=[f.severity for f in job.findings],
        tp=match.count(MATCH),
        partial=match.count(PARTIAL),
        judge_failed=match.count(JUDGE_FAILED),
        not_judged=len(match.pending),
    )
    metrics["dropped_partials"] = [
        o.truth_key
        for o in match.outcomes
        if o.outcome == PARTIAL and match.final[o.truth_key] != PARTIAL
    ]
    AuditRepoResult.objects.create(
        run=run,
        repo=job.repo,
        scanner_id=_scanner_id(run),
        scan_result=job.scan_result,
        is_complete=match.is_complete,
        judge=run.judge[:300],
        metrics=metrics,
        false_positive_indices=match.false_positives,
        notes=match.notes,
    )


async def _run_jobs(
    run: EvaluationRun,
    judge: AuditJudge,
    jobs: list[_RepoJob],
    recorder: LedgerRecorder,
    *,
    batch_size: int,
    iterations: int,
) -> None:
    save_outcome = sync_to_async(_save_outcome, thread_sensitive=True)
    save_repo = sync_to_async(_save_repo_result, thread_sensitive=True)

    async def one(job: _RepoJob) -> None:
        async def on_outcome(outcome: TruthOutcome) -> None:
            await save_outcome(run, job, outcome, recorder)

        match = await match_repo(
            judge,
            [truth_item(t) for t in job.truths],
            [scan_item(f) for f in job.findings],
            batch_size=batch_size,
            iterations=iterations,
            done=job.done,
            on_outcome=on_outcome,
        )
        await save_repo(run, job, match)

    try:
        if isinstance(judge, OpenAIAuditJudge):
            # In the run's loop, before any verdict: which format and options the server takes.
            await llm_config_probe(run, client=judge.client, config=judge.config)
        await asyncio.gather(*(one(job) for job in jobs))
    finally:
        close = getattr(judge, "aclose", None)
        if close is not None:
            await close()


def run_scan_results(run: EvaluationRun, repos: Sequence[Repo]) -> dict[int, ScanResult]:
    """The version each repo of ``run`` judges, by repo id.

    Fixed when the run was created; a run created without them (by ``run_create`` alone)
    gets the current versions now, once, so that a later resume judges the same findings.
    """
    pinned = {
        p.repo_id: p.scan_result
        for p in AuditRunScan.objects.filter(run=run).select_related("scan_result")
    }
    missing = [r.pk for r in repos if r.pk not in pinned]
    if missing:
        new = [
            AuditRunScan(run=run, repo_id=r.repo_id, scan_result=r)
            for r in ScanResult.objects.current().filter(
                scanner_id=_scanner_id(run), repo_id__in=missing
            )
        ]
        AuditRunScan.objects.bulk_create(new, ignore_conflicts=True)
        pinned.update(
            (p.repo_id, p.scan_result)
            for p in AuditRunScan.objects.filter(run=run, repo_id__in=missing).select_related(
                "scan_result"
            )
        )
    return pinned


def _jobs(run: EvaluationRun) -> list[_RepoJob]:
    repos = list(run.repos.order_by("project_id"))
    complete = set(
        AuditRepoResult.objects.filter(run=run, is_complete=True).values_list("repo_id", flat=True)
    )
    results = run_scan_results(run, repos)
    findings: dict[int, list[ScanFinding]] = defaultdict(list)
    for f in ScanFinding.objects.filter(scan_result__in=results.values()).order_by("index"):
        findings[f.scan_result_id].append(f)
    truths: dict[int, list[TruthFinding]] = defaultdict(list)
    for t in TruthFinding.objects.filter(repo__in=repos).order_by("order", "id"):
        truths[t.repo_id].append(t)
    done: dict[int, list[TruthOutcome]] = defaultdict(list)
    rows = (
        AuditTruthResult.objects.filter(run=run)
        .exclude(outcome=MatchOutcome.JUDGE_FAILED)
        .select_related("scan_finding", "truth_finding")
    )
    for row in rows:
        done[row.repo_id].append(
            TruthOutcome(
                truth_key=row.truth_finding_id,
                outcome=row.outcome,
                finding_id=row.truth_finding.finding_id,
                scan_index=row.scan_finding.index if row.scan_finding else None,
                explanation=row.explanation,
            )
        )
    jobs = []
    for repo in repos:
        if repo.pk in complete:
            continue
        result = results.get(repo.pk)
        jobs.append(
            _RepoJob(
                repo,
                result,
                truths[repo.pk],
                findings[result.pk] if result is not None else [],
                done[repo.pk],
            )
        )
    return jobs


def audit_process_run(run: EvaluationRun) -> None:
    """The processor for :func:`benchmarks_app.services.runs.process_run`."""
    cfg = run.judge_config or {}
    jobs = _jobs(run)
    total = TruthFinding.objects.filter(repo__in=run.repos.all()).count()
    already = AuditTruthResult.objects.filter(run=run).exclude(outcome=MatchOutcome.JUDGE_FAILED)
    run_set_total(run=run, total=total, done=already.count())
    recorder = ledger_recorder(run)
    judge = make_run_judge(run, recorder=recorder)
    register = getattr(judge, "register", None)
    if register is not None:
        for job in jobs:
            register(
                job.repo.project_id,
                [truth_item(t) for t in job.truths],
                [scan_item(f) for f in job.findings],
            )
    try:
        async_to_sync(_run_jobs)(
            run,
            judge,
            jobs,
            recorder,
            batch_size=int(cfg.get("batch_size") or 10),
            iterations=int(cfg.get("iterations") or 3),
        )
    finally:
        recorder.flush()
    judged = set(
        AuditTruthResult.objects.filter(run=run)
        .exclude(outcome=MatchOutcome.JUDGE_FAILED)
        .values_list("truth_finding_id", flat=True)
    )
    failed = (
        AuditTruthResult.objects.filter(run=run, outcome=MatchOutcome.JUDGE_FAILED)
        .exclude(truth_finding_id__in=judged)
        .values("truth_finding_id")
        .distinct()
        .count()
    )
    # run_finish says why they failed and what to do (resume, or which setting to change).
    waiting = max(0, total - len(judged) - failed) if failed else 0
    note = (
        f"{waiting} later truth finding(s) of the same repo(s) wait for them, since truth "
        "findings are matched in order."
        if waiting
        else ""
    )
    run_finish(run=run, failed_items=failed, failure_note=note)
