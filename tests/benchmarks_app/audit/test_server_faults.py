"""An audit run against a server that answers 200 with something that is not a chat
completion ends failed with the server's fault as its cause: the base URL and the first bytes,
in the CLI, the API and the ledger; no traceback, no ledger row left pending (issue 24)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from benchmarks_app.models import EvaluationRun, JudgeCall, RunStatus
from benchmarks_app.selectors.runs import run_failure_causes
from scoring.judges import failures
from tests.factories.audit import repo_with_scan
from tests.scoring.judges.fake_openai import FakeOpenAI
from tests.scoring.judges.test_server_faults import MODES

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("mode", list(MODES))
def test_an_audit_run_names_the_server_and_its_first_bytes(
    mode: str, openai_settings: Any, client: Any, staff: Any
) -> None:
    body, first_bytes = MODES[mode]
    repo_with_scan(truths=["Reentrancy in withdraw", "Oracle staleness"], findings=["Gas"])
    stdout, stderr = io.StringIO(), io.StringIO()
    with FakeOpenAI(lambda _: body) as server:
        openai_settings.OPENAI_BASE_URL = server.base_url
        openai_settings.JUDGE_PROBE = True
        with pytest.raises(CommandError) as excinfo:
            call_command(
                "evaluate_audit",
                "--scanner",
                "tool",
                "--judge",
                "openai",
                "--wait",
                stdout=stdout,
                stderr=stderr,
            )
    run = EvaluationRun.objects.get()
    assert run.status == RunStatus.FAILED and run.failed_items >= 1
    causes = run_failure_causes(run=run)
    assert [(c.kind, c.count, c.resumable) for c in causes] == [
        (failures.SERVER, run.failed_items, False)
    ]
    assert server.base_url in causes[0].message and first_bytes in causes[0].message
    text = str(excinfo.value) + stdout.getvalue() + stderr.getvalue()
    assert "Traceback" not in text and "AttributeError" not in text
    assert f"x server: the server at {server.base_url}" in stderr.getvalue()
    # Every request is on record as an error with what the server sent; none pending.
    calls = JudgeCall.objects.filter(run=run)
    assert calls.exists()
    assert set(calls.values_list("status", flat=True)) == {"error"}
    assert all(c.raw_response.startswith(body.body.decode()[:10]) for c in calls)
    # The probe saw the same fault and the run records it.
    probe = run.judge_config["request"]["probe"]
    assert server.base_url in probe["fault"]
    # The --wait output shows what the calls cost.
    assert f"judge calls: {calls.count()} new, 0 cached" in stdout.getvalue()
    client.force_login(staff)
    data = client.get(f"/api/runs/{run.pk}/").json()
    assert [c["kind"] for c in data["failure_causes"]] == [failures.SERVER]
    assert data["judge_usage"]["calls_new"] == calls.count()
