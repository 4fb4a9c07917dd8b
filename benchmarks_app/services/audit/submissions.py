"""Participants' submissions: a scanner's results for one repo, stored and queued for evaluation.

Before anything is stored, a submission is checked: whether the user may write under the
scanner's name, which judge they may ask for (the paid ``openai`` judge only where the site
allows it) and their daily quota. A refused submission stores nothing.

An upload without any finding for its repo is refused unless the participant declares that
the tool found nothing there (``declared_empty``): an empty file is far more often a failed
scan than a clean repo, and it would replace the scanner's results on the board. Findings with
neither title nor description are refused too, every one named, unless the participant
confirms them (``confirm_untitled``); every other bad finding is named as well.

Where the release has phases, a submission lands in the open one (or is refused with the
phases' dates), and that phase's limits, if it sets any, replace the site's daily limit.
Re-uploading exactly the findings already judged (same content hash, same judge, release and
phase, a run that did not fail) stores nothing, queues nothing and costs no quota: the
services raise :class:`AuditUnchanged` naming the run that already judged them.
"""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Q

from benchmarks_app.db_retry import retry_on_conflict
from benchmarks_app.models import EvaluationRun, JudgeRecord, Phase, Repo, Scanner
from benchmarks_app.models.audit import AuditDataset
from benchmarks_app.selectors.audit_submission_quota import (
    AuditSubmissionQuota,
    audit_submission_quota,
)
from benchmarks_app.selectors.visibility import visible_scanners
from benchmarks_app.services.audit.boards import audit_boards_refresh_for_scanners
from benchmarks_app.services.audit.importing import (
    ImportReport,
    import_scan_file,
)
from benchmarks_app.services.audit.resubmissions import (
    AuditUnchanged,
    submission_phase,
    unchanged_run,
)
from benchmarks_app.services.audit.runs import (
    AuditRunError,
    _setting,
    audit_run_create,
    entry_metadata,
    run_release_for,
)
from benchmarks_app.services.uploads import upload_text_limits, upload_too_large
from scoring.audit.judges import parse_judge_spec
from scoring.audit.parsing import (
    FindingProblems,
    ParseError,
    ScanFile,
    ScanRecord,
    loads,
    parse_scan,
)
from scoring.names import name_skeleton

# Participants pick among these; a replay judge reads a folder on the server, so replay runs
# stay with maintainers (``manage.py evaluate_audit``, the admin).
SUBMIT_JUDGES = ("offline", "openai")
SCANNER_NAME_MAX = 100
# The name becomes a URL segment (/audit/scanners/<name>/) and a file name in downloads.
_SCANNER_NAME = re.compile(r"\w[\w .+@()-]*")


def _refuse_look_alike_scanner(name: str, *, user: Any) -> None:
    """A new name whose skeleton (see ``scoring.names``) is an existing scanner's is refused.

    Otherwise ``Baseline``, or ``baseline`` spelt with a Cyrillic a (U+0430), would stand
    beside ``baseline`` on the leaderboard and pass for it. The existing name is named only
    where ``user`` may see that scanner: a hidden phase's entrant is not confirmed by it.
    """
    skeleton = name_skeleton(name)
    for existing in Scanner.objects.values_list("name", flat=True).iterator():
        if existing != name and name_skeleton(existing) == skeleton:
            if visible_scanners(user).filter(name=existing).exists():
                raise AuditRunError(
                    f"scanner: {name!r} looks like the existing scanner {existing!r}; "
                    "submit under that exact name or a clearly different one"
                )
            raise AuditRunError(f"scanner: {name!r} {NAME_NOT_AVAILABLE}")


# The answer for a name that is not the submitter's to write, whoever holds it: it says
# neither who nor whether the holder is an entrant the submitter may see.
NAME_NOT_AVAILABLE = "is not available; submit under a name of your own"


def _submit_scanner_name(*, user: Any, scanner_name: str) -> str:
    """The cleaned scanner name: its shape only (required, length, characters).

    Whether ``user`` may write under it is :func:`_refuse_scanner_name`'s question, asked
    once the upload itself has been checked: a bad file then gets the same answer under any
    name, so that nobody learns which names exist (a hidden phase's entrants included)
    without spending a submission.
    """
    name = (scanner_name or "").strip()
    if not name:
        raise AuditRunError("scanner: a name is required")
    # Existing names that the user may write (their own, the curators' public ones) keep
    # whatever shape they were imported with; every other name gets the same checks.
    mine = Q(owner__isnull=True)
    if getattr(user, "is_authenticated", False):
        mine |= Q(owner_id=user.pk)
    if getattr(user, "is_staff", False) or Scanner.objects.filter(mine, name=name).exists():
        return name
    if len(name) > SCANNER_NAME_MAX:
        raise AuditRunError(f"scanner: at most {SCANNER_NAME_MAX} characters, got {len(name)}")
    if not _SCANNER_NAME.fullmatch(name):
        raise AuditRunError(
            f"scanner: {name!r} may only hold letters, digits, spaces and . _ - + @ ( ),"
            " starting with a letter or digit"
        )
    return name


