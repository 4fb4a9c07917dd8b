"""``/api/runs/<id>/items/``: per-item results, paged; hidden truth stays hidden and checklist
answers reach only their team and staff."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks_app.models import (
    AssessmentStatus,
    AuditTruthResult,
    ChecklistAnswer,
    ChecklistAssessment,
    MatchOutcome,
    ProbeCaseResult,
    Repo,
    RunStatus,
    Scanner,
)
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.runs import run_wait
from scoring.judges import failures
from tests.factories.audit import repo_with_scan
from tests.factories.checklist import PaperFactory, add_answers
from tests.factories.common import (
    ChecklistRunFactory,
    ProbeRunFactory,
    RunFactory,
    StaffFactory,
    UserFactory,
    join,
)
from tests.factories.probes import ProbeFactory, ResponseFactory

pytestmark = pytest.mark.django_db
SECRET = "SECRET-DESCRIPTION"


def _audit_run(*, public: bool) -> Any:
    repo, _ = repo_with_scan(
        truths=["Reentrancy in withdraw", "Oracle staleness", "Access control"],
        findings=["Reentrancy when withdrawing", "Gas"],
    )
    repo.truth_findings.update(description=f"{SECRET}: drain the vault")
    Repo.objects.filter(pk=repo.pk).update(is_public=public)
    return run_wait(run=audit_run_create(scanner=Scanner.objects.get(name="tool"), judge="offline"))


def _items(api: Any, run: Any, query: str = "") -> Any:
    response = api.get(f"/api/runs/{run.pk}/items/{query}")
    assert response.status_code == 200, response.content
    return response.json()


def test_audit_items_give_outcomes_and_matched_indices_in_truth_order(api: Any) -> None:
    run = _audit_run(public=True)
    rows = _items(api, run)["results"]
    assert [r["finding_id"] for r in rows] == ["F-0", "F-1", "F-2"]
    stored = {
        r.truth_finding.finding_id: r
        for r in AuditTruthResult.objects.filter(run=run).select_related("truth_finding")
    }
    for row in rows:
        result = stored[row["finding_id"]]
        assert row["outcome"] == result.outcome
        assert row["scan_index"] == (result.scan_finding.index if result.scan_finding else None)
        assert row["title"] == result.truth_finding.title
        assert row["description"].startswith(SECRET)  # public repo: the text is shown
        assert row["failure"] is None


def test_hidden_truth_stays_hidden_from_participants_but_not_from_staff(api: Any) -> None:
    run = _audit_run(public=False)
    api.force_authenticate(UserFactory.create())
    response = api.get(f"/api/runs/{run.pk}/items/")
    assert SECRET not in response.content.decode()
    rows = response.json()["results"]
    assert len(rows) == 3
    assert all(r["title"] is None and r["description"] is None for r in rows)
    assert all(r["explanation"] is None for r in rows)
    assert {r["outcome"] for r in rows} <= {o.value for o in MatchOutcome}

    api.force_authenticate(StaffFactory.create())
    rows = _items(api, run)["results"]
    assert all(r["description"].startswith(SECRET) for r in rows)
    assert rows[0]["title"] == "Reentrancy in withdraw"


def test_items_are_paged(api: Any) -> None:
    run = _audit_run(public=True)
    first = _items(api, run, "?page_size=2")
    assert first["count"] == 3 and len(first["results"]) == 2 and first["next"]
    second = _items(api, run, "?page_size=2&page=2")
    assert [r["finding_id"] for r in second["results"]] == ["F-2"]
    assert api.get(f"/api/runs/{run.pk}/items/?page=3&page_size=2").status_code == 404


def test_a_failed_truth_finding_says_why_and_a_later_verdict_replaces_it(api: Any) -> None:
    repo, result = repo_with_scan(truths=["A", "B"], findings=["x"])
    run = RunFactory.create(scanner=result.scanner, status=RunStatus.FAILED, failed_items=1)
    a, b = repo.truth_findings.order_by("order")
    reason = failures.tag(failures.TRANSIENT, "APITimeoutError: Request timed out.")
    for truth in (a, b):
        AuditTruthResult.objects.create(
            run=run,
            repo=repo,
            truth_finding=truth,
            outcome=MatchOutcome.JUDGE_FAILED,
            votes=[{"vote": 1, "error": reason}],
        )
    AuditTruthResult.objects.create(run=run, repo=repo, truth_finding=a, outcome="none")
    rows = _items(api, run)["results"]
    assert [(r["finding_id"], r["outcome"]) for r in rows] == [
        ("F-0", "none"),
        ("F-1", "judge_failed"),
    ]
    assert rows[0]["failure"] is None
    assert rows[1]["failure"] == "transient: APITimeoutError: Request timed out."


def test_probe_items_give_each_case(api: Any) -> None:
    run = ProbeRunFactory.create(status=RunStatus.SUCCEEDED)
    submission = run.probe_submission
    assert submission is not None
    probes = [ProbeFactory.create(suite=submission.suite) for _ in range(2)]
    for probe, passed in zip(probes, (True, False), strict=True):
        response = ResponseFactory.create(submission=submission, probe=probe)
        ProbeCaseResult.objects.create(
            run=run,
            response=response,
            probe=probe,
            passed=passed,
            risk_score=0.0 if passed else 0.8,
            weighted_risk=0.0 if passed else 1.6,
            case={},
        )
    rows = _items(api, run)["results"]
    assert [(r["probe_id"], r["passed"], r["risk_score"]) for r in rows] == [
        (probes[0].probe_id, True, 0.0),
        (probes[1].probe_id, False, 0.8),
    ]
    assert rows[1]["category"] == probes[1].category


def test_checklist_items_reach_only_the_team(api: Any) -> None:
    paper = PaperFactory.create()
    add_answers(paper, {1: "Yes", 2: "No"})
    run = ChecklistRunFactory.create(
        checklist_submission=paper.submission, status=RunStatus.SUCCEEDED
    )
    for answer in ChecklistAnswer.objects.filter(paper=paper, question__number__in=[1, 2]):
        ChecklistAssessment.objects.create(
            run=run,
            answer=answer,
            status=AssessmentStatus.OK,
            correct=1 if answer.answer == "Yes" else 0,
            feedback=f"feedback on {answer.question.number}",
        )
    outsider, member = UserFactory.create(), UserFactory.create()
    join(member, paper.team)
    api.force_authenticate(outsider)
    assert api.get(f"/api/runs/{run.pk}/items/").status_code == 404
    api.force_authenticate(member)
    rows = _items(api, run)["results"]
    assert [(r["question"], r["answer"], r["correct"]) for r in rows] == [
        (1, "Yes", True),
        (2, "No", False),
    ]
    assert rows[1]["feedback"] == "feedback on 2" and rows[0]["paper"] == "Genuine"
    assert json.dumps(rows).count("feedback on") == 2


def test_items_of_an_unknown_run_are_404(api: Any) -> None:
    assert api.get("/api/runs/987654/items/").status_code == 404
