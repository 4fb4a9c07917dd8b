"""A worker with no OPENAI_* settings at all runs a run of a judge record, as the record says.

The case of issue 24: a run made for a local model was taken by a worker (``make demo``'s)
whose environment knew nothing of that model, and retried for ever against the public API.
Here a real ``manage.py qcluster`` started without any ``OPENAI_*`` variable judges the run on
the record's server, with its model and the key from the variable the record names.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest
from django.db import connection

from benchmarks_app.models import EvaluationRun, JudgeCall, RunStatus
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.services import runs as run_services
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.judge_records import judge_record_create
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.benchmarks_app.judging.helpers import judge_or_probe
from tests.benchmarks_app.queue.test_qcluster_workers import ROOT, _database_url
from tests.factories.audit import repo_with_scan
from tests.scoring.judges.fake_openai import FakeOpenAI

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def bare_worker() -> Any:
    if connection.vendor != "postgresql" or not os.environ.get("REDIS_URL"):
        pytest.skip("needs PostgreSQL and REDIS_URL: run by .ci/run's second pass")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": _database_url(),
            "Q_SYNC": "0",
            "Q_WORKERS": "1",
            "DEBUG": "0",
            "JUDGE_MODEL": "o4-mini",  # what the demo's worker would ask: not the record's
            "LOCAL_JUDGE_KEY": "local-key",
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    yield proc
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_worker_without_openai_settings_runs_a_judge_record(bare_worker: Any) -> None:
    from django_q.tasks import async_task

    repo, result = repo_with_scan(
        truths=["Reentrancy in withdraw", "Oracle staleness"],
        findings=["Reentrancy when withdrawing", "Info note"],
    )
    publish_dataset(repo)
    with FakeOpenAI(judge_or_probe) as server:
        judge_record_create(
            name="local-judge",
            base_url=server.base_url,
            model="local-model",
            api_key_env="LOCAL_JUDGE_KEY",
            max_answer_tokens=256,
            concurrency=2,
        )
        run = audit_run_create(scanner=result.scanner, judge="local-judge", enqueue=False)
        for piece in run_services.run_pieces_prepare(run=run):
            async_task(run_services.PIECE_TASK, piece.pk, sync=False)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            run.refresh_from_db()
            if run.status not in ACTIVE_STATUSES:
                break
            time.sleep(0.5)
    run = EvaluationRun.objects.get(pk=run.pk)
    assert bare_worker.poll() is None, "the qcluster process died"
    assert run.status == RunStatus.SUCCEEDED and run.is_complete, (run.status, run.error)
    assert run.attempts == 1
    judged = [r for r in server.requests if len(r["messages"]) > 1]
    assert len(judged) == 4
    assert {r["model"] for r in server.requests} == {"local-model"}
    assert {r.get("max_completion_tokens", r.get("max_tokens")) for r in judged} == {256}
    assert JudgeCall.objects.filter(run=run, status="ok").count() == 4
