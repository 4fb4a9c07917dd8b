"""Evaluating a scanner: creating audit runs and the processor that the queue task calls.

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
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from benchmarks_app.models import (
    AuditRepoResult,
    AuditTruthResult,
    Benchmark,
    EvaluationRun,
    MatchOutcome,
    Repo,
    ScanFinding,
    Scanner,
    ScanResult,
    TruthFinding,
)
from benchmarks_app.models.audit import AuditRunScan
from benchmarks_app.selectors.audit import AuditSubmissionQuota, audit_submission_quota
from benchmarks_app.services.audit.importing import ImportReport, import_scan_file
from benchmarks_app.services.judging import DbJudgeCache, LedgerRecorder, ledger_recorder
from benchmarks_app.services.runs import run_advance, run_create, run_finish, run_set_total
from benchmarks_app.services.uploads import upload_too_large
from scoring.audit.judges import ReplayAuditJudge, make_judge, parse_judge_spec
from scoring.audit.matching import AuditJudge, RepoMatch, match_repo
from scoring.audit.metrics import repo_metrics
from scoring.audit.parsing import ParseError, ScanFile, ScanRecord, loads, parse_scan
from scoring.audit.types import JUDGE_FAILED, MATCH, PARTIAL, ScanItem, TruthItem, TruthOutcome
from scoring.judges.llm import LLMConfig


class AuditRunError(ValueError):
    """A run that cannot be created as asked; the message says which argument and why."""


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


@transaction.atomic
def audit_run_create(
    *,
    scanner: Scanner,
    repos: Sequence[Repo] | None = None,
    judge: str | None = None,
    model: str | None = None,
    iterations: int | None = None,
    batch_size: int | None = None,
    json_mode: bool | None = None,
    created_by: Any = None,
    enqueue: bool = True,
) -> EvaluationRun:
    """Create (and enqueue) a run scoring ``scanner`` on ``repos`` (default: all it covers)."""
    try:
        spec = parse_judge_spec(judge or _setting("JUDGE_DEFAULT", "offline"))
    except ValueError as exc:
        raise AuditRunError(str(exc)) from None
    if spec.kind == "replay" and not Path(spec.argument).is_dir():
        raise AuditRunError(f"judge: replay folder {spec.argument!r} does not exist")
    if spec.kind == "openai" and not (
        _setting("OPENAI_API_KEY", "") or _setting("OPENAI_BASE_URL", None)
    ):
        raise AuditRunError("judge: openai needs OPENAI_API_KEY (or OPENAI_BASE_URL) to be set")
    for name, value in (("iterations", iterations), ("batch_size", batch_size)):
        if value is not None and value < 1:
            raise AuditRunError(f"{name}: must be at least 1, got {value}")
    current = {r.repo_id: r for r in ScanResult.objects.current().filter(scanner=scanner)}
    covered = set(current)
    # A replay judge can only answer for the repos its folder has recorded results for.
    replayable = ReplayAuditJudge.recorded_repos(spec.argument) if spec.kind == "replay" else None
    if repos is None:
        candidates = Repo.objects.filter(pk__in=covered).order_by("project_id")
        chosen = [r for r in candidates if replayable is None or r.project_id in replayable]
        if not chosen:
            where = (
                f" that {spec.argument!r} has recorded results for"
                if replayable is not None
                else ""
            )
            raise AuditRunError(
                f"scanner: {scanner.name!r} has no imported results{where} to evaluate"
            )
    else:
        chosen = list(repos)
        missing = [r.project_id for r in chosen if r.pk not in covered]
        if missing:
            raise AuditRunError(
                f"repo: scanner {scanner.name!r} has no results for {', '.join(missing)}"
            )
        unrecorded = [
            r.project_id
            for r in chosen
            if replayable is not None and r.project_id not in replayable
        ]
        if unrecorded:
            raise AuditRunError(
                f"repo: replay folder {spec.argument!r} has no recorded results for "
                f"{', '.join(unrecorded)}"
            )
        if not chosen:
            raise AuditRunError("repo: no repo selected")
    config: dict[str, Any] = {
        "iterations": iterations or _setting("JUDGE_ITERATIONS", 3),
        "batch_size": batch_size or _setting("JUDGE_BATCH_SIZE", 10),
    }
    if spec.kind == "openai":
        allowed = list(_setting("JUDGE_MODELS", []) or [])
        config["model"] = model or _setting("JUDGE_MODEL", "o4-mini")
        # The operator decides which (paid) models runs may use.
        if allowed and config["model"] not in allowed:
            raise AuditRunError(
                f"model: {config['model']!r} is not one of the configured JUDGE_MODELS "
                f"({', '.join(allowed)})"
            )
        config["json_mode"] = bool(
            _setting("JUDGE_JSON_MODE", False) if json_mode is None else json_mode
        )
    run = run_create(
        benchmark=Benchmark.AUDIT,
        scanner=scanner,
        repos=chosen,
        judge=spec.label,
        judge_config=config,
        created_by=created_by,
        enqueue=enqueue,
    )
    # The task is sent once this transaction commits, so it always finds the versions.
    AuditRunScan.objects.bulk_create(
        AuditRunScan(run=run, repo=repo, scan_result=current[repo.pk]) for repo in chosen
    )
    return run


# Participants pick among these; a replay judge reads a folder on the server, so replay runs
# stay with maintainers (``manage.py evaluate_audit``, the admin).
SUBMIT_JUDGES = ("offline", "openai")
SCANNER_NAME_MAX = 100
# The name becomes a URL segment (/audit/scanners/<name>/) and a file name in downloads.
_SCANNER_NAME = re.compile(r"\w[\w .+@()-]*")


def _submit_scanner_name(*, user: Any, scanner_name: str) -> str:
    """The cleaned scanner name, after checking that ``user`` may write its results.

    A scanner belongs to whoever first submitted it; one without an owner was imported by
    the maintainers (the reference scanners). Only its owner, or staff, may replace a
    scanner's results: anybody else would rewrite someone else's leaderboard entry.
    """
    name = (scanner_name or "").strip()
    if not name:
        raise AuditRunError("scanner: a name is required")
    scanner = Scanner.objects.filter(name=name).first()
    if scanner is None:
        if len(name) > SCANNER_NAME_MAX:
            raise AuditRunError(f"scanner: at most {SCANNER_NAME_MAX} characters, got {len(name)}")
        if not _SCANNER_NAME.fullmatch(name):
            raise AuditRunError(
                f"scanner: {name!r} may only hold letters, digits, spaces and . _ - + @ ( ),"
                " starting with a letter or digit"
            )
        return name
    if getattr(user, "is_staff", False):
        return name
    if scanner.owner_id is None:
        raise PermissionError(
            f"scanner: {name!r} is maintained by the site's curators; "
            "submit under a name of your own"
        )
    if scanner.owner_id != getattr(user, "pk", None):
        raise PermissionError(
            f"scanner: {name!r} belongs to another user; submit under a name of your own"
        )
    return name


def participant_openai_allowed(user: Any) -> bool:
    """Whether ``user`` may have submissions judged by the paid ``openai`` judge.

    Staff always may; participants only where the site opts in with
    ``AUDIT_PARTICIPANT_OPENAI`` (every submission costs about truth x scan / batch x 2-3
    calls, and the daily quota alone would still let every account spend that each day).
    """
    if getattr(user, "is_staff", False):
        return True
    return bool(_setting("AUDIT_PARTICIPANT_OPENAI", False))


def _submit_judge(*, user: Any, judge: str | None) -> str:
    """The judge of a submitted run, after checking that ``user`` may ask for it.

    Without a choice the site's default is used, unless that default is one the user may not
    ask for (``openai`` where participants do not get it): then ``offline``.
    """
    if judge is None:
        default = str(_setting("JUDGE_DEFAULT", "offline"))
        try:
            kind = parse_judge_spec(default).kind
        except ValueError:
            kind = ""
        if kind in SUBMIT_JUDGES and (kind != "openai" or participant_openai_allowed(user)):
            return default
        return "offline"
    try:
        kind = parse_judge_spec(judge).kind
    except ValueError:
        kind = ""
    if kind not in SUBMIT_JUDGES:
        raise AuditRunError(f"judge: {judge!r} is not one of {', '.join(SUBMIT_JUDGES)}")
    if kind == "openai":
        # The same words as audit_run_create when the site has no OpenAI access at all.
        if not (_setting("OPENAI_API_KEY", "") or _setting("OPENAI_BASE_URL", None)):
            raise AuditRunError("judge: openai needs OPENAI_API_KEY (or OPENAI_BASE_URL) to be set")
        if not participant_openai_allowed(user):
            raise AuditRunError(
                "judge: the openai judge is reserved for the site's staff here (every run "
                "costs paid API calls); choose offline"
            )
    return judge


class AuditQuotaExceeded(AuditRunError):
    """The user's daily number of audit submissions is used up; ``quota`` says until when."""

    def __init__(self, message: str, *, quota: AuditSubmissionQuota) -> None:
        super().__init__(message)
        self.quota = quota