def _refuse_scanner_name(*, user: Any, name: str) -> None:
    """Refuse ``name`` unless ``user`` may write its results.

    A scanner belongs to whoever first submitted it; one without an owner was imported by
    the maintainers (the reference scanners). Only its owner, or staff, may replace a
    scanner's results: anybody else would rewrite someone else's leaderboard entry. Another
    participant's name answers :data:`NAME_NOT_AVAILABLE`, the same whether or not the
    submitter may see that scanner.
    """
    scanner = Scanner.objects.filter(name=name).first()
    if scanner is None:
        _refuse_look_alike_scanner(name, user=user)
        return
    if getattr(user, "is_staff", False):
        return
    if scanner.owner_id is None:
        # Said as the boards show it: a baseline carries the badge; other curated scanners
        # are results the curators imported (public, as every curated entry is).
        whose = (
            "is a baseline kept by the site's curators"
            if scanner.is_baseline
            else "holds results imported by the site's curators"
        )
        raise PermissionError(f"scanner: {name!r} {whose}; submit under a name of your own")
    if scanner.owner_id != getattr(user, "pk", None):
        raise PermissionError(f"scanner: {name!r} {NAME_NOT_AVAILABLE}")


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
    if getattr(user, "is_staff", False):
        # Staff may name any curated judge record (its server, model and options).
        record = JudgeRecord.objects.filter(name=judge.strip(), kind__in=SUBMIT_JUDGES).first()
        if record is not None:
            return record.name
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


def _check_daily_quota(user: Any, phase: Phase | None = None) -> None:
    """Refuse a participant's submission past ``AUDIT_DAILY_SUBMISSIONS`` a (UTC) day, or
    past the limits of its ``phase`` where the phase sets any.

    Must run inside the submission's transaction: the lock on the user's row serializes one
    user's concurrent submissions, so that the count and the new run happen with no other
    submission of theirs in between (on SQLite the IMMEDIATE transaction already does).
    """
    if not getattr(user, "is_authenticated", False):
        raise PermissionError("sign in to submit results")
    if user.is_staff:
        return
    get_user_model().objects.select_for_update(no_key=True).get(pk=user.pk)
    quota = audit_submission_quota(user=user, phase=phase)
    if quota.remaining is not None and quota.remaining <= 0:
        raise AuditQuotaExceeded(f"submissions: {quota.exceeded_message}", quota=quota)


def _max_findings() -> int | None:
    """``AUDIT_MAX_FINDINGS``: the most findings one submission may hold (``None``: no cap)."""
    cap = _setting("AUDIT_MAX_FINDINGS", 2000)
    return None if cap is None else int(cap)


def empty_message(repo: Repo, *, field: str = "declared_empty=true") -> str:
    return (
        f"no findings for repo {repo.project_id!r}; if your tool found nothing there, say so "
        f"({field})"
    )


