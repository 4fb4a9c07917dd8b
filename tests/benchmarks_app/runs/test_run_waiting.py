"""A run that waits says why, on its pages, ``GET /api/runs/<id>/`` and the commands' ``--wait``
(issue 37, item 5): its judge does not answer (a worker rides the outage out, then the run is
paused until the next try), or no worker has picked it up. One selector says it
(``selectors.run_health.run_waiting_reason``); the pages, the API and the commands render it.
"""

from __future__ import annotations

import html
import io
import json
import re
import socket
import threading
import time
import types
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.sessions.backends.base import UpdateError
from django.core.management import CommandError, call_command
from django.db import OperationalError, connections
from django.test import Client
from django.utils import timezone

from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece, RunStatus
from benchmarks_app.selectors import run_health
from benchmarks_app.services import piece_running
from benchmarks_app.services import runs as run_services
from scoring.judges.llm import LLMConfig, make_client, structured_call
from tests.benchmarks_app.judging.helpers import QUESTION
from tests.benchmarks_app.sqlite_reads import reads_take_no_table_locks
from tests.factories.common import RunFactory, UserFactory
from tests.factories.probes import ProbeFactory, ProbeSuiteFactory

CLOCK = r"\d\d:\d\d:\d\d"


@pytest.fixture
def no_sync_queue(monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    """Tasks wait in django-q2's ORM queue, as with real workers (none is running)."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(Conf, "ORM", "default")
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": False}


def _closed_port() -> int:
    """A local port nobody listens on: every connection to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _retrying(read: Callable[[], Any]) -> Any:
    """``read()``, tried again while SQLite's shared-cache test database says a table is locked
    (the worker thread writes beside this one; PostgreSQL never says so)."""
    for _ in range(50):
        try:
            return read()
        except (OperationalError, UpdateError) as exc:
            if isinstance(exc, OperationalError) and "locked" not in str(exc):
                raise
            time.sleep(0.1)
    return read()


def _poll(read: Callable[[], Any], until: Callable[[Any], bool], *, within_s: float) -> Any:
    # The worker thread records the outage beside these reads (see reads_take_no_table_locks).
    with reads_take_no_table_locks():
        deadline = time.monotonic() + within_s
        value = _retrying(read)
        while not until(value):
            assert time.monotonic() < deadline, f"not seen within {within_s} s; last: {value!r}"
            time.sleep(0.1)
            value = _retrying(read)
        return value


@pytest.fixture
def refusing_judge_run(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[Any]:
    """A probe run whose processor asks a judge that refuses every connection, processed by
    a worker thread: the breaker opens at the first refusal, and the call waits up to 3 s
    (its patience) before the run pauses."""
    settings.RUN_CANCEL_POLL_S = 0.1  # the lease keeper records the outage this often
    owner = UserFactory.create()
    run = EvaluationRun.objects.create(benchmark="probes", judge="rules", created_by=owner)
    config = LLMConfig(
        model="refused-model",
        base_url=f"http://127.0.0.1:{_closed_port()}/v1",
        timeout_s=2,
        max_retries=0,
        breaker_threshold=1,
        backoff_base_s=0.3,
        backoff_max_s=0.6,
        outage_patience_s=3,
    )

    def process(run: EvaluationRun) -> None:
        async def ask() -> Any:
            client = make_client(config)
            try:
                return await structured_call(client, config=config, **QUESTION)
            finally:
                await client.close()

        async_to_sync(ask)()
        run_services.run_finish(run=run)

    monkeypatch.setitem(run_services.RUN_KINDS, "probes", run_services.RunKind(process="x.p"))
    monkeypatch.setattr(piece_running, "import_string", lambda path: process)
    run_services.run_pieces_prepare(run=run)
    # Signed in before the worker thread starts: a session written beside the worker's writes
    # got the worker "database table is locked" on SQLite's shared-cache test database (no
    # busy wait there), and the run never recorded its outage (seen in a clean-clone CI run).
    client = Client()
    client.force_login(owner)

    def work() -> None:
        try:
            run_services.run_process_here(run=run)
        finally:
            connections.close_all()

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    yield types.SimpleNamespace(run=run, client=client, worker=worker)
    worker.join(timeout=30)


@pytest.mark.django_db(transaction=True)
def test_a_refusing_judge_is_named_with_since_and_next_try_then_the_paused_run_says_when(
    refusing_judge_run: Any,
) -> None:
    run, client = refusing_judge_run.run, refusing_judge_run.client

    def api_waiting() -> Any:
        return client.get(f"/api/runs/{run.pk}/").json()["waiting"]

    # While the worker rides the outage out, the run is still "running": the API says why.
    seen = _poll(api_waiting, lambda w: bool(w) and w["kind"] == "judge", within_s=8)
    assert _retrying(lambda: EvaluationRun.objects.get(pk=run.pk).status) == RunStatus.RUNNING
    assert re.search(
        rf"^Judge rules unreachable since {CLOCK}, (next try at {CLOCK}|trying it now)",
        seen["text"],
    ), seen
    assert "Connection error" in seen["text"]
    assert re.search(rf"the run pauses at {CLOCK} \(JUDGE_OUTAGE_PATIENCE_S\)", seen["text"])
    assert seen["since"] is not None
    # The page and its polled status render the same line (one selector).
    status = _retrying(lambda: client.get(f"/runs/{run.pk}/status/").json()["waiting"])
    assert status["kind"] == "judge" and status["since"] == seen["since"]
    page = html.unescape(_retrying(lambda: client.get(f"/runs/{run.pk}/").content.decode()))
    assert re.search(rf'data-role="waiting">Judge rules unreachable since {CLOCK}', page)

    # Past its patience the piece is parked: the run waits, and says until when.
    refusing_judge_run.worker.join(timeout=30)
    assert not refusing_judge_run.worker.is_alive()
    assert EvaluationRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    paused = api_waiting()
    piece = RunPiece.objects.get(run=run)
    assert piece.status == PieceStatus.WAITING and piece.retry_at is not None
    assert paused["kind"] == "judge"
    # The outage began when the worker first met it, not when the run was paused.
    assert paused["since"] == seen["since"]
    retry = f"{timezone.localtime(piece.retry_at):%H:%M:%S}"
    assert re.search(
        rf"^Judge rules unreachable since {CLOCK}, next try at {retry} \(.*\)\. Paused meanwhile",
        paused["text"],
    ), paused
    assert paused["next_try_at"] == piece.retry_at.isoformat()


@pytest.mark.django_db
def test_a_queued_run_says_no_worker_has_picked_it_up_on_page_api_and_status(
    client: Client, monkeypatch: pytest.MonkeyPatch, no_sync_queue: None
) -> None:
    owner = UserFactory.create()
    run = RunFactory.create(created_by=owner)
    queued_at = timezone.now() - timedelta(seconds=5)
    RunPiece.objects.create(run=run, status=PieceStatus.QUEUED, enqueued_at=queued_at)
    client.force_login(owner)

    waiting = client.get(f"/api/runs/{run.pk}/").json()["waiting"]
    clock = f"{timezone.localtime(queued_at):%H:%M:%S}"
    assert waiting["kind"] == "worker"
    assert waiting["text"] == (
        f"No worker has picked it up (queued since {clock}): no qcluster is running. An "
        "operator starts one with: python manage.py qcluster"
    )
    assert client.get(f"/runs/{run.pk}/status/").json()["waiting"] == waiting
    for page in (f"/runs/{run.pk}/", f"/audit/runs/{run.pk}/"):
        assert waiting["text"] in html.unescape(client.get(page).content.decode()), page

    # With a live cluster, a piece is given RUN_PICKUP_GRACE_S before anything is said.
    monkeypatch.setattr(run_health, "live_clusters", lambda: [object()])
    assert client.get(f"/api/runs/{run.pk}/").json()["waiting"] is None
    stale = timezone.now() - timedelta(seconds=95)
    RunPiece.objects.filter(run=run).update(enqueued_at=stale)
    late = client.get(f"/api/runs/{run.pk}/").json()["waiting"]
    assert late["text"] == (
        f"No worker has picked it up since {timezone.localtime(stale):%H:%M:%S}: every "
        "worker is busy with other runs, or none can read the queue."
    )
    # Taken: nothing to say while it works; a run that has ended says nothing either.
    RunPiece.objects.filter(run=run).update(
        status=PieceStatus.RUNNING, lease_expires_at=timezone.now() + timedelta(seconds=60)
    )
    assert client.get(f"/api/runs/{run.pk}/").json()["waiting"] is None
    EvaluationRun.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    assert client.get(f"/api/runs/{run.pk}/").json()["waiting"] is None


@pytest.mark.django_db
def test_wait_prints_why_the_run_waits_and_a_cancel_says_what_was_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, no_sync_queue: None
) -> None:
    """``submit_responses --wait`` watches a run a cluster should take: it prints the judge's
    outage as the worker records it, and how the run ended when it is cancelled."""
    suite = ProbeSuiteFactory.create(name="tiny")
    ProbeFactory.create(suite=suite, probe_id="p1")
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"probe_id": "p1", "output": "No."}) + "\n")
    monkeypatch.setattr(run_services, "live_clusters", lambda: [object()])  # watch, not work
    monkeypatch.setattr(run_services, "runs_sweep", lambda **_: None)
    ticks: list[int] = []
    # Between two full looks the command sleeps in this many steps, the run's status read
    # after each (run_services.WATCH_STATUS_S).
    steps = round(0.2 / run_services.WATCH_STATUS_S)

    def sleep(_: float) -> None:
        # The worker, as the command watches: it meets the judge down, then the run is cancelled.
        ticks.append(1)
        run = EvaluationRun.objects.get()
        if len(ticks) == 1:
            # (The test's transaction never commits: the pieces the commit would cut, here.)
            run_services.run_pieces_prepare(run=run)
            RunPiece.objects.filter(run=run).update(
                status=PieceStatus.RUNNING,
                lease_expires_at=timezone.now() + timedelta(seconds=60),
                judge_outage={
                    "since": "2026-01-02T17:42:05+00:00",
                    "next_try": "2026-01-02T17:42:35+00:00",
                    "gives_up_at": "2026-01-02T17:47:05+00:00",
                    "error": "Connection error.",
                },
            )
        elif len(ticks) == 2 * steps + 1:  # after two full looks: the outage was told
            run_services.run_cancel(run=run)

    monkeypatch.setattr(
        run_services, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=sleep)
    )
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as ended:
        call_command(
            "submit_responses",
            str(responses),
            "--suite",
            "tiny",
            "--model",
            "m",
            "--wait",
            stdout=out,
            stderr=err,
        )
    run = EvaluationRun.objects.get()
    told = err.getvalue().splitlines()
    assert told[0].startswith(f"run #{run.pk}: No worker has picked it up (queued since ")
    assert told[1] == (
        f"run #{run.pk}: Judge {run.judge_label} unreachable since 17:42:05, next try at "
        "17:42:35 (Connection error.). If it stays down, the run pauses at 17:47:05 "
        "(JUDGE_OUTAGE_PATIENCE_S) and tries again every 60 s."
    )
    assert re.fullmatch(
        rf"Run #{run.pk} cancelled: cancelled at {CLOCK} with 0/\d+ items judged; what was "
        "judged is kept, and a resume judges only what is missing",
        str(ended.value),
    )


