"""Processing an audit run: one queue task per repo (a run piece; see services.runs).

The matching itself is :func:`scoring.audit.matching.match_repo` (async). A piece drives it
with ``async_to_sync`` so that every ORM call made from inside the loop (through
``sync_to_async(thread_sensitive=True)``: results, progress, cache, ledger) runs on the
processor's own thread and connection. Judge calls are capped by ``JUDGE_CONCURRENCY``. Every
result write is fenced by the piece's lease (:func:`~benchmarks_app.services.leases.lease_fence`).

Each truth finding's result is written as soon as it is known, so a crashed or failed piece
resumes where it stopped: truth findings with a final result are kept, judge-failed ones are
judged again (new rows; the old ones stay as history), and repos with a complete result are
skipped. Cached verdicts make the redone comparisons free. Within a repo, a judge failure
stops the matching (see :mod:`scoring.audit.matching`): nothing is stored for the later truth
findings, and the resumed run judges them in truth order, so its result is the one an
uninterrupted run would have had. The last repo to end ends the run (:func:`audit_run_finish`).

A run judges the scan result versions that were current when it was created
(:class:`AuditRunScan`), and the truth of its dataset release (:func:`run_truth_findings`);
results imported later become new versions and never change what a run judged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.db.models import Count, QuerySet

from benchmarks_app.db_pool import orm_trip
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
from benchmarks_app.services.judge_records import judge_record_concurrency
from benchmarks_app.services.judging import (
    DbJudgeCache,
    LedgerRecorder,
    ledger_recorder,
    llm_config_for_run,
    llm_config_probe,
)
from benchmarks_app.services.judging_rounds import sqlite_writer_turn
from benchmarks_app.services.leases import current_lease, lease_fence, until_cancelled
from benchmarks_app.services.run_state import run_advance, run_finish, run_set_total
from scoring.audit.judges import make_judge, parse_judge_spec
from scoring.audit.judges.llm import OpenAIAuditJudge
from scoring.audit.matching import AuditJudge, RepoMatch
from scoring.audit.metrics import repo_metrics
from scoring.audit.schedule import Prefilter, match_repo_concurrent, prefilter_ranking
from scoring.audit.types import JUDGE_FAILED, MATCH, PARTIAL, ScanItem, TruthItem, TruthOutcome
from scoring.judges.consensus import gather_all


def make_run_judge(run: EvaluationRun, *, recorder: LedgerRecorder) -> AuditJudge:
    return make_judge(
        parse_judge_spec(run.judge),
        llm=llm_config_for_run(run),
        cache=DbJudgeCache(holder=_lease_name()),
        record=recorder,
        concurrency=judge_record_concurrency(run.judge_record),
        http_client=_setting("JUDGE_HTTP_CLIENT", None),
        rpm=int(_setting("JUDGE_RPM", 0) or 0),
        tpm=int(_setting("JUDGE_TPM", 0) or 0),
    )


def _lease_name() -> str:
    """The lease making the calls, on its in-flight rows (released when it is taken over)."""
    held = current_lease()
    return f"{held.piece_id}:{held.attempt}" if held is not None else ""


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
    # Pieces of a run write side by side: on SQLite they take turns on the judge's writer lock
    # rather than SQLite's sleeping retries.
    with sqlite_writer_turn(), transaction.atomic():
        lease_fence()
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
    with transaction.atomic():
        lease_fence()
        _create_repo_result(run, job, match)


def _create_repo_result(run: EvaluationRun, job: _RepoJob, match: RepoMatch) -> None:
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
    prefilter: int | None = None,
) -> None:
    save_outcome = orm_trip(_save_outcome)
    save_repo = orm_trip(_save_repo_result)

    async def one(job: _RepoJob) -> None:
        async def on_outcome(outcome: TruthOutcome) -> None:
            await save_outcome(run, job, outcome, recorder)

        truths = [truth_item(t) for t in job.truths]
        scans = [scan_item(f) for f in job.findings]
        # Batches are judged as soon as their composition is certain: the result, votes and
        # questions are the sequential algorithm's (scoring.audit.schedule).
        match = await match_repo_concurrent(
            judge,
            truths,
            scans,
            batch_size=batch_size,
            iterations=iterations,
            done=job.done,
            on_outcome=on_outcome,
            order=_prefilter(prefilter, truths, scans),
        )
        await save_repo(run, job, match)

    try:
        if isinstance(judge, OpenAIAuditJudge):
            # In the run's loop, before any verdict: which format and options the server takes.
            await llm_config_probe(
                run, client=judge.client, config=judge.config, limiter=judge.limiter
            )
        # gather_all cancels the other repos' calls when one raises (a judge outage).
        await until_cancelled(gather_all(*(one(job) for job in jobs)), run_id=run.pk)
    finally:
        close = getattr(judge, "aclose", None)
        if close is not None:
            await close()


def _prefilter(k: int | None, truths: list[TruthItem], scans: list[ScanItem]) -> Prefilter | None:
    """``--prefilter K``: the K scan findings most similar to each truth finding first."""
    if not k:
        return None
    from scoring.audit.judges.offline import similarity_matrix

    return Prefilter(int(k), prefilter_ranking(truths, scans, similarity_matrix(truths, scans)))


@transaction.atomic
def audit_run_set_prefilter(*, run: EvaluationRun, k: int | None) -> EvaluationRun:
    """Record ``--prefilter K`` on a run before it is processed (None or 0: off)."""
    if k is not None and k < 0:
        raise AuditRunError(f"prefilter: must be at least 1 (or 0 for off), got {k}")
    run = EvaluationRun.objects.select_for_update().get(pk=run.pk)
    config = dict(run.judge_config or {})
    if k:
        config["prefilter"] = int(k)
    else:
        config.pop("prefilter", None)
    run.judge_config = config
    run.save(update_fields=["judge_config", "updated_at"])
    return run


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


def run_truth_findings(run: EvaluationRun) -> QuerySet[TruthFinding]:
    """The truth a run judges: its release's frozen findings, or (older runs) the current ones."""
    if run.release_id is not None:
        return TruthFinding.objects.filter(releases=run.release_id, repo__in=run.repos.all())
    return TruthFinding.objects.current().filter(repo__in=run.repos.all())