def _submit_findings(
    data: Any,
    *,
    where: str,
    repo: Repo,
    declared_empty: bool = False,
    confirm_untitled: bool = False,
) -> tuple[list[ScanRecord], dict[str, Any]]:
    try:
        findings, metadata = parse_scan(
            data,
            max_findings=_max_findings(),
            allow_untitled=confirm_untitled,
            limits=upload_text_limits(),
        )
    except ParseError as exc:
        message = str(exc)
        if isinstance(exc, FindingProblems) and exc.untitled_only:
            message += (
                "; if your tool really reported them so, confirm it (confirm_untitled=true) "
                "and they are kept, untitled"
            )
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
    if not findings and not declared_empty:
        raise AuditRunError(f"{where}: {empty_message(repo)}")
    if findings and declared_empty:
        raise AuditRunError(
            f"declared_empty: {repo.project_id!r} is declared empty, but the upload holds "
            f"{len(findings)} finding(s) for it"
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
    declared_empty: bool = False,
    dataset: AuditDataset | None = None,
    method: dict[str, str] | None = None,
) -> EvaluationRun:
    if not getattr(user, "is_authenticated", False):
        raise PermissionError("sign in to submit results")
    # Only now, the upload checked (a bad one answers the same under any name), and before
    # the "unchanged" answer, which would name another entrant's run.
    _refuse_scanner_name(user=user, name=name)
    release = run_release_for(dataset=dataset, repos=[repo])
    phase = submission_phase(release)
    same = unchanged_run(
        scanner_name=name, findings={repo: findings}, judge=judge, release=release, phase=phase
    )
    if same is not None:
        raise AuditUnchanged(same)
    _check_daily_quota(user, phase)
    report = ImportReport()
    result = import_scan_file(
        ScanFile(name, repo.project_id, source_name[:300], findings, metadata),
        repo,
        report,
        owner=user,
        declared_empty=declared_empty,
    )
    scanner = result.scanner
    if scanner.owner_id != getattr(user, "pk", None) and not getattr(user, "is_staff", False):
        # Someone else created the name between the check and the insert: undo it all.
        raise PermissionError(f"scanner: {name!r} {NAME_NOT_AVAILABLE}")
    if report.changed_scanner_ids:
        audit_boards_refresh_for_scanners(scanner_ids=report.changed_scanner_ids)
    return audit_run_create(
        scanner=scanner,
        repos=[repo],
        judge=judge,
        created_by=user,
        dataset=dataset,
        release=release,
        phase=phase,
        metadata=method,
    )


@retry_on_conflict
@transaction.atomic
def audit_scan_submit(
    *,
    user: Any,
    scanner_name: str,
    repo: Repo,
    data: Any,
    source_name: str = "api upload",
    judge: str | None = None,
    declared_empty: bool = False,
    dataset: AuditDataset | None = None,
    confirm_untitled: bool = False,
    method_name: str = "",
    method_description: str = "",
    method_url: str = "",
) -> EvaluationRun:
    """Store a scanner's results for one repo (any accepted shape) and queue their evaluation.

    ``data`` is the decoded JSON. Raises :class:`AuditRunError` (``"field: problem"``) for bad
    input, :class:`PermissionError` when the scanner is not the user's to write and
    :class:`AuditUnchanged` for findings already judged; in each case nothing is stored.
    """
    name = _submit_scanner_name(user=user, scanner_name=scanner_name)
    judge = _submit_judge(user=user, judge=judge)
    method = entry_metadata(
        method_name=method_name, method_description=method_description, method_url=method_url
    )
    findings, metadata = _submit_findings(
        data,
        where="findings",
        repo=repo,
        declared_empty=declared_empty,
        confirm_untitled=confirm_untitled,
    )
    return _store_and_queue(
        user=user,
        name=name,
        repo=repo,
        findings=findings,
        metadata=metadata,
        source_name=source_name,
        judge=judge,
        declared_empty=declared_empty,
        dataset=dataset,
        method=method,
    )


@retry_on_conflict
@transaction.atomic
def audit_scan_upload(
    *,
    user: Any,
    scanner_name: str,
    repo: Repo,
    upload: UploadedFile,
    judge: str | None = None,
    declared_empty: bool = False,
    dataset: AuditDataset | None = None,
    confirm_untitled: bool = False,
    method_name: str = "",
    method_description: str = "",
    method_url: str = "",
) -> EvaluationRun:
    """:func:`audit_scan_submit` for an uploaded JSON file (the web form, API multipart).

    The size is checked before reading; every problem with the file is reported under the
    ``file`` field and names the file.
    """
    name = _submit_scanner_name(user=user, scanner_name=scanner_name)
    judge = _submit_judge(user=user, judge=judge)
    method = entry_metadata(
        method_name=method_name, method_description=method_description, method_url=method_url
    )
    file_name = upload.name or "upload"
    too_large = upload_too_large(upload.size, file_name)
    if too_large:
        raise AuditRunError(f"file: {too_large}")
    try:
        data = loads(upload.read())
    except ParseError as exc:
        raise AuditRunError(f"file: {file_name}: {exc}") from None
    findings, metadata = _submit_findings(
        data,
        where=f"file: {file_name}",
        repo=repo,
        declared_empty=declared_empty,
        confirm_untitled=confirm_untitled,
    )
    return _store_and_queue(
        user=user,
        name=name,
        repo=repo,
        findings=findings,
        metadata=metadata,
        source_name=file_name,
        judge=judge,
        declared_empty=declared_empty,
        dataset=dataset,
        method=method,
    )