@pytest.mark.django_db
def test_a_run_parked_on_a_full_disk_or_left_by_its_worker_says_so() -> None:
    run = RunFactory.create(status=RunStatus.WAITING)
    retry = timezone.now() + timedelta(seconds=60)
    piece = RunPiece.objects.create(
        run=run,
        status=PieceStatus.WAITING,
        retry_at=retry,
        error="Write failed: disk full (OSError: [Errno 28] No space left on device)",
    )
    reason = run_health.run_waiting_reason(run)
    assert reason is not None and reason.kind == "storage"
    assert reason.text == (
        "Waiting for storage: disk full (OSError: [Errno 28] No space left on device); next "
        f"try at {timezone.localtime(retry):%H:%M:%S}."
    )
    assert reason.next_try_at == retry
    # A worker that died holding the piece: its lease ran out, the sweeper will hand it out.
    gone = timezone.now() - timedelta(seconds=5)
    RunPiece.objects.filter(pk=piece.pk).update(
        status=PieceStatus.RUNNING, retry_at=None, error="", lease_expires_at=gone
    )
    EvaluationRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    run.refresh_from_db()
    reason = run_health.run_waiting_reason(run)
    assert reason is not None and reason.kind == "worker"
    assert reason.text.startswith(
        f"Its worker stopped answering (its lease ran out at {timezone.localtime(gone):%H:%M:%S})"
    )


