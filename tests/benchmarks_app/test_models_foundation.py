from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from benchmarks_app.models import (
    AppendOnlyError,
    Challenge,
    ChecklistQuestion,
    EvaluationRun,
    JudgeCall,
    Membership,
    PatternRule,
    Probe,
    ProbeSuite,
    Repo,
    ScanFinding,
    Scanner,
    ScanResult,
    Team,
    TruthFinding,
)

pytestmark = pytest.mark.django_db


def _dup(factory: Callable[[], object]) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        factory()


def test_data_migration_loads_the_15_neurips_questions() -> None:
    questions = list(ChecklistQuestion.objects.order_by("number"))
    assert [q.number for q in questions] == list(range(1, 16))
    assert questions[0].title == "Claims"
    assert all(q.question and q.guidelines for q in questions)


def test_audit_duplicates_rejected() -> None:
    repo = Repo.objects.create(project_id="p1", name="P1")
    _dup(lambda: Repo.objects.create(project_id="p1", name="again"))
    TruthFinding.objects.create(repo=repo, finding_id="H-01", severity="High", title="t")
    _dup(
        lambda: TruthFinding.objects.create(repo=repo, finding_id="H-01", severity="Low", title="x")
    )
    scanner = Scanner.objects.create(name="s")
    result = ScanResult.objects.create(scanner=scanner, repo=repo)
    _dup(lambda: ScanResult.objects.create(scanner=scanner, repo=repo))
    ScanFinding.objects.create(scan_result=result, index=0, title="a", severity="Low")
    _dup(lambda: ScanFinding.objects.create(scan_result=result, index=0, title="b", severity="Low"))


def test_probe_duplicates_and_invalid_regex_rejected() -> None:
    suite = ProbeSuite.objects.create(name="s")
    Probe.objects.create(suite=suite, probe_id="1", category="c", input="x")
    _dup(lambda: Probe.objects.create(suite=suite, probe_id="1", category="c", input="y"))
    rule = PatternRule(kind="unsafe", label="broken", regex="(unclosed", weight=1)
    with pytest.raises(ValidationError) as excinfo:
        rule.full_clean()
    assert "regex" in excinfo.value.message_dict
    assert "Invalid regular expression" in excinfo.value.message_dict["regex"][0]
    _dup(lambda: PatternRule.objects.create(kind="unsafe", label="neg", regex="x", weight=-1))


def test_one_team_per_user_per_challenge(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("alice")
    challenge = Challenge.objects.create(name="C", slug="c")
    first = Team.objects.create(challenge=challenge, name="A")
    second = Team.objects.create(challenge=challenge, name="B")
    Membership.objects.create(team=first, user=user)
    _dup(lambda: Membership.objects.create(team=second, user=user))
    _dup(lambda: Team.objects.create(challenge=challenge, name="A"))
    other = Challenge.objects.create(name="D", slug="d")
    Membership.objects.create(team=Team.objects.create(challenge=other, name="A"), user=user)
    assert user.memberships.count() == 2


def test_result_rows_are_append_only() -> None:
    run = EvaluationRun.objects.create(benchmark="audit")
    call = JudgeCall.objects.create(run=run, judge="offline", prompt_hash="h", status="ok")
    call.status = "error"
    with pytest.raises(AppendOnlyError):
        call.save()
    assert JudgeCall.objects.get(pk=call.pk).status == "ok"


def test_run_progress_cannot_exceed_total() -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        EvaluationRun.objects.create(benchmark="audit", progress_total=3, progress_done=4)
