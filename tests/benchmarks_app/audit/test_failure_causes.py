"""A failed audit run says why its items could not be judged, and shows no misleading ratios.

The judge is the real ``openai`` client against a local fake server that refuses some truth
findings: with a llama.cpp context error (permanent: change a setting first) or with HTTP 503
(transient: resume).
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from benchmarks_app.models import (
    AuditTruthResult,
    EvaluationRun,
    JudgeCall,
    MatchOutcome,
    RunStatus,
    Scanner,
)
from benchmarks_app.selectors.audit import audit_leaderboard, audit_report
from benchmarks_app.selectors.runs import run_failed_item_reasons, run_failure_causes
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.runs import run_finish, run_resume, run_wait
from scoring.judges import failures
from tests.benchmarks_app.audit.conftest import fake_verdict
from tests.factories.audit import repo_with_scan
from tests.factories.common import RunFactory
from tests.scoring.judges.fake_openai import FakeOpenAI, error_body

pytestmark = pytest.mark.django_db

CONTEXT_400 = (
    400,
    {
        "error": {
            "code": 400,
            "message": "request (12914 tokens) exceeds the available context size (8192 tokens),"
            " try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 12914,
            "n_ctx": 8192,
        }
    },
)


def _refusing(titles: tuple[str, ...], answer: Any) -> Any:
    state = {"down": True}

    def handler(body: dict[str, Any]) -> Any:
        user = body["messages"][1]["content"]
        if state["down"] and any(f"Title: {t}" in user for t in titles):
            return answer
        return fake_verdict(body)

    handler.state = state  # type: ignore[attr-defined]
    return handler


def _repo() -> None:
    repo_with_scan(
        truths=["Reentrancy in withdraw", "Oracle staleness", "Access control"],
        findings=["Reentrancy when withdrawing", "Gas", "Naming", "Events"],
    )


def test_a_context_failure_is_explained_in_the_cli_on_the_pages_and_in_the_api(
    openai_settings: Any, client: Any
) -> None:
    _repo()
    with FakeOpenAI(_refusing(("Oracle staleness",), CONTEXT_400)) as server:
        openai_settings.OPENAI_BASE_URL = server.base_url
        stdout, stderr = io.StringIO(), io.StringIO()
        with pytest.raises(CommandError) as excinfo:
            call_command(
                "evaluate_audit",
                "--scanner",
                "tool",
                "--judge",
                "openai",
                "--batch-size",
                "1",
                "--wait",
                stdout=stdout,
                stderr=stderr,
            )
    run = EvaluationRun.objects.get()
    assert (run.status, run.failed_items) == (RunStatus.FAILED, 1)

    # The run's message: the cause with its sizes and the setting to change, no "resume".
    message = str(excinfo.value)
    assert message.startswith(f"Run #{run.pk} failed: 1 item(s) could not be judged. Causes: 1 x")
    assert "prompt 12,914 tokens, context 8,192" in run.error
    assert "llama-server -c N" in run.error and "JUDGE_MAX_ANSWER_TOKENS" in run.error
    assert "resume" not in run.error.lower()
    assert "1 later truth finding(s) of the same repo(s) wait for them" in run.error

    # The CLI lists the distinct causes, marked as needing a fix before a resume helps.
    cli = stderr.getvalue()
    assert "Why 1 truth finding(s) could not be judged:" in cli
    assert "  1 x context: BadRequestError: HTTP 400" in cli
    assert "fix first: The prompt does not fit the server's context" in cli

    causes = run_failure_causes(run=run)
    assert [(c.kind, c.count, c.resumable) for c in causes] == [("context", 1, False)]

    # The API keeps its fields and adds the causes.
    data = client.get(f"/api/runs/{run.pk}/").json()
    assert data["failed_items"] == 1 and data["error"] == run.error
    assert data["failure_causes"] == [causes[0].as_dict()]
    assert data["failure_causes"][0]["kind"] == "context"
    assert data["failure_causes"][0]["resumable"] is False

    # Both run pages and the status JSON the run page polls.
    for url in (reverse("runs:detail", args=[run.pk]), reverse("audit:run", args=[run.pk])):
        page = client.get(url).content.decode()
        assert "Why 1 item could not be judged" in page
        assert 'data-kind="context"' in page and "fix first" in page
        assert "8,192" in page
    status = client.get(reverse("runs:status", args=[run.pk])).json()
    assert [c["kind"] for c in status["failure_causes"]] == ["context"]


def test_an_incomplete_run_reports_no_precision_over_unjudged_findings(
    openai_settings: Any, client: Any
) -> None:
    _repo()
    with FakeOpenAI(_refusing(("Oracle staleness",), (503, error_body("busy")))) as server:
        openai_settings.OPENAI_BASE_URL = server.base_url
        run = run_wait(run=audit_run_create(scanner=Scanner.objects.get(), judge="openai"))
    assert run.status == RunStatus.FAILED
    report = audit_report(scanner_name="tool", run_id=run.pk)
    row = report["repos"][0]
    # 1 of 3 judged (a match); 3 unmatched scan findings are not known to be false positives.
    assert (row["tp"], row["scan"], row["fn"]) == (1, 4, 0)
    assert row["precision"] is None and row["recall"] is None and row["fp"] is None
    assert report["overall"]["f1_with_partial"] is None
    assert report["incomplete"][0]["judged"] == 1 and report["incomplete"][0]["truth"] == 3
    # The incomplete run is never ranked.
    assert audit_leaderboard() == []

    run_page = client.get(reverse("audit:run", args=[run.pk])).content.decode()
    assert "incomplete: 1 of 3 truth findings judged" in run_page
    assert "25.0%" not in run_page  # the old precision, 1 / 4
    scanner_page = client.get(reverse("audit:scanner", args=["tool"]) + f"?run={run.pk}")
    text = scanner_page.content.decode()
    assert "1 of 3 truth findings judged" in text and "not known to be false positives" in text
    markdown = client.get(reverse("audit:scanner", args=["tool"]) + f"?run={run.pk}&format=md")
    assert "| — | — | — |" in markdown.content.decode()


def test_a_transient_failure_advises_resume_and_leaves_no_cause_once_resumed(
    openai_settings: Any,
) -> None:
    _repo()
    handler = _refusing(("Oracle staleness",), (503, error_body("overloaded")))
    with FakeOpenAI(handler) as server:
        openai_settings.OPENAI_BASE_URL = server.base_url
        run = run_wait(run=audit_run_create(scanner=Scanner.objects.get(), judge="openai"))
        assert run.status == RunStatus.FAILED
        causes = run_failure_causes(run=run)
        assert [(c.kind, c.count, c.resumable) for c in causes] == [("transient", 1, True)]
        assert "HTTP 503 overloaded" in causes[0].message
        assert "resume the run to judge these" in run.error

        handler.state["down"] = False
        run = run_wait(run=run_resume(run=run))
    assert run.status == RunStatus.SUCCEEDED and run.error == ""
    # The old judge-failed row stays on record, but its item is judged now: no cause left.
    assert AuditTruthResult.objects.filter(run=run, outcome=MatchOutcome.JUDGE_FAILED).exists()
    assert run_failure_causes(run=run) == []


def test_an_item_without_a_reason_takes_the_ledger_s_and_finish_uses_it() -> None:
    repo, result = repo_with_scan(truths=["A", "B"], findings=["x"])
    run = RunFactory.create(scanner=result.scanner, status=RunStatus.RUNNING)
    truths = list(repo.truth_findings.order_by("order"))
    for truth in truths:
        AuditTruthResult.objects.create(
            run=run,
            repo=repo,
            truth_finding=truth,
            outcome=MatchOutcome.JUDGE_FAILED,
            votes=[{"vote": 1, "verdict": "failed", "error": ""}],
        )
    calls = [
        # Retried and answered: not a cause.
        ("p1", "error", "APITimeoutError: Request timed out."),
        ("p1", "ok", ""),
        # Still failed at its last try.
        ("p2", "invalid", "index 7 is not one of the findings in this batch"),
        ("p3", "error", "BadRequestError: HTTP 401 invalid api key"),
    ]
    for prompt_hash, status, error in calls:
        JudgeCall.objects.create(
            run=run, judge="openai", prompt_hash=prompt_hash, status=status, error=error
        )
    reasons = run_failed_item_reasons(run=run)
    assert sorted(map(tuple, reasons)) == [
        ("BadRequestError: HTTP 401 invalid api key",),
        (failures.tag(failures.INVALID, "index 7 is not one of the findings in this batch"),),
    ]
    finished = run_finish(run=run, failed_items=2, failure_note="Two wait.")
    assert finished.error.startswith("2 item(s) could not be judged. Causes: 1 x ")
    assert "HTTP 401 invalid api key" in finished.error and finished.error.endswith("Two wait.")
    # Causes passed in are used as they are.
    given = failures.summarize_items([[failures.tag(failures.CONTEXT, "too long")]])
    again = run_finish(run=run, failed_items=1, failure_causes=given)
    assert again.error == failures.headline(given, 1)


def test_collecting_causes_costs_the_same_queries_for_many_failed_items() -> None:
    def seed(n: int) -> EvaluationRun:
        repo, result = repo_with_scan(truths=[f"T{i}" for i in range(n)], findings=["x"])
        run = RunFactory.create(scanner=result.scanner, status=RunStatus.FAILED, failed_items=n)
        for truth in repo.truth_findings.all():
            AuditTruthResult.objects.create(
                run=run,
                repo=repo,
                truth_finding=truth,
                outcome=MatchOutcome.JUDGE_FAILED,
                votes=[{"error": failures.tag(failures.TRANSIENT, f"timeout {truth.pk}")}],
            )
        return run

    def queries(run: EvaluationRun) -> int:
        with CaptureQueriesContext(connection) as ctx:
            causes = run_failure_causes(run=run)
        assert sum(c.count for c in causes) == run.failed_items
        return len(ctx.captured_queries)

    assert queries(seed(2)) == queries(seed(12))