@pytest.mark.django_db
def test_a_judge_quiet_before_its_breaker_opens_is_said_with_its_failed_tries(
    settings: Any,
) -> None:
    # Before the breaker opens, the pieces record no outage; the run's page said nothing while
    # the worker waited and retried (issue 37 item 8). The ledger's call in flight says since
    # when, and the errors since the judge's last answer are the tries that failed.
    from benchmarks_app.models.judging import JudgeCall, JudgeCallStatus

    settings.RUN_JUDGE_QUIET_AFTER_S = 10
    run = RunFactory.create(status=RunStatus.RUNNING)
    RunPiece.objects.create(
        run=run,
        status=PieceStatus.RUNNING,
        lease_expires_at=timezone.now() + timedelta(seconds=60),
    )
    call = {"run": run, "judge": "openai", "prompt_hash": "h"}
    answered = JudgeCall.objects.create(**call, status=JudgeCallStatus.OK)
    pending = JudgeCall.objects.create(**call, status=JudgeCallStatus.PENDING)
    assert run_health.run_waiting_reason(run) is None  # asked just now: working
    for _ in range(2):
        JudgeCall.objects.create(**call, status=JudgeCallStatus.ERROR)
    asked = timezone.now() - timedelta(seconds=42)
    JudgeCall.objects.filter(pk=answered.pk).update(created_at=asked - timedelta(seconds=5))
    JudgeCall.objects.filter(pk=pending.pk).update(created_at=asked)
    reason = run_health.run_waiting_reason(run)
    assert reason is not None and reason.kind == "judge" and reason.since == asked
    assert re.fullmatch(
        rf"Calling judge {re.escape(run.judge_label)}; no answer for 4[23] s \(asked at "
        rf"{timezone.localtime(asked):%H:%M:%S}\); 2 failed tries since its last answer, "
        r"retrying\.",
        reason.text,
    ), reason.text
    # Answered: nothing in flight, nothing to say.
    JudgeCall.objects.filter(pk=pending.pk).update(status=JudgeCallStatus.OK)
    assert run_health.run_waiting_reason(run) is None