def _check_daily_quota(user: Any) -> None:
    """Refuse a participant's submission past ``AUDIT_DAILY_SUBMISSIONS`` a (UTC) day.

    Must run inside the submission's transaction: the lock on the user's row serializes one
    user's concurrent submissions, so that the count and the new run happen with no other
    submission of theirs in between (on SQLite the IMMEDIATE transaction already does).
    """
    if not getattr(user, "is_authenticated", False):
        raise PermissionError("sign in to submit results")
    if user.is_staff:
        return
    get_user_model().objects.select_for_update().get(pk=user.pk)
    quota = audit_submission_quota(user=user)
    if quota.remaining is not None and quota.remaining <= 0:
        raise AuditQuotaExceeded(f"submissions: {quota.exceeded_message}", quota=quota)


def _submit_findings(
    data: Any, *, where: str, repo: Repo
) -> tuple[list[ScanRecord], dict[str, Any]]:
    try:
        findings, metadata = parse_scan(data)
    except ParseError as exc:
        message = str(exc)
        # A body's problem with its "findings" key is already named by the field.
        if where == "findings":
            message = message.removeprefix("findings: ")
        raise AuditRunError(f"{where}: {message}") from None
    # The file's own repo id, where it has one, catches the easy mistake of uploading the
    # results of a neighbouring repo (the reference data has one near-identical file each).
    project = metadata.get("project")
    if isinstance(project, str) and project.strip() and project.strip() != repo.project_id:
        raise AuditRunError(
            f"{where}: the results are for project {project.strip()!r}, "
            f"not for the chosen repo {repo.project_id!r}"
        )
    return findings, metadata


