"""A fair queue across users (issue 40, item 8): with one user's large runs queued first,
another user's one-repo run is taken within a few pieces, however large those runs are.

Measured in pieces, not seconds: the broker is played first in, first out (each piece's task
in the order it was queued), each task a worker slot of ``RUN_PIECES_PER_PROCESS`` pieces, and
the order the pieces are processed in is recorded.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece, RunStatus
from benchmarks_app.selectors.run_queue import queued_pieces_fair_order
from benchmarks_app.services import piece_running, scheduling
from benchmarks_app.services.run_state import RunKind
from tests.factories.common import UserFactory

pytestmark = pytest.mark.django_db


def _recording_kind(monkeypatch: Any) -> list[tuple[int, str]]:
    order: list[tuple[int, str]] = []

    def process(run: EvaluationRun, key: str) -> None:
        order.append((run.pk, key))

    monkeypatch.setitem(piece_running.RUN_KINDS, "probes", RunKind(plan="x.plan", process="x.p"))
    monkeypatch.setattr(piece_running, "import_string", lambda path: process)
    return order


def _run(user: Any, pieces: int, queued_at: Any) -> tuple[EvaluationRun, list[RunPiece]]:
    run = EvaluationRun.objects.create(benchmark="probes", judge="rules", created_by=user)
    made = [
        RunPiece.objects.create(run=run, key=f"repo{i:02}", enqueued_at=queued_at)
        for i in range(pieces)
    ]
    return run, made


def _small_runs_position(monkeypatch: Any, repos: int) -> tuple[int, list[tuple[int, str]]]:
    order = _recording_kind(monkeypatch)
    big, small = UserFactory(), UserFactory()
    start = timezone.now() - timedelta(minutes=5)
    tasks: list[RunPiece] = []
    for n in range(3):  # the large runs, queued first
        tasks += _run(big, repos, start + timedelta(seconds=n))[1]
    little, (piece,) = _run(small, 1, start + timedelta(seconds=10))
    tasks.append(piece)
    with override_settings(RUN_PIECES_PER_PROCESS=4):
        for task in tasks:  # the broker: first in, first out
            scheduling.piece_process(piece_id=task.pk)
    assert len(order) == 3 * repos + 1, "every piece processed once"
    assert not RunPiece.objects.exclude(status=PieceStatus.DONE).exists()
    assert EvaluationRun.objects.get(pk=little.pk).status == RunStatus.SUCCEEDED
    return order.index((little.pk, "repo00")), order


@pytest.mark.parametrize("repos", [3, 11, 25])
def test_a_one_repo_run_is_taken_within_a_few_pieces_of_large_runs_queued_first(
    monkeypatch: Any, repos: int
) -> None:
    position, order = _small_runs_position(monkeypatch, repos)
    # Its turn comes right after the first piece of the first slot (first in, first out put
    # it behind all 3 x repos pieces): a bound that does not grow with the large runs.
    assert position <= 1, order


def test_the_order_serves_the_submitter_with_fewest_pieces_running_first() -> None:
    busy, idle, other = UserFactory(), UserFactory(), UserFactory()
    old = timezone.now() - timedelta(minutes=5)
    running_run, running = _run(busy, 3, old)
    RunPiece.objects.filter(run=running_run).update(
        status=PieceStatus.RUNNING,
        started_at=old,
        lease_expires_at=timezone.now() + timedelta(minutes=1),
    )
    _, busy_queued = _run(busy, 2, old)
    _, idle_queued = _run(idle, 1, old + timedelta(seconds=30))
    # Never served, queued last, and no submitter at all (a script's run): served before busy.
    anonymous = RunPiece.objects.create(
        run=EvaluationRun.objects.create(benchmark="probes", judge="rules"),
        key="x",
        enqueued_at=old + timedelta(seconds=60),
    )
    _, other_queued = _run(other, 1, old + timedelta(seconds=90))
    assert queued_pieces_fair_order() == [
        idle_queued[0].pk,
        anonymous.pk,
        other_queued[0].pk,
        *[p.pk for p in busy_queued],
    ]
    assert running  # (held by another worker: not in the order)
