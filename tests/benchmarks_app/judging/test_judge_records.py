"""Judge records: runs are judged by their record's server, model, key variable and options,
not by the worker's OPENAI_* settings; the admin checks a judge; the key is never stored."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from benchmarks_app.models import EvaluationRun, JudgeCall, JudgeRecord
from benchmarks_app.selectors.audit_board_results import board_judge_key
from benchmarks_app.services.audit import AuditRunError, audit_run_create
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.benchmarks_app.judging.helpers import judge_or_probe
from tests.factories.audit import repo_with_scan
from tests.scoring.judges.fake_openai import FakeOpenAI, completion

pytestmark = pytest.mark.django_db

SECRET = "sk-local-secret-4711"


@pytest.fixture
def env_without_judge(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A worker whose own judge settings point nowhere useful: the record must win."""
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"  # nothing listens on the discard port
    settings.JUDGE_MODEL = "env-model"
    settings.JUDGE_MODELS = ["env-model"]
    settings.JUDGE_MAX_ANSWER_TOKENS = 4096
    settings.JUDGE_MAX_RETRIES = 1
    settings.JUDGE_BACKOFF_BASE_S = 0.001
    settings.JUDGE_BACKOFF_MAX_S = 0.002
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("LOCAL_JUDGE_KEY", SECRET)
    return settings


def test_default_records_exist_from_todays_settings() -> None:
    records = {r.name: r.kind for r in JudgeRecord.objects.all()}
    assert records["offline"] == "offline" and records["openai"] == "openai"


def test_evaluate_audit_judge_name_runs_on_the_records_server(env_without_judge: Any) -> None:
    repo, _ = repo_with_scan(
        truths=["Reentrancy in withdraw", "Oracle staleness"],
        findings=["Reentrancy when withdrawing", "Info note"],
    )
    publish_dataset(repo)
    with FakeOpenAI(judge_or_probe) as server:
        call_command(
            "judge_add",
            "local",
            "--base-url",
            server.base_url,
            "--model",
            "local-model",
            "--api-key-env",
            "LOCAL_JUDGE_KEY",
            "--max-answer-tokens",
            "333",
            "--concurrency",
            "2",
            stdout=io.StringIO(),
        )
        out = io.StringIO()
        call_command(
            "evaluate_audit", "--scanner", "tool", "--judge", "local", "--wait", stdout=out
        )
    run = EvaluationRun.objects.get()
    assert run.status == "succeeded" and run.is_complete, run.error
    assert run.judge_record is not None and run.judge_record.name == "local"
    # The record's model, not JUDGE_MODEL (and not refused by JUDGE_MODELS: curated).
    assert {r["model"] for r in server.requests} == {"local-model"}
    assert {r["max_completion_tokens"] for r in server.requests} == {333}
    assert JudgeCall.objects.filter(run=run, status="ok").count() == len(server.requests) == 4
    # A curated judge has its own board; the default one keeps today's key.
    assert board_judge_key(run) == "local"
    # The key is read from the named variable in the worker, never stored anywhere.
    record = JudgeRecord.objects.get(name="local")
    assert record.api_key_env == "LOCAL_JUDGE_KEY"
    stored = json.dumps(
        [
            list(JudgeRecord.objects.values()),
            list(EvaluationRun.objects.values("judge_config")),
            list(JudgeCall.objects.values("request", "error")),
        ],
        default=str,
    )
    assert SECRET not in stored


def test_default_openai_record_keeps_todays_board_key(env_without_judge: Any) -> None:
    repo, result = repo_with_scan(truths=["Reentrancy"], findings=["Reentrancy x"])
    publish_dataset(repo)
    env_without_judge.OPENAI_API_KEY = "k"
    run = audit_run_create(scanner=result.scanner, judge="openai", enqueue=False)
    assert run.judge_record is not None and run.judge_record.name == "openai"
    assert board_judge_key(run) == "openai:env-model"
    legacy = audit_run_create(scanner=result.scanner, judge="offline", enqueue=False)
    assert legacy.judge_record is not None and legacy.judge_record.name == "offline"
    assert board_judge_key(legacy) == "offline"


