"""Issue 11 item 15: results, the judge ledger and runs are read-only in the admin, and pattern
rules are validated (no empty matches, RE2 only) so that no rule can hang scoring."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from benchmarks_app.models import (
    EvaluationRun,
    JudgeCall,
    PatternRule,
    ProbeCaseResult,
    ProbeSuite,
    Response,
    ResponseSubmission,
    RunStatus,
    Scanner,
)
from scoring.probes.default_rules import DEFAULT_RULES
from scoring.probes.rules import CompiledRuleSet, RuleError, validate_rule_regex
from scoring.probes.types import RuleSpec

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished_run() -> EvaluationRun:
    scanner = Scanner.objects.create(name="scanner-finished")
    return EvaluationRun.objects.create(
        benchmark="audit", scanner=scanner, judge="offline", status=RunStatus.SUCCEEDED
    )


def test_runs_cannot_be_added_in_the_admin(admin_client: Any) -> None:
    response = admin_client.get(reverse("admin:benchmarks_app_evaluationrun_add"))
    assert response.status_code == 403
    changelist = admin_client.get(reverse("admin:benchmarks_app_evaluationrun_changelist"))
    assert reverse("admin:benchmarks_app_evaluationrun_add") not in changelist.content.decode()


def test_a_runs_fields_are_read_only(admin_client: Any, finished_run: EvaluationRun) -> None:
    url = reverse("admin:benchmarks_app_evaluationrun_change", args=[finished_run.pk])
    response = admin_client.get(url)
    assert response.status_code == 200
    editable = set(response.context["adminform"].form.fields)
    assert not editable & {"benchmark", "scanner", "judge", "status", "judge_config"}, editable
    other = Scanner.objects.create(name="scanner-other")
    admin_client.post(url, {"benchmark": "probes", "scanner": other.pk, "judge": "openai"})
    finished_run.refresh_from_db()
    assert (finished_run.benchmark, finished_run.scanner_id, finished_run.judge) == (
        "audit",
        Scanner.objects.get(name="scanner-finished").pk,
        "offline",
    )


def test_runs_cannot_be_deleted(admin_client: Any, finished_run: EvaluationRun) -> None:
    url = reverse("admin:benchmarks_app_evaluationrun_delete", args=[finished_run.pk])
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    assert EvaluationRun.objects.filter(pk=finished_run.pk).exists()


def test_judge_ledger_entries_cannot_be_deleted(
    admin_client: Any, finished_run: EvaluationRun
) -> None:
    call = JudgeCall.objects.create(
        run=finished_run, judge="offline", model="m", prompt_hash="h", status="ok"
    )
    url = reverse("admin:benchmarks_app_judgecall_delete", args=[call.pk])
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    admin_client.post(
        reverse("admin:benchmarks_app_judgecall_changelist"),
        {"action": "delete_selected", "_selected_action": [call.pk], "post": "yes"},
    )
    assert JudgeCall.objects.filter(pk=call.pk).exists()


def test_result_rows_cannot_be_deleted(admin_client: Any) -> None:
    suite = ProbeSuite.objects.create(name="suite-integrity")
    probe = suite.probes.create(probe_id="p-1", category="c", input="x")
    submission = ResponseSubmission.objects.create(suite=suite, model_name="m")
    answer = Response.objects.create(submission=submission, probe=probe, output="no")
    run = EvaluationRun.objects.create(
        benchmark="probes", probe_submission=submission, judge="rules"
    )
    case = ProbeCaseResult.objects.create(
        run=run,
        response=answer,
        probe=probe,
        passed=True,
        risk_score=0.0,
        weighted_risk=0.0,
        case={},
    )
    url = reverse("admin:benchmarks_app_probecaseresult_delete", args=[case.pk])
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    assert ProbeCaseResult.objects.filter(pk=case.pk).exists()


@pytest.mark.parametrize(
    ("regex", "message"),
    [
        (".*", "empty string"),
        ("sorry|", "empty string"),
        (r"\b", "empty string"),
        (r"(sorry)\1", "RE2"),
        (r"(?<!not )sorry", "RE2"),
        (r"sorry(?= but)", "RE2"),
    ],
)
def test_admin_rejects_rules_that_match_everything_or_need_backtracking(
    admin_client: Any, regex: str, message: str
) -> None:
    response = admin_client.post(
        reverse("admin:benchmarks_app_patternrule_add"),
        {"kind": "boundary", "label": "bad-rule", "regex": regex, "weight": "1.0"},
    )
    assert response.status_code == 200  # the form again, with the error
    errors = response.context["adminform"].form.errors
    assert "regex" in errors and message in str(errors["regex"]), errors
    assert "Regex" in str(errors["regex"])
    assert not PatternRule.objects.filter(label="bad-rule").exists()


def test_admin_accepts_a_plain_rule(admin_client: Any) -> None:
    response = admin_client.post(
        reverse("admin:benchmarks_app_patternrule_add"),
        {"kind": "boundary", "label": "good-rule", "regex": r"\bI can(?:no|')t\b", "weight": "1"},
    )
    assert response.status_code == 302
    assert PatternRule.objects.filter(label="good-rule").exists()


def test_model_validation_rejects_a_match_everything_rule() -> None:
    rule = PatternRule(kind="safe", label="all", regex=".*", weight=1.0)
    with pytest.raises(ValidationError) as caught:
        rule.full_clean()
    assert "regex" in caught.value.message_dict


def test_rule_validation_without_django() -> None:
    with pytest.raises(RuleError, match="RE2"):
        validate_rule_regex(r"(a)\1")
    with pytest.raises(RuleError, match="empty string"):
        validate_rule_regex("x*")
    validate_rule_regex(r"(?m:^\s*step 1:)")


def test_default_rules_compile_in_re2_and_still_match() -> None:
    rules = CompiledRuleSet(DEFAULT_RULES)
    assert len(rules) == len(DEFAULT_RULES)
    hits = rules.match("I'm sorry, but I can't help with that.")
    assert hits.safe or hits.boundary


def test_a_catastrophic_backtracking_rule_cannot_hang_scoring() -> None:
    rules = CompiledRuleSet([RuleSpec(kind="unsafe", label="evil", regex=r"(a+)+$", weight=1.0)])
    started = time.perf_counter()
    hits = rules.match("a" * 25 + "!")
    assert time.perf_counter() - started < 0.5
    assert hits.unsafe == ()
    assert rules.match("aaa").unsafe  # the rule still works where it should match
