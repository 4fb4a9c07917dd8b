# mypy: disable-error-code="arg-type,attr-defined"
"""A run made with a curated judge record is named by the record's name wherever a judge is
named (issue 37 item 1): the admin's message, the run pages, the runs API, the CLI and the
ledger, all from ``EvaluationRun.judge_label``; runs of the default records keep their own
spelling (``offline``, ``openai:MODEL``)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.urls import reverse

from benchmarks_app.models import Benchmark, EvaluationRun, JudgeRecord
from benchmarks_app.services.runs import run_create
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.benchmarks_app.judging.helpers import judge_or_probe
from tests.factories.audit import repo_with_scan
from tests.factories.common import StaffFactory
from tests.scoring.judges.fake_openai import FakeOpenAI

pytestmark = pytest.mark.django_db


@pytest.fixture
def judge_env(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    settings.JUDGE_MAX_RETRIES = 1
    settings.JUDGE_BACKOFF_BASE_S = 0.001
    settings.JUDGE_BACKOFF_MAX_S = 0.002
    monkeypatch.setenv("LOCAL_JUDGE_KEY", "sk-local")
    return settings


def test_a_records_run_is_named_by_the_record_on_every_surface(client: Any, judge_env: Any) -> None:
    repo, _ = repo_with_scan(
        truths=["Reentrancy in withdraw", "Oracle staleness"],
        findings=["Reentrancy when withdrawing", "Info note"],
    )
    publish_dataset(repo)
    with FakeOpenAI(judge_or_probe) as server:
        call_command(
            "judge_add",
            "smollm",
            "--base-url",
            server.base_url,
            "--model",
            "SmolLM2-135M",
            "--api-key-env",
            "LOCAL_JUDGE_KEY",
            stdout=io.StringIO(),
        )
        out = io.StringIO()
        call_command(
            "evaluate_audit", "--scanner", "tool", "--judge", "smollm", "--wait", stdout=out
        )
    run = EvaluationRun.objects.get()
    assert run.status == "succeeded", run.error
    assert run.judge == "openai" and run.judge_label == "smollm"

    # The CLI: the start line and the end line.
    printed = out.getvalue()
    assert "with judge smollm" in printed and "with judge openai" not in printed
    assert f"Run #{run.pk} succeeded (judge smollm)" in printed

    # The run pages.
    detail = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "<dd>smollm" in detail
    audit_page = client.get(reverse("audit:run", args=[run.pk])).content.decode()
    assert "Judge smollm" in audit_page and "Judge openai" not in audit_page

    # The API: a new field; the existing one is unchanged.
    body = client.get(reverse("api:run-detail", args=[run.pk])).json()
    assert body["judge_label"] == "smollm" and body["judge"] == "openai"
    listed = client.get(reverse("api:run-list")).json()["results"]
    assert [r["judge_label"] for r in listed] == ["smollm"]

    # The ledger and the runs list in the admin.
    client.force_login(StaffFactory(is_superuser=True))
    ledger = client.get(reverse("admin:benchmarks_app_judgecall_changelist")).content.decode()
    assert "smollm (openai)" in ledger
    runs = client.get(reverse("admin:benchmarks_app_evaluationrun_changelist")).content.decode()
    assert "smollm (openai)" in runs


def test_the_admin_message_names_the_record(client: Any) -> None:
    JudgeRecord.objects.create(
        name="slowjudge", kind="openai", base_url="http://127.0.0.1:9/v1", model="m"
    )
    repo, result = repo_with_scan(truths=["Reentrancy in withdraw"], findings=["Other"])
    publish_dataset(repo)
    client.force_login(StaffFactory(is_superuser=True))
    done = client.post(
        reverse("admin:benchmarks_app_repo_changelist"),
        {
            "action": "evaluate_with",
            "_selected_action": [repo.pk],
            "evaluate": "1",
            "scanner": result.scanner.pk,
            "judge": "slowjudge",
        },
    )
    assert done.status_code == 302
    said = [str(m) for m in get_messages(done.wsgi_request)]
    assert any("with judge slowjudge." in m for m in said), said


def test_runs_without_a_board_name_take_the_records_name() -> None:
    """Probe and checklist runs keep no board name in their configuration: the label reads
    the record; the default records leave the run's own spelling (it carries the model)."""
    curated = JudgeRecord.objects.create(name="slowjudge", kind="openai", model="m")
    default = JudgeRecord.objects.get(name="openai")
    by_curated = run_create(
        benchmark=Benchmark.PROBES, judge="openai:m", judge_record=curated, enqueue=False
    )
    by_default = run_create(
        benchmark=Benchmark.PROBES, judge="openai:m", judge_record=default, enqueue=False
    )
    plain = run_create(benchmark=Benchmark.PROBES, judge="offline", enqueue=False)
    assert by_curated.judge_label == "slowjudge"
    assert by_default.judge_label == "openai:m"
    assert plain.judge_label == "offline"
