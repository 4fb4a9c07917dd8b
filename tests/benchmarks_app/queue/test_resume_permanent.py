"""A failed run names its failed items and why; Resume refuses to repeat a failure that cannot
change (the replay judge's missing verdict, a 401/403/404 with unchanged settings) and says
what to change, and still resumes when anything may have changed or any failure is transient.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks_app.models import AuditTruthResult, MatchOutcome, RunStatus, Scanner
from benchmarks_app.selectors.runs import (
    FINGERPRINT_KEY,
    REPLAY_ADDED,
    run_failed_items,
    run_failure_causes,
)
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.runs import RunNotResumable, run_finish, run_resume, run_wait
from scoring.judges import failures
from tests.factories.audit import repo_with_scan
from tests.factories.common import RunFactory

pytestmark = pytest.mark.django_db


def _row(index: int) -> dict[str, Any]:
    return {
        "is_fp": False,
        "is_match": index >= 0,
        "is_partial_match": False,
        "index_of_finding_from_junior_auditor": index,
        "explanation": "recorded",
        "severity_from_junior_auditor": "High",
        "severity_from_truth": "High",
    }


def test_a_truth_finding_added_after_the_recording_is_named_and_resume_says_what_to_do(
    tmp_path: Path,
) -> None:
    repo, _ = repo_with_scan(
        truths=["Reentrancy in withdraw", "Oracle staleness", "Access control"],
        findings=["Reentrancy when withdrawing", "Oracle is stale", "Gas", "Naming"],
    )
    recording = tmp_path / f"{repo.project_id}_results.json"
    # Recorded before F-2 was added to the truth: two rows for three truth findings.
    recording.write_text(json.dumps([_row(0), _row(1)]))
    scanner = Scanner.objects.get(name="tool")
    run = run_wait(run=audit_run_create(scanner=scanner, judge=f"replay:{tmp_path}"))

    assert (run.status, run.failed_items) == (RunStatus.FAILED, 1)
    assert f"truth finding F-2 {REPLAY_ADDED}" in run.error
    assert f"repo {repo.project_id}: truth finding F-2" in run.error
    assert "Resuming cannot judge them as things stand" in run.error
    (item,) = run_failed_items(run=run)
    assert (item.item_id, item.where, item.permanence) == ("F-2", repo.project_id, "replay")
    # One cause, however many positions are missing.
    causes = run_failure_causes(run=run)
    assert [c.count for c in causes] == [1]
    assert "added after the recording" in causes[0].message

    with pytest.raises(RunNotResumable) as refused:
        run_resume(run=run)
    message = str(refused.value)
    assert "would fail the same way" in message and "truth finding F-2" in message
    assert "add verdicts for these truth findings to the recording" in message
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED  # nothing was queued

    # The recording gains the verdict: the fingerprint changes and the resume goes through.
    recording.write_text(json.dumps([_row(0), _row(1), _row(-1)]))
    resumed = run_wait(run=run_resume(run=run))
    assert resumed.status == RunStatus.SUCCEEDED and resumed.error == ""
    assert run_failed_items(run=resumed) == []


def _failed_run(*reasons: str) -> Any:
    repo, result = repo_with_scan(truths=[f"T{i}" for i in range(len(reasons))], findings=["x"])
    run = RunFactory.create(scanner=result.scanner, status=RunStatus.RUNNING, judge="openai")
    for truth, reason in zip(repo.truth_findings.order_by("order"), reasons, strict=True):
        AuditTruthResult.objects.create(
            run=run,
            repo=repo,
            truth_finding=truth,
            outcome=MatchOutcome.JUDGE_FAILED,
            votes=[{"vote": 1, "error": reason}],
        )
    return run_finish(run=run, failed_items=len(reasons))


UNAUTHORIZED = failures.tag(failures.REJECTED, "AuthenticationError: HTTP 401 invalid api key")
NOT_FOUND = failures.tag(failures.REJECTED, "NotFoundError: HTTP 404 model 'nope' not found")
OVERLOADED = failures.tag(failures.TRANSIENT, "InternalServerError: HTTP 503 overloaded")


def test_a_refused_key_is_not_resumed_until_the_key_changes(settings: Any) -> None:
    settings.OPENAI_API_KEY = "wrong-key"
    run = _failed_run(UNAUTHORIZED, NOT_FOUND)
    assert run.judge_config[FINGERPRINT_KEY]
    assert "truth finding F-0 of repo" in run.error and "auth" not in run.error.split("Failed:")[0]
    with pytest.raises(RunNotResumable) as refused:
        run_resume(run=run)
    assert "set a valid OPENAI_API_KEY" in str(refused.value)
    assert "check OPENAI_BASE_URL and the judge model" in str(refused.value)

    settings.OPENAI_API_KEY = "right-key"
    assert run_resume(run=run).status == RunStatus.QUEUED


def test_a_transient_failure_among_permanent_ones_still_resumes(settings: Any) -> None:
    run = _failed_run(UNAUTHORIZED, OVERLOADED)
    assert "Resuming cannot judge 1 of them" in run.error
    assert run_resume(run=run).status == RunStatus.QUEUED


def test_a_run_failed_before_fingerprints_were_kept_resumes() -> None:
    run = _failed_run(UNAUTHORIZED)
    config = dict(run.judge_config)
    config.pop(FINGERPRINT_KEY)
    type(run).objects.filter(pk=run.pk).update(judge_config=config)
    run.refresh_from_db()
    assert run_resume(run=run).status == RunStatus.QUEUED


def test_a_context_failure_is_not_called_permanent() -> None:
    # The server's context can grow without any setting here changing: a resume may help.
    context = failures.tag(failures.CONTEXT, "BadRequestError: HTTP 400 exceeds the context")
    run = _failed_run(context)
    assert "Resuming cannot" not in run.error
    assert run_resume(run=run).status == RunStatus.QUEUED
