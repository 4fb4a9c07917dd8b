"""A run's pieces are handed out by weight (issue 38): heaviest first to the queue, and shared
between a ``--wait`` command's processes so that the longest chain is not crowded."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks_app.models import EvaluationRun, RunPiece, Scanner
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.audit.processing import audit_piece_weights
from benchmarks_app.services.run_state import run_piece_weights
from benchmarks_app.services.runs import run_pieces_prepare
from benchmarks_app.services.scheduling import shares_by_weight
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import repo_with_scan


def test_the_heaviest_piece_gets_a_share_of_its_own_when_the_rest_weigh_as_much() -> None:
    pieces = [(1, 10), (2, 100), (3, 30), (4, 40), (5, 20)]
    # Round-robin by id would have put 1, 3 and 5 beside the heaviest (2 in the second share).
    assert shares_by_weight(pieces, 2) == [[2], [4, 3, 5, 1]]


def test_shares_stay_balanced_and_lose_no_piece() -> None:
    pieces = [(pk, weight) for pk, weight in enumerate([7, 3, 9, 1, 4, 6, 2, 8, 5, 5], start=1)]
    shares = shares_by_weight(pieces, 3)
    assert sorted(pk for share in shares for pk in share) == list(range(1, 11))
    weight = dict(pieces)
    loads = [sum(weight[pk] for pk in share) for share in shares]
    # The rule's bound: no share above the lightest by more than its own lightest piece.
    assert max(loads) - min(loads) <= max(weight.values())
    for share in shares:  # each share heaviest first
        assert [weight[pk] for pk in share] == sorted((weight[pk] for pk in share), reverse=True)
    assert shares_by_weight(pieces, 1) == [[pk for pk, _ in sorted(pieces, key=lambda p: -p[1])]]
    # More processes than pieces: the extra shares are empty, nothing is split.
    assert sorted(len(share) for share in shares_by_weight(pieces[:2], 4)) == [0, 0, 1, 1]


@pytest.mark.django_db
def test_an_audit_run_weighs_its_repos_and_queues_the_heaviest_first(settings: Any) -> None:
    small, _ = repo_with_scan(truths=["A"], findings=["x", "y"])
    large, _ = repo_with_scan(truths=["B", "C", "D"], findings=["x", "y", "z", "w"])
    middle, _ = repo_with_scan(truths=["E", "F"], findings=["x", "y", "z"])
    publish_dataset(small, middle, large)
    run = audit_run_create(scanner=Scanner.objects.get(name="tool"), judge="offline", enqueue=False)
    weights = audit_piece_weights(run)
    assert weights == {small.project_id: 2, middle.project_id: 6, large.project_id: 12}
    assert run_piece_weights(run) == weights
    pieces = run_pieces_prepare(run=run)
    assert [p.key for p in pieces] == [large.project_id, middle.project_id, small.project_id]
    # Created in that order: the queue's workers, claiming by (enqueued_at, id), take the
    # heaviest first.
    assert list(RunPiece.objects.filter(run=run).order_by("pk").values_list("key", flat=True)) == [
        large.project_id,
        middle.project_id,
        small.project_id,
    ]


@pytest.mark.django_db
def test_a_run_of_one_piece_weighs_nothing() -> None:
    run = EvaluationRun.objects.create(benchmark="probes", judge="rules", status="queued")
    assert run_piece_weights(run) == {}
    assert [p.key for p in run_pieces_prepare(run=run)] == [""]
