"""Issue 27: paired marks written after a run's end, and the paired compare endpoint."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from benchmarks_app.models import PairedRefresh, ProbeRunReport
from benchmarks_app.models.boards import ProbeBoardRow
from benchmarks_app.selectors.board_marks import PROBE_SHAPE, attach_marks
from benchmarks_app.selectors.paired import BoardKey
from benchmarks_app.services.paired import (
    board_paired_refresh,
    paired_refresh_request,
    paired_refresh_take,
    paired_sweep,
)
from benchmarks_app.services.phases import phase_create
from benchmarks_app.services.probes.boards import probe_board_refresh
from tests.benchmarks_app.probes.conftest import BAD, GOOD, responses_jsonl
from tests.factories.common import StaffFactory, UserFactory

pytestmark = pytest.mark.django_db
URL = "/api/boards/compare/"


def _rows() -> dict[str, ProbeBoardRow]:
    rows = attach_marks(PROBE_SHAPE, list(ProbeBoardRow.objects.filter(phase=None)))
    return {r.model_name: r for r in rows}


def test_a_run_end_writes_paired_marks_through_the_task(scored, submit):
    submit(suite_name="mini", model_name="twin-of-good", text=responses_jsonl(GOOD))
    rows = _rows()
    # The task ran once the run's end committed, and took its request.
    assert not PairedRefresh.objects.exists()
    good, twin, bad = rows["good-model"], rows["twin-of-good"], rows["bad-model"]
    assert good.paired_rank_low == 1 and good.paired_tied is False
    assert bad.paired_rank_high == 3
    # Identical responses: tied by the paired rule too, sharing the top of the range.
    assert twin.paired_tied is True and twin.paired_rank_low == 1
    # The paired rule only splits ties: its range lies within the unpaired one.
    for row in rows.values():
        assert row.rank_low is not None and row.rank_high is not None
        assert row.rank_low <= row.paired_rank_low <= row.paired_rank_high <= row.rank_high  # type: ignore[operator]
        assert row.paired_tied is False or row.tied is True
    served = APIClient().get(reverse("api:probes-leaderboard"), {"suite": "mini"}).json()
    by_model = {r["model"]: r for r in served["results"]}
    assert by_model["twin-of-good"]["paired_tied"] is True
    assert by_model["good-model"]["board"] == str(BoardKey.parse(by_model["good-model"]["board"]))


def test_requests_are_coalesced_per_board(scored):
    key = BoardKey.parse(f"probes:{scored[0].probe_submission.suite_id}:-:x")
    assert paired_refresh_request(board=key) is True
    # A second run ending before the task ran asks for nothing more.
    assert paired_refresh_request(board=key) is False
    assert paired_refresh_take(board=str(key)) is True
    assert paired_refresh_take(board=str(key)) is False


def test_compare_gives_the_paired_difference(scored, submit):
    submit(suite_name="mini", model_name="twin-of-good", text=responses_jsonl(GOOD))
    rows = _rows()
    good, twin, bad = rows["good-model"], rows["twin-of-good"], rows["bad-model"]
    board = f"probes:{good.suite_id}:-:{good.suite_version}"  # the key the rows carry
    api = APIClient()
    same = api.get(URL, {"board": board, "a": str(good.pk), "b": str(twin.pk)}).json()
    assert (same["difference"], same["low"], same["high"], same["significant"]) == (
        0.0,
        0.0,
        0.0,
        False,
    )
    apart = api.get(URL, {"board": board, "a": str(good.pk), "b": str(bad.pk)}).json()
    reports = {r.run_id: r.resilience_index or 0.0 for r in ProbeRunReport.objects.all()}
    assert apart["difference"] == pytest.approx(reports[good.run_id] - reports[bad.run_id])
    assert apart["low"] <= apart["difference"] <= apart["high"]
    assert (apart["level"], apart["resamples"]) == (0.95, 2000)
    # The same draws for every comparison: b - a is the mirror image of a - b.
    mirror = api.get(URL, {"board": board, "a": str(bad.pk), "b": str(good.pk)}).json()
    assert (mirror["low"], mirror["high"]) == pytest.approx((-apart["high"], -apart["low"]))
    # Issue 37: the exact test's figures come with the interval, the page's draws do not.
    assert "draws" not in apart
    assert same["discordant_items"] == 0 and same["exact_p"] == 1.0
    assert 0 < apart["discordant_items"] <= apart["items"]
    assert apart["significant"] == (apart["interval_excludes_zero"] and apart["exact_p"] <= 0.05)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"board": "nope", "a": "1", "b": "2"}, "board"),
        ({"board": "probes:1:-:v", "a": "x", "b": "2"}, "a"),
        ({"board": "probes:1:-:v", "a": "1"}, "b"),
    ],
)
def test_compare_names_the_bad_field(params, field):
    response = APIClient().get(URL, params)
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == [field]


def test_compare_respects_a_hidden_phase(suite, submit):
    now = timezone.now()
    phase = phase_create(
        target=suite,
        name="Final",
        slug="final",
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=5),
        is_hidden=True,
    )
    alice, bob = UserFactory.create(), UserFactory.create()
    submit(suite_name="mini", model_name="alice-m", text=responses_jsonl(GOOD), owner=alice)
    submit(suite_name="mini", model_name="bob-m", text=responses_jsonl(BAD), owner=bob)
    rows = {r.model_name: r for r in ProbeBoardRow.objects.filter(phase=phase)}
    a, b = rows["alice-m"], rows["bob-m"]
    board = f"probes:{a.suite_id}:{phase.pk}:{a.suite_version}"
    params = {"board": board, "a": str(a.pk), "b": str(b.pk)}
    api = APIClient()
    # Nobody but staff sees bob's hidden entry: alice gets a 404 naming it, as if absent.
    assert api.get(URL, params).status_code == 404
    api.force_authenticate(alice)
    refused = api.get(URL, params)
    assert refused.status_code == 404
    assert [e["field"] for e in refused.json()["errors"]] == ["b"]
    api.force_authenticate(StaffFactory.create())
    assert api.get(URL, params).json()["difference"] > 0
    # The board refresh itself marks the hidden board's rows like any other.
    result = board_paired_refresh(board=BoardKey.parse(board))
    assert result.ranked == 2 and result.marked == 2


def test_board_page_and_compare_page_show_the_paired_marks(client, scored, submit):
    submit(suite_name="mini", model_name="twin-of-good", text=responses_jsonl(GOOD))
    rows = _rows()
    good, twin = rows["good-model"], rows["twin-of-good"]
    page = client.get(reverse("probes:leaderboard")).content.decode()
    # One rank range and one tie column, read by the paired rule once computed.
    assert "Paired ranks" not in page and "Paired tie" not in page
    assert page.count('data-key="rank_range"') == 1 and page.count('data-key="tied"') == 1
    board = f"probes:{good.suite_id}:-:{good.suite_version}"
    shown = client.get("/boards/compare/", {"board": board, "a": str(good.pk), "b": str(twin.pk)})
    text = shown.content.decode()
    assert shown.status_code == 200
    assert "good-model" in text and "twin-of-good" in text
    assert "Not significantly different" in text
    bad = client.get("/boards/compare/", {"board": board, "a": "x", "b": str(twin.pk)})
    assert bad.status_code == 400 and "a: must be a board row id" in bad.content.decode()
    missing = client.get("/boards/compare/", {"board": board, "a": str(10**9), "b": str(twin.pk)})
    assert missing.status_code == 404


def test_the_sweep_asks_for_boards_rewritten_whole(scored, django_capture_on_commit_callbacks):
    suite = ProbeBoardRow.objects.first().suite  # type: ignore[union-attr]
    # A full rewrite (a phase revealed, an entry chosen) leaves the rows without paired marks.
    probe_board_refresh(suite=suite)
    assert set(ProbeBoardRow.objects.values_list("paired_rank_low", flat=True)) == {None}
    with django_capture_on_commit_callbacks(execute=False) as queued:
        assert paired_sweep() == 1
        # Asked once: a second sweep before the task ran asks for nothing more.
        assert paired_sweep() == 0
    assert len(queued) == 1
    with django_capture_on_commit_callbacks(execute=True):
        PairedRefresh.objects.all().delete()
        assert paired_sweep() == 1
    assert None not in set(ProbeBoardRow.objects.values_list("paired_rank_low", flat=True))
    assert paired_sweep() == 0


def test_a_run_ends_succeeded_while_the_broker_refuses_its_paired_task_and_the_sweeper_sends_it(
    suite, submit, monkeypatch
):
    """Issue 40: Redis down as the run ends. The paired task's enqueue raises (a real Redis
    client against a closed port); the run whose results are all stored still succeeds, the
    request stays owed, and the sweeper sends it once the broker takes tasks again."""
    import django_q.tasks
    from django_q.brokers.redis_broker import Redis
    from django_q.conf import Conf

    from benchmarks_app.models import EvaluationRun, RunStatus
    from benchmarks_app.services.paired import TASK

    real = django_q.tasks.async_task
    monkeypatch.setattr(Conf, "REDIS", "redis://127.0.0.1:9/0")
    monkeypatch.setattr(Conf, "DJANGO_REDIS", None)

    def broker_down_for_paired(func, *args, **kwargs):
        if func == TASK:
            return real(func, *args, sync=False, broker=Redis(), **kwargs)
        return real(func, *args, **kwargs)

    monkeypatch.setattr(django_q.tasks, "async_task", broker_down_for_paired)
    run = submit(suite_name="mini", model_name="good-model", text=responses_jsonl(GOOD))
    assert run.status == RunStatus.SUCCEEDED, run.error
    owed = PairedRefresh.objects.get()
    assert owed.enqueued_at is None
    monkeypatch.undo()  # the broker is back
    # Moments after the request, its own commit hook may still be sending it: left alone.
    assert paired_sweep() == 0 and PairedRefresh.objects.exists()
    PairedRefresh.objects.update(requested_at=timezone.now() - timedelta(minutes=1))
    paired_sweep()
    assert not PairedRefresh.objects.exists()  # the task ran (Q_SYNC) and took the request
    assert _rows()["good-model"].paired_rank_low == 1
    assert EvaluationRun.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED
