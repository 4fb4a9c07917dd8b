# mypy: disable-error-code="arg-type,attr-defined"
"""Staff start runs with any curated judge record, not only offline/openai (issue 24): the
audit submission forms, the admin's "Evaluate with…", the checklist and probe admin actions.
Participants are offered (and may name) only what they were before."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from benchmarks_app.models import EvaluationRun, JudgeRecord
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import repo_with_scan
from tests.factories.checklist import MembershipFactory, PaperFactory, add_answers
from tests.factories.common import StaffFactory, UserFactory
from tests.factories.probes import ResponseFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def local() -> JudgeRecord:
    return JudgeRecord.objects.create(
        name="local-qwen",
        kind="openai",
        base_url="http://127.0.0.1:9/v1",
        model="qwen2.5-7b",
        api_key_env="LOCAL_JUDGE_KEY",
    )


def _submit(client: Any, repo: Any, judge: str) -> Any:
    findings = [{"title": "Reentrancy in withdraw", "severity": "high", "description": "x"}]
    upload = SimpleUploadedFile("r.json", json.dumps(findings).encode(), "application/json")
    data = {"repo": repo.project_id, "scanner": "mytool", "judge": judge, "file": upload}
    return client.post(reverse("audit:submit"), data)


def test_the_audit_form_offers_staff_every_record_and_runs_on_it(
    client: Any, local: JudgeRecord
) -> None:
    repo, _ = repo_with_scan(truths=["Reentrancy in withdraw"], findings=["Other"])
    publish_dataset(repo)
    client.force_login(StaffFactory())
    page = client.get(reverse("audit:submit")).content.decode()
    assert '<option value="local-qwen">local-qwen (judge record: qwen2.5-7b at http' in page
    answer = _submit(client, repo, "local-qwen")
    assert answer.status_code == 302, answer.content.decode()[:2000]
    run = EvaluationRun.objects.get(benchmark="audit", created_by__is_staff=True)
    assert run.judge_record == local


def test_participants_are_neither_offered_nor_given_a_record(
    client: Any, local: JudgeRecord
) -> None:
    repo, _ = repo_with_scan(truths=["Reentrancy in withdraw"], findings=["Other"])
    publish_dataset(repo)
    client.force_login(UserFactory())
    page = client.get(reverse("audit:submit")).content.decode()
    assert "local-qwen" not in page
    answer = _submit(client, repo, "local-qwen")
    assert answer.status_code == 400
    assert "&#x27;local-qwen&#x27; is not one of offline, openai" in answer.content.decode()
    assert not EvaluationRun.objects.filter(judge_record=local).exists()


def test_admin_evaluate_with_lists_records_and_runs_on_the_chosen_one(
    client: Any, local: JudgeRecord
) -> None:
    repo, result = repo_with_scan(truths=["Reentrancy in withdraw"], findings=["Other"])
    publish_dataset(repo)
    client.force_login(StaffFactory(is_superuser=True))
    changelist = reverse("admin:benchmarks_app_repo_changelist")
    form = client.post(changelist, {"action": "evaluate_with", "_selected_action": [repo.pk]})
    assert 'value="local-qwen"' in form.content.decode()
    done = client.post(
        changelist,
        {
            "action": "evaluate_with",
            "_selected_action": [repo.pk],
            "evaluate": "1",
            "scanner": result.scanner.pk,
            "judge": "local-qwen",
        },
    )
    assert done.status_code == 302
    run = EvaluationRun.objects.get()
    assert run.judge_record == local and run.judge == "openai"


def test_admin_checklist_action_per_record(client: Any, local: JudgeRecord) -> None:
    from tests.factories.checklist import ChallengeFactory

    ChallengeFactory()
    m = MembershipFactory()
    paper = PaperFactory(submission__team=m.team)
    add_answers(paper, {n: "Yes" for n in range(1, 16)})
    client.force_login(StaffFactory(is_superuser=True))
    changelist = reverse("admin:benchmarks_app_checklistsubmission_changelist")
    page = client.get(changelist).content.decode()
    assert "Assess with local-qwen (judge record: qwen2.5-7b" in page
    client.post(
        changelist,
        {"action": "assess_with_local-qwen", "_selected_action": [paper.submission.pk]},
    )
    run = EvaluationRun.objects.get(benchmark="checklist")
    assert run.judge_record == local and run.judge == "openai:qwen2.5-7b"


def test_admin_probe_rescore_per_llm_record(client: Any, local: JudgeRecord) -> None:
    response = ResponseFactory()
    JudgeRecord.objects.create(name="rules-only", kind="offline")
    client.force_login(StaffFactory(is_superuser=True))
    changelist = reverse("admin:benchmarks_app_responsesubmission_changelist")
    page = client.get(changelist).content.decode()
    assert "refusals judged by local-qwen" in page
    assert "rescore_with_rules-only" not in page  # refusals are judged by an LLM record
    client.post(
        changelist,
        {"action": "rescore_with_local-qwen", "_selected_action": [response.submission.pk]},
    )
    run = EvaluationRun.objects.get(benchmark="probes")
    assert run.judge_record == local and run.judge == "openai:qwen2.5-7b"
    assert run.judge_config["refusal"]["signal"] == "openai"
