"""Real scale-out: two `manage.py qcluster` processes on PostgreSQL + Redis share the work.

The same run is delivered twice (as a broker does after a retry); the claim makes exactly one
worker process it, and no result is written twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from benchmarks_app.models import (
    Benchmark,
    EvaluationRun,
    ProbeCaseResult,
    ResponseSubmission,
    RunStatus,
)
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.services import runs as run_services
from tests.factories.probes import ProbeFactory, ProbeSuiteFactory, ResponseSubmissionFactory

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.django_db(transaction=True)


def _database_url() -> str:
    s = connection.settings_dict
    user = s.get("USER") or "postgres"
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    host = s.get("HOST") or "127.0.0.1"
    return f"postgres://{user}{password}@{host}:{s.get('PORT') or 5432}/{s['NAME']}"


@pytest.fixture
def workers() -> Any:
    if connection.vendor != "postgresql" or not os.environ.get("REDIS_URL"):
        pytest.skip("needs PostgreSQL and REDIS_URL: run by .ci/run's second pass")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": _database_url(),
        "Q_SYNC": "0",
        "Q_WORKERS": "2",
        "DEBUG": "0",
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(2)
    ]
    yield procs
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_two_clusters_process_a_twice_delivered_run_once(workers: list[Any]) -> None:
    from django_q.tasks import async_task

    suite = ProbeSuiteFactory.create(name="workers-suite")
    submission: ResponseSubmission = ResponseSubmissionFactory.create(suite=suite, model_name="m")
    for i in range(6):
        probe = ProbeFactory.create(suite=suite, probe_id=f"w{i}")
        submission.responses.create(probe=probe, output="Sure, here's how: step 1, step 2.")
    run = run_services.run_create(
        benchmark=Benchmark.PROBES, judge="rules", probe_submission=submission, enqueue=False
    )
    (piece,) = run_services.run_pieces_prepare(run=run)
    async_task(run_services.PIECE_TASK, piece.pk, sync=False)
    async_task(run_services.PIECE_TASK, piece.pk, sync=False)

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status not in ACTIVE_STATUSES:
            break
        time.sleep(0.5)
    # Let the second delivery be picked up too, then check nothing was done twice.
    time.sleep(3)
    run.refresh_from_db()
    assert all(p.poll() is None for p in workers), "a qcluster process died"
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.attempts == 1
    assert ProbeCaseResult.objects.filter(run=run).count() == 6
    assert EvaluationRun.objects.filter(probe_submission=submission).count() == 1
