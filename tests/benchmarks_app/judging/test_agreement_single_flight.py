"""A board's judge agreement is computed by one view at a time, and only when the board or the
curated verdicts change; while only the board's rows change, at most once per
JUDGE_AGREEMENT_REFRESH_S (issue 35: in the rush every view of a changing board computed it,
and then one view for every state of a board that changed with every run that ended)."""

from __future__ import annotations

import time
from typing import Any, cast

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from benchmarks_app.models import AuditTruthResult, EvaluationRun
from benchmarks_app.models.audit import AuditBoardRow
from benchmarks_app.selectors import judge_agreement
from benchmarks_app.selectors.verdict_review_queue import review_queue
from tests.benchmarks_app.judging.split_votes import SPLIT_TRUTH, split_vote_run
from tests.factories.common import RunFactory

pytestmark = pytest.mark.django_db

AGREEMENT = "api:audit-leaderboard-agreement"
SETTLE = "admin:benchmarks_app_curatedverdict_settle"


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a board's figure was computed (one entry per computation)."""
    calls: list[int] = []
    real = judge_agreement._board_agreement

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(judge_agreement, "_board_agreement", counting)
    return calls


@pytest.fixture
def board(settings: Any) -> None:
    """The split-vote run's audit board, its agreement shown from one curated verdict on, and
    nothing cached yet."""
    settings.JUDGE_REVIEW_SAMPLE_RATE = 0.0
    settings.JUDGE_AGREEMENT_MIN_CURATED = 1
    split_vote_run(settings)
    cache.clear()


def _figure(client: Any) -> tuple[int, float | None]:
    answer = client.get(reverse(AGREEMENT))
    assert answer.status_code == 200
    figure = answer.json()["judge_agreement"]
    return figure["n"], figure["accuracy"]


def _settle_split_item(admin_client: Any) -> None:
    item = next(i for i in review_queue() if SPLIT_TRUTH in i.item_label)
    data = {
        "benchmark": item.benchmark,
        "item_key": item.item_key,
        "item_label": item.item_label,
        "verdict": "none",
        "note": "checked the diff",
    }
    assert admin_client.post(reverse(SETTLE), data).status_code == 302


def test_the_figure_is_kept_until_the_board_or_the_curated_verdicts_change(
    client: Any, admin_client: Any, board: None, computed: list[int]
) -> None:
    assert _figure(client) == (0, None) and len(computed) == 1
    assert _figure(client) == (0, None) and len(computed) == 1
    # Results added to runs elsewhere (a run being judged) leave the board's figure alone:
    # its runs have ended and its rows are unchanged.
    result = AuditTruthResult.objects.first()
    assert result is not None
    result.pk, result.run = None, cast(EvaluationRun, RunFactory(status="running"))
    result._state.adding = True
    result.save()
    assert AuditTruthResult.objects.count() > 1
    assert _figure(client) == (0, None) and len(computed) == 1
    # A maintainer's verdict changes it at once.
    _settle_split_item(admin_client)
    assert _figure(client) == (1, 0.0) and len(computed) == 2


def test_while_one_view_computes_the_figure_the_others_show_the_previous_one(
    client: Any,
    admin_client: Any,
    board: None,
    computed: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lease is in the shared cache, so this holds across web workers and machines."""
    assert _figure(client) == (0, None) and len(computed) == 1
    _settle_split_item(admin_client)
    # Another process holds the board's computing lease (it is computing the new figure).
    real_add = cache.add

    def lease_taken(key: str, *args: Any, **kwargs: Any) -> bool:
        if key.startswith("judge-agreement-lease:"):
            return False
        return bool(real_add(key, *args, **kwargs))

    with monkeypatch.context() as held:
        held.setattr(judge_agreement.cache, "add", lease_taken)
        assert _figure(client) == (0, None) and len(computed) == 1
    # Once the lease is free, the next view computes the new figure (and gives it back).
    assert _figure(client) == (1, 0.0) and len(computed) == 2


def test_while_only_the_rows_change_the_figure_is_computed_once_per_refresh_interval(
    client: Any,
    admin_client: Any,
    board: None,
    computed: list[int],
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.JUDGE_AGREEMENT_REFRESH_S = 30.0
    now = [time.time()]
    monkeypatch.setattr(judge_agreement.time, "time", lambda: now[0])
    assert _figure(client) == (0, None) and len(computed) == 1

    def a_run_ended() -> None:
        # A run that ends writes its board row: the board's rows' stamp changes.
        now[0] += 10
        assert AuditBoardRow.objects.update(computed_at=timezone.now()) >= 1

    a_run_ended()
    assert _figure(client) == (0, None) and len(computed) == 1, "recomputed within 30 s"
    a_run_ended()
    assert len(computed) == 1 and _figure(client) == (0, None)
    # Past the interval since the last computation, the next view computes it again.
    now[0] += 15
    assert _figure(client) == (0, None) and len(computed) == 2
    a_run_ended()
    assert _figure(client) == (0, None) and len(computed) == 2
    # A maintainer's verdict is never held back by the interval.
    _settle_split_item(admin_client)
    assert _figure(client) == (1, 0.0) and len(computed) == 3
