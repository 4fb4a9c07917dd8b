"""A run processed inside a transaction (``run_wait`` from a test or a script that has not
committed) keeps its pieces however long they take.

The lease keeper renews on its own connection, which cannot see rows the caller has not
committed: on PostgreSQL its renewal updated no row, it called the lease taken over, and a
piece that outlasted a third of its lease ended as "lost". ``run_wait`` then handed it out
again and again (a clean-clone CI run's real-LLM audit at three votes, whose pieces took
over 200 s against a 600 s lease, looped for ten minutes after the judge's last answer).
Nobody else can take a piece nobody else can see: inside a transaction, nothing is renewed.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece, RunStatus
from benchmarks_app.services import piece_running
from benchmarks_app.services import runs as run_services
from tests.factories.common import UserFactory

# The piece outlasts several renewals: one is due every third of the lease.
LEASE_S = 0.9
PIECE_S = 1.5


@pytest.mark.django_db
def test_a_piece_outlasting_its_renewals_inside_a_transaction_ends_its_run(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.RUN_LEASE_S = LEASE_S
    settings.RUN_CANCEL_POLL_S = 0.05
    owner = UserFactory.create()
    run = EvaluationRun.objects.create(benchmark="probes", judge="rules", created_by=owner)
    calls: list[int] = []

    def process(run: EvaluationRun) -> None:
        calls.append(run.pk)
        time.sleep(PIECE_S)
        run_services.run_finish(run=run)

    monkeypatch.setitem(run_services.RUN_KINDS, "probes", run_services.RunKind(process="x.p"))
    monkeypatch.setattr(piece_running, "import_string", lambda path: process)
    run_services.run_pieces_prepare(run=run)

    run_services.run_process_here(run=run)

    run.refresh_from_db()
    piece = RunPiece.objects.get(run=run)
    assert (run.status, piece.status, piece.attempt) == (RunStatus.SUCCEEDED, PieceStatus.DONE, 1)
    assert calls == [run.pk], "the piece was processed more than once"