def _store_and_queue(
    *,
    user: Any,
    name: str,
    repo: Repo,
    findings: list[ScanRecord],
    metadata: dict[str, Any],
    source_name: str,
    judge: str,
) -> EvaluationRun:
    _check_daily_quota(user)
    report = ImportReport()
    result = import_scan_file(
        ScanFile(name, repo.project_id, source_name[:300], findings, metadata),
        repo,
        report,
        owner=user,
    )
    scanner = result.scanner
    if scanner.owner_id != getattr(user, "pk", None) and not getattr(user, "is_staff", False):
        # Someone else created the name between the check and the insert: undo it all.
        raise PermissionError(
            f"scanner: {name!r} belongs to another user; submit under a name of your own"
        )
    return audit_run_create(scanner=scanner, repos=[repo], judge=judge, created_by=user)


@transaction.atomic
def audit_scan_submit(
    *,
    user: Any,
    scanner_name: str,
    repo: Repo,
    data: Any,
    source_name: str = "api upload",
    judge: str | None = None,
) -> EvaluationRun:
    """Store a scanner's results for one repo (any accepted shape) and queue their evaluation.

    ``data`` is the decoded JSON. Raises :class:`AuditRunError` (``"field: problem"``) for bad
    input and :class:`PermissionError` when the scanner is not the user's to write; either
    way nothing is stored.
    """
    name = _submit_scanner_name(user=user, scanner_name=scanner_name)
    judge = _submit_judge(user=user, judge=judge)
    findings, metadata = _submit_findings(data, where="findings", repo=repo)
    return _store_and_queue(
        user=user,
        name=name,
        repo=repo,
        findings=findings,
        metadata=metadata,
        source_name=source_name,
        judge=judge,
    )


@transaction.atomic
def audit_scan_upload(
    *,
    user: Any,
    scanner_name: str,
    repo: Repo,
    upload: UploadedFile,
    judge: str | None = None,
) -> EvaluationRun:
    """:func:`audit_scan_submit` for an uploaded JSON file (the web form, API multipart).

    The size is checked before reading; every problem with the file is reported under the
    ``file`` field and names the file.
    """
    name = _submit_scanner_name(user=user, scanner_name=scanner_name)
    judge = _submit_judge(user=user, judge=judge)
    file_name = upload.name or "upload"
    too_large = upload_too_large(upload.size, file_name)
    if too_large:
        raise AuditRunError(f"file: {too_large}")
    try:
        data = loads(upload.read())
    except ParseError as exc:
        raise AuditRunError(f"file: {file_name}: {exc}") from None
    findings, metadata = _submit_findings(data, where=f"file: {file_name}", repo=repo)
    return _store_and_queue(
        user=user,
        name=name,
        repo=repo,
        findings=findings,
        metadata=metadata,
        source_name=file_name,
        judge=judge,
    )


# --- processing -----------------------------------------------------------------------------


def _llm_config(run: EvaluationRun) -> LLMConfig:
    cfg = run.judge_config or {}
    return LLMConfig(
        model=str(cfg.get("model") or _setting("JUDGE_MODEL", "o4-mini")),
        api_key=_setting("OPENAI_API_KEY", ""),
        base_url=_setting("OPENAI_BASE_URL", None),
        timeout_s=float(_setting("JUDGE_TIMEOUT_S", 120.0)),
        max_retries=int(_setting("JUDGE_MAX_RETRIES", 4)),
        json_mode=bool(cfg.get("json_mode", _setting("JUDGE_JSON_MODE", False))),
        backoff_base_s=float(_setting("JUDGE_BACKOFF_BASE_S", 1.0)),
        backoff_max_s=float(_setting("JUDGE_BACKOFF_MAX_S", 30.0)),
    )


def make_run_judge(run: EvaluationRun, *, recorder: LedgerRecorder) -> AuditJudge:
    return make_judge(
        parse_judge_spec(run.judge),
        llm=_llm_config(run),
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
    error = ""
    if failed:
        waiting = max(0, total - len(judged) - failed)
        error = f"{failed} item(s) could not be judged"
        if waiting:
            error += (
                f"; {waiting} later truth finding(s) of the same repo(s) wait for them, "
                "since truth findings are matched in order"
            )
        error += "; resume the run to judge them."
    run_finish(run=run, failed_items=failed, error=error)