def test_unknown_judge_name_lists_the_records() -> None:
    _, result = repo_with_scan(truths=["a"], findings=["b"])
    JudgeRecord.objects.create(name="mine", kind="openai", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(AuditRunError, match=r"judge: 'minr' is not one of .*mine"):
        audit_run_create(scanner=result.scanner, judge="minr", enqueue=False)


def test_judge_add_refuses_bad_fields_naming_them() -> None:
    with pytest.raises(CommandError, match="base_url: 'localhost:8080' is not an http"):
        call_command("judge_add", "x", "--base-url", "localhost:8080", stdout=io.StringIO())
    with pytest.raises(CommandError, match="name: "):
        call_command("judge_add", "has:colon", stdout=io.StringIO())
    with pytest.raises(CommandError, match="api_key_env: "):
        call_command("judge_add", "y", "--api-key-env", "sk-abc 123", stdout=io.StringIO())
    with pytest.raises(CommandError, match="concurrency: must be positive"):
        call_command("judge_add", "z", "--concurrency", "0", stdout=io.StringIO())
    call_command("judge_add", "ok", stdout=io.StringIO())
    with pytest.raises(CommandError, match=r"name: .*already exists"):
        call_command("judge_add", "ok", stdout=io.StringIO())
    assert set(JudgeRecord.objects.values_list("name", flat=True)) == {"offline", "openai", "ok"}


def test_admin_check_probes_the_server_and_stores_what_it_found(
    admin_client: Any, env_without_judge: Any
) -> None:
    with FakeOpenAI(judge_or_probe, pages={"/props": {"default_generation_settings": {}}}) as srv:
        record = JudgeRecord.objects.create(
            name="local",
            kind="openai",
            base_url=srv.base_url,
            model="local-model",
            api_key_env="LOCAL_JUDGE_KEY",
            temperature=0.2,
        )
        url = reverse("admin:benchmarks_app_judgerecord_changelist")
        response = admin_client.post(
            url,
            {"action": "check_judges", "_selected_action": [record.pk]},
            follow=True,
        )
    assert len(srv.requests) >= 1 and srv.requests[0]["model"] == "local-model"
    assert srv.requests[0]["temperature"] == 0.2
    record.refresh_from_db()
    assert record.probed_at is not None
    assert record.probe["ok"] is True
    assert record.probe["response_format"] == "json_schema"
    text = " ".join(str(m) for m in response.context["messages"])
    assert "local: model local-model, format json_schema" in text
    assert SECRET not in text and SECRET not in response.content.decode()
    assert SECRET not in json.dumps(record.probe)


def test_admin_check_says_when_the_server_is_not_there(
    admin_client: Any, env_without_judge: Any
) -> None:
    record = JudgeRecord.objects.create(
        name="gone", kind="openai", base_url="http://127.0.0.1:9/v1", model="m"
    )
    response = admin_client.post(
        reverse("admin:benchmarks_app_judgerecord_changelist"),
        {"action": "check_judges", "_selected_action": [record.pk]},
        follow=True,
    )
    record.refresh_from_db()
    assert record.probe["ok"] is False and record.probe["problem"].startswith("probe failed")
    text = " ".join(str(m) for m in response.context["messages"])
    assert "gone: not usable: the server at http://127.0.0.1:9/v1" in text


def test_admin_change_page_shows_the_variable_name_never_the_key(
    admin_client: Any, env_without_judge: Any
) -> None:
    record = JudgeRecord.objects.create(
        name="local", kind="openai", base_url="http://127.0.0.1:9/v1", api_key_env="LOCAL_JUDGE_KEY"
    )
    page = admin_client.get(
        reverse("admin:benchmarks_app_judgerecord_change", args=[record.pk])
    ).content.decode()
    assert "LOCAL_JUDGE_KEY" in page and SECRET not in page


def test_assess_checklist_judge_name_runs_on_the_records_server(env_without_judge: Any) -> None:
    from benchmarks_app.models import ChecklistScore
    from tests.benchmarks_app.checklist.conftest import SAMPLE
    from tests.factories.checklist import ChallengeFactory

    ChallengeFactory()

    def handler(body: dict[str, Any]) -> dict[str, Any]:
        return completion(json.dumps({"correct": True, "feedback": "Consistent."}))

    with FakeOpenAI(handler) as server:
        JudgeRecord.objects.create(
            name="local",
            kind="openai",
            base_url=server.base_url,
            model="local-model",
            api_key_env="LOCAL_JUDGE_KEY",
        )
        call_command(
            "assess_checklist",
            str(SAMPLE / "demo" / "genuine.tex"),
            "--judge",
            "local",
            "--wait",
            stdout=io.StringIO(),
        )
    run = EvaluationRun.objects.get()
    assert run.status == "succeeded", run.error
    assert run.judge_record is not None and run.judge_record.name == "local"
    assert len(server.requests) >= 15
    assert {r["model"] for r in server.requests} == {"local-model"}
    assert ChecklistScore.objects.get(run=run).c_g == 1.0
