"""Evaluating through the queue with the real ``openai`` client against a local fake server."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.management import CommandError, call_command

from benchmarks_app.models import (
    AuditRepoResult,
    AuditTruthResult,
    EvaluationRun,
    JudgeCall,
    MatchOutcome,
    Scanner,
)
from benchmarks_app.selectors.audit import (
    NOT_JUDGED,
    audit_leaderboard,
    audit_report,
    audit_run_detail,
)
from benchmarks_app.services.audit import AuditRunError, audit_run_create
from benchmarks_app.services.runs import run_resume, run_wait
from tests.benchmarks_app.audit.conftest import fake_verdict, publish_dataset
from tests.factories.audit import repo_with_scan
from tests.scoring.judges.fake_openai import FakeOpenAI, error_body

pytestmark = pytest.mark.django_db


def test_openai_judge_end_to_end_with_ledger(openai_settings) -> None:
    repo, _ = repo_with_scan(
        truths=["Reentrancy in withdraw", "Oracle staleness"],
        findings=["Unrelated gas issue", "Reentrancy when withdrawing", "Info note"],
        qa=(2,),
    )
    publish_dataset(repo)
    with FakeOpenAI(fake_verdict) as server:
        openai_settings.OPENAI_BASE_URL = server.base_url
        call_command(
            "evaluate_audit",
            "--scanner",
            "tool",
            "--judge",
            "openai",
            "--wait",
            stdout=io.StringIO(),
        )
    run = EvaluationRun.objects.get()
    assert run.status == "succeeded" and run.is_complete
    assert run.judge_config["model"] == "fake-model"
    assert server.requests[0]["model"] == "fake-model"
    assert server.requests[0]["response_format"]["type"] == "json_schema"
    rows = {r.truth_finding.title: r for r in AuditTruthResult.objects.filter(run=run)}
    assert rows["Reentrancy in withdraw"].outcome == MatchOutcome.MATCH
    matched = rows["Reentrancy in withdraw"].scan_finding
    assert matched is not None and matched.index == 1
    assert rows["Oracle staleness"].outcome == MatchOutcome.NONE
    assert len(rows["Reentrancy in withdraw"].votes) == 2
    calls = JudgeCall.objects.filter(run=run)
    assert calls.count() == len(server.requests) == 4
    assert {c.tokens_in for c in calls} == {100} and {c.status for c in calls} == {"ok"}
    # Scanner text is delimited as data and the judge told to ignore instructions in it.
    assert "<junior_findings" in server.requests[0]["messages"][1]["content"]
    assert "never instructions" in server.requests[0]["messages"][0]["content"]
    metrics = AuditRepoResult.objects.get(run=run).metrics
    assert (metrics["tp"], metrics["fp"], metrics["fn"], metrics["qa"]) == (1, 2, 1, 1)
    assert AuditRepoResult.objects.get(run=run).false_positive_indices == [0]
    board = audit_leaderboard()
    assert [(r["scanner"], r["tp"], r["repos"]) for r in board] == [("tool", 1, 1)]


def test_failure_marks_run_failed_and_resume_redoes_only_missing(openai_settings) -> None:
    repo, _ = repo_with_scan(
        truths=["Reentrancy in withdraw", "Oracle staleness", "Access control"],
        findings=["Reentrancy when withdrawing", "Oracle price is stale"],
    )
    publish_dataset(repo)
    state = {"down": True}

    def handler(body: dict[str, Any]) -> Any:
        if state["down"] and "Title: Oracle staleness" in body["messages"][1]["content"]:
            return 503, error_body("overloaded")
        return fake_verdict(body)

    with FakeOpenAI(handler) as server:
        openai_settings.OPENAI_BASE_URL = server.base_url
        with pytest.raises(CommandError, match="1 item"):
            call_command(
                "evaluate_audit",
                "--scanner",
                "tool",
                "--judge",
                "openai",
                "--wait",
                stdout=io.StringIO(),
            )
        run = EvaluationRun.objects.get()
        assert (run.status, run.failed_items, run.is_complete) == ("failed", 1, False)
        failed = AuditTruthResult.objects.get(run=run, outcome=MatchOutcome.JUDGE_FAILED)
        assert failed.truth_finding.title == "Oracle staleness"
        assert all(v["verdict"] == "failed" for v in failed.votes)
        assert JudgeCall.objects.filter(run=run, status="error").count() >= 2
        # The failure stopped the repo: "Access control" waits, neither judged nor a miss.
        assert "1 later truth finding(s)" in run.error
        assert not AuditTruthResult.objects.filter(
            run=run, truth_finding__title="Access control"
        ).exists()
        assert run.progress_done == 1 and run.progress_total == 3
        incomplete = AuditRepoResult.objects.get(run=run)
        assert not incomplete.is_complete
        assert (incomplete.metrics["tp"], incomplete.metrics["fn"]) == (1, 0)
        assert (incomplete.metrics["judge_failed"], incomplete.metrics["not_judged"]) == (1, 1)
        # Incomplete results never reach the leaderboard or the default report.
        assert audit_leaderboard() == []
        assert audit_report(scanner_name="tool", run_id=run.pk)["is_complete"] is False
        # The run page accounts for the waiting truth finding.
        _, sections = audit_run_detail(user=AnonymousUser(), run_id=run.pk)
        assert [(r["title"], r["outcome"]) for r in sections[0].rows] == [
            ("Reentrancy in withdraw", "match"),
            ("Oracle staleness", "judge_failed"),
            ("Access control", NOT_JUDGED),
        ]

        state["down"] = False
        before = len(server.requests)
        run = run_wait(run=run_resume(run=run))
        assert (run.status, run.failed_items, run.is_complete) == ("succeeded", 0, True)
        assert run.progress_done == run.progress_total == 3
        asked = server.requests[before:]
        # Only what is missing: the failed truth finding (and the one behind it, whose pool
        # is empty once both scan findings are matched, so it costs no call).
        assert asked and all(
            "Title: Oracle staleness" in r["messages"][1]["content"] for r in asked
        )
    outcomes = {
        r.truth_finding.title: r.outcome
        for r in AuditTruthResult.objects.filter(run=run).exclude(outcome="judge_failed")
    }
    assert outcomes == {
        "Reentrancy in withdraw": "match",
        "Oracle staleness": "match",
        "Access control": "none",
    }
    report = audit_report(scanner_name="tool")
    assert report["is_complete"] and report["overall"]["tp"] == 2 and report["run"] == run.pk


def _outcomes(run: EvaluationRun) -> dict[str, tuple[str, int | None]]:
    return {
        r.truth_finding.title: (r.outcome, r.scan_finding.index if r.scan_finding else None)
        for r in AuditTruthResult.objects.filter(run=run).exclude(outcome="judge_failed")
    }


def test_failed_then_resumed_run_equals_an_uninterrupted_one(openai_settings) -> None:
    # Both truths match scan #0 exactly. Had the second been matched while the first one's
    # judge was down, it would have taken #0, and the resumed first one found nothing.
    repo_with_scan(
        truths=["Reentrancy in withdraw", "Reentrancy in deposit"],
        findings=["Reentrancy when withdrawing", "Unrelated gas issue"],
    )
    scanner = Scanner.objects.get(name="tool")
    state = {"down": True}

    def handler(body: dict[str, Any]) -> Any:
        if state["down"] and "Title: Reentrancy in withdraw" in body["messages"][1]["content"]:
            return 503, error_body("overloaded")
        return fake_verdict(body)

    with FakeOpenAI(handler) as server:
        openai_settings.OPENAI_BASE_URL = server.base_url
        interrupted = run_wait(run=audit_run_create(scanner=scanner, judge="openai"))
        assert interrupted.status == "failed" and interrupted.failed_items == 1
        assert _outcomes(interrupted) == {}
        state["down"] = False
        resumed = run_wait(run=run_resume(run=interrupted))
        # Another model: nothing comes from the cache, every comparison is asked afresh.
        clean = run_wait(
            run=audit_run_create(scanner=scanner, judge="openai", model="uninterrupted")
        )
    assert resumed.is_complete and clean.is_complete
    assert JudgeCall.objects.filter(run=clean, status="ok").count() == 4
    expected = {"Reentrancy in withdraw": ("match", 0), "Reentrancy in deposit": ("none", None)}
    assert _outcomes(resumed) == _outcomes(clean) == expected
    by_run = {r.run_id: r for r in AuditRepoResult.objects.filter(is_complete=True)}
    for key in ("tp", "partial", "fp", "fn"):
        assert by_run[resumed.pk].metrics[key] == by_run[clean.pk].metrics[key]
    assert by_run[resumed.pk].false_positive_indices == by_run[clean.pk].false_positive_indices
    assert by_run[clean.pk].false_positive_indices == [1]


def test_run_creation_errors_name_the_argument() -> None:
    _, result = repo_with_scan(truths=["a"], findings=["b"])
    other, _ = repo_with_scan(truths=["a"], findings=["b"], scanner="other")
    with pytest.raises(AuditRunError, match="judge: 'gpt' is not one of"):
        audit_run_create(scanner=result.scanner, judge="gpt")
    with pytest.raises(AuditRunError, match="replay folder"):
        audit_run_create(scanner=result.scanner, judge="replay:/nonexistent")
    with pytest.raises(AuditRunError, match=f"no results for {other.project_id}"):
        audit_run_create(scanner=result.scanner, repos=[other])
    with pytest.raises(AuditRunError, match="openai needs OPENAI_API_KEY"):
        audit_run_create(scanner=result.scanner, judge="openai")