def audit_run_plan(run: EvaluationRun) -> list[str]:
    """One piece per repo still without a complete result (project ids, in order)."""
    complete = AuditRepoResult.objects.filter(run=run, is_complete=True).values("repo_id")
    return list(
        run.repos.exclude(pk__in=complete)
        .order_by("project_id")
        .values_list("project_id", flat=True)
    )


def audit_piece_weights(run: EvaluationRun) -> dict[str, int]:
    """Each repo's judging, estimated as its truth findings x the scan findings it judges (the
    questions its matching may ask before batching and consensus narrow them). The bundled
    data's bakerfi (32 x 70) is then the heaviest by far (43% of the run's calls): the chain
    every other repo waits for."""
    truths = (
        run_truth_findings(run)
        .values("repo__project_id")
        .annotate(n=Count("pk", distinct=True))
        .values_list("repo__project_id", "n")
    )
    scans = dict(
        AuditRunScan.objects.filter(run=run)
        .values("repo__project_id")
        .annotate(n=Count("scan_result__findings"))
        .values_list("repo__project_id", "n")
    )
    return {key: n * max(1, scans.get(key, 1)) for key, n in truths}


def _jobs(run: EvaluationRun, *, only: str | None = None) -> list[_RepoJob]:
    repos = list(run.repos.order_by("project_id"))
    if only is not None:
        repos = [r for r in repos if r.project_id == only]
    complete = set(
        AuditRepoResult.objects.filter(run=run, is_complete=True).values_list("repo_id", flat=True)
    )
    results = run_scan_results(run, repos)
    findings: dict[int, list[ScanFinding]] = defaultdict(list)
    for f in ScanFinding.objects.filter(scan_result__in=results.values()).order_by("index"):
        findings[f.scan_result_id].append(f)
    truths: dict[int, list[TruthFinding]] = defaultdict(list)
    for t in run_truth_findings(run).filter(repo__in=repos).order_by("order", "id"):
        truths[t.repo_id].append(t)
    done: dict[int, list[TruthOutcome]] = defaultdict(list)
    rows = (
        AuditTruthResult.objects.filter(run=run, repo__in=repos)
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


def _progress_sync(run: EvaluationRun) -> int:
    """Set the run's total and done counts from what is stored (pieces run concurrently)."""
    total = run_truth_findings(run).count()
    done = (
        AuditTruthResult.objects.filter(run=run)
        .exclude(outcome=MatchOutcome.JUDGE_FAILED)
        .values("truth_finding_id")
        .distinct()
        .count()
    )
    run_set_total(run=run, total=total, done=done)
    return total


def _ledger(run: EvaluationRun) -> LedgerRecorder:
    held = current_lease()
    if held is None:
        return ledger_recorder(run)
    return ledger_recorder(run, holder=f"{held.piece_id}:{held.attempt}")


def audit_process_piece(run: EvaluationRun, key: str) -> None:
    """Match one repo of the run (a queue task of its own; see services.runs)."""
    cfg = run.judge_config or {}
    jobs = _jobs(run, only=key)
    _progress_sync(run)
    if not jobs:
        return
    recorder = _ledger(run)
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
            prefilter=int(cfg.get("prefilter") or 0) or None,
        )
    finally:
        recorder.flush()


def audit_run_finish(run: EvaluationRun) -> None:
    """End the run once its last repo has ended: failed items make it a failed run."""
    total = _progress_sync(run)
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
    refresh = _board_refresh()
    if refresh is not None:
        refresh(run=run)
        # Paired marks: a task once this commits (services.paired), not part of the run end.
        from benchmarks_app.services.paired import paired_refresh_for_run

        paired_refresh_for_run(run=run)


def _board_refresh() -> Any:
    try:
        from benchmarks_app.services.audit import boards
    except ImportError:
        return None
    return getattr(boards, "audit_board_refresh_for_run", None)


def audit_process_run(run: EvaluationRun) -> None:
    """The whole run in this process, repo after repo (scripts and tests)."""
    for key in audit_run_plan(run):
        audit_process_piece(run, key)
    audit_run_finish(run)
