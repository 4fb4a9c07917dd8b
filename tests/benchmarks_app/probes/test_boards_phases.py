"""Stored probe boards (one row per model and board), phases, chosen entries, metadata and
the upload messages (issues 13 and 14)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from benchmarks_app.bench.api import seed_leaderboards
from benchmarks_app.models import ProbeSuite, ResponseSubmission
from benchmarks_app.models.boards import ProbeBoardRow
from benchmarks_app.selectors.board_marks import PROBE_SHAPE, attach_marks
from benchmarks_app.selectors.probe_boards import probe_leaderboard
from benchmarks_app.selectors.probes import probe_report
from benchmarks_app.services.phases import phase_create, phase_hide, phase_reveal
from benchmarks_app.services.probes import (
    ProbeChoiceError,
    ProbeFormatError,
    ProbeSubmissionRefused,
    probe_board_refresh,
    probe_submission_choose,
)
from benchmarks_app.services.uploads import MAX_ERRORS_SHOWN
from tests.benchmarks_app.probes.conftest import BAD, GOOD, responses_jsonl
from tests.factories.common import StaffFactory, UserFactory

pytestmark = pytest.mark.django_db


def _phase(suite, *, hidden=False, days_ago=1, days_left=5, **limits):
    now = timezone.now()
    return phase_create(
        target=suite,
        name="Final",
        slug="final",
        starts_at=now - timedelta(days=days_ago),
        ends_at=now + timedelta(days=days_left),
        is_hidden=hidden,
        **limits,
    )


def test_rows_are_written_when_runs_end_and_read_in_one_query(
    scored, submit, django_assert_num_queries
):
    good, bad = scored
    rows = attach_marks(
        PROBE_SHAPE,
        list(ProbeBoardRow.objects.filter(suite__name="mini", phase=None).order_by("sort_a")),
    )
    assert [(r.model_name, r.position, r.run_id) for r in rows] == [
        ("good-model", 1, good.pk),
        ("bad-model", 2, bad.pk),
    ]
    # A re-submission replaces the model's row (its latest), without a second row.
    again = submit(suite_name="mini", model_name="bad-model", text=responses_jsonl(GOOD))
    assert ProbeBoardRow.objects.filter(model_name="bad-model").get().run_id == again.pk
    for i in range(5):
        submit(suite_name="mini", model_name=f"extra-{i}", text=responses_jsonl(BAD))
    # The rows, then their places and ranks (one statement of counts).
    with django_assert_num_queries(2):
        board = probe_leaderboard(suite_name="mini")
    assert len(board) == 7 and [r["rank"] for r in board] == list(range(1, 8))
    assert {"is_baseline", "phase", "method_name", "method_url"} <= set(board[0])


def test_a_chosen_entry_represents_the_model_instead_of_its_latest(suite, submit):
    owner = UserFactory.create()
    first = submit(suite_name="mini", model_name="mine", text=responses_jsonl(GOOD), owner=owner)
    latest = submit(suite_name="mini", model_name="mine", text=responses_jsonl(BAD), owner=owner)
    [row] = probe_leaderboard(suite_name="mini")
    assert row["run_id"] == latest.pk and row["resilience_index"] < 1.0
    chosen = ResponseSubmission.objects.get(pk=first.probe_submission_id)
    with pytest.raises(ProbeChoiceError):
        probe_submission_choose(user=UserFactory.create(), submission=chosen)
    probe_submission_choose(user=owner, submission=chosen)
    [row] = probe_leaderboard(suite_name="mini")
    assert row["run_id"] == first.pk and row["resilience_index"] == 1.0
    # One choice per model: choosing the other unchooses the first.
    probe_submission_choose(
        user=owner, submission=ResponseSubmission.objects.get(pk=latest.probe_submission_id)
    )
    assert list(
        ResponseSubmission.objects.filter(model_name="mine", board_choice=True).values_list(
            "pk", flat=True
        )
    ) == [latest.probe_submission_id]
    assert probe_leaderboard(suite_name="mini")[0]["run_id"] == latest.pk


def test_choose_page_button_and_api(client, suite, submit):
    owner = UserFactory.create()
    first = submit(suite_name="mini", model_name="mine", text=responses_jsonl(GOOD), owner=owner)
    submit(suite_name="mini", model_name="mine", text=responses_jsonl(BAD), owner=owner)
    page = reverse("probes:submission", args=[first.probe_submission_id])
    assert 'id="choose-entry"' not in client.get(page).content.decode()  # anonymous
    client.force_login(owner)
    assert 'id="choose-entry"' in client.get(page).content.decode()
    client.post(reverse("probes:choose", args=[first.probe_submission_id]))
    assert probe_leaderboard(suite_name="mini")[0]["run_id"] == first.pk
    api = APIClient()
    url = reverse("api:probes-choose", args=[first.probe_submission_id])
    assert api.post(url).status_code in (401, 403)
    api.force_authenticate(UserFactory.create())
    assert api.post(url).status_code == 403
    api.force_authenticate(owner)
    answer = api.post(url)
    assert answer.status_code == 200 and answer.json()["chosen"] is True


def test_submissions_outside_an_open_phase_are_refused_with_its_dates(suite, submit):
    _phase(suite, days_ago=-2, days_left=5)  # opens in two days
    with pytest.raises(ProbeSubmissionRefused) as caught:
        submit(suite_name="mini", model_name="early", text=responses_jsonl(GOOD))
    assert caught.value.code == "phase_closed"
    assert "Final" in caught.value.message and "UTC" in caught.value.message
    assert not ResponseSubmission.objects.exists()
    api = APIClient()
    api.force_authenticate(UserFactory.create())
    answer = api.post(
        reverse("api:probes-submit"),
        {"suite": "mini", "model": "m", "responses": [{"probe_id": "w1", "output": "no"}]},
        format="json",
    )
    assert answer.status_code == 403 and "opens" in json.dumps(answer.json())


def test_phase_quota_per_entrant_and_run_phase(suite, submit):
    phase = _phase(suite, total_limit=1)
    user = UserFactory.create()
    run = submit(suite_name="mini", model_name="q", text=responses_jsonl(GOOD), owner=user)
    assert run.phase_id == phase.pk and run.probe_submission.phase_id == phase.pk
    with pytest.raises(ProbeSubmissionRefused) as caught:
        submit(suite_name="mini", model_name="q", text=responses_jsonl(BAD), owner=user)
    assert caught.value.code == "quota_exceeded" and "1 submission" in caught.value.message
    # Another entrant has a quota of their own.
    submit(suite_name="mini", model_name="r", text=responses_jsonl(BAD), owner=UserFactory())
    api = APIClient()
    api.force_authenticate(user)
    answer = api.post(
        reverse("api:probes-submit"),
        {"suite": "mini", "model": "q", "responses": [{"probe_id": "w1", "output": "no"}]},
        format="json",
    )
    assert answer.status_code == 429


def test_a_hidden_phase_board_shows_staff_all_participants_their_own(suite, submit):
    phase = _phase(suite, hidden=True)
    alice, bob, staff = UserFactory.create(), UserFactory.create(), StaffFactory.create()
    a = submit(suite_name="mini", model_name="alice-m", text=responses_jsonl(GOOD), owner=alice)
    submit(suite_name="mini", model_name="bob-m", text=responses_jsonl(BAD), owner=bob)
    assert len(probe_leaderboard(suite_name="mini", phase=phase, user=staff)) == 2
    assert [r["model"] for r in probe_leaderboard(phase=phase, user=alice)] == ["alice-m"]
    assert probe_leaderboard(phase=phase, user=None) == []
    # Neither entry shows on the board of all entries, nor in another's report...
    assert probe_leaderboard(suite_name="mini") == []
    with pytest.raises(LookupError):
        probe_report(submission_id=a.probe_submission_id, user=bob)
    assert probe_report(submission_id=a.probe_submission_id, user=alice)["model"] == "alice-m"
    api = APIClient()
    served = api.get(reverse("api:probes-leaderboard"), {"suite": "mini", "phase": "final"})
    assert served.status_code == 200 and served.json()["count"] == 0
    # ...until the phase is revealed: revealing rewrites the suite's boards by itself.
    phase = phase_reveal(phase=phase)
    assert {r["model"] for r in probe_leaderboard(phase=phase)} == {"alice-m", "bob-m"}
    assert {r["model"] for r in probe_leaderboard(suite_name="mini")} == {"alice-m", "bob-m"}
    # Hiding it again takes its entries off the board of all entries at once.
    phase = phase_hide(phase=phase)
    assert probe_leaderboard(suite_name="mini") == []


def test_a_hidden_phase_shows_a_participant_their_score_without_a_rank(client, suite, submit):
    phase = _phase(suite, hidden=True)
    alice, staff = UserFactory.create(), StaffFactory.create()
    # Alice's entry is second of two on the phase's board.
    submit(suite_name="mini", model_name="top-m", text=responses_jsonl(GOOD), owner=UserFactory())
    a = submit(suite_name="mini", model_name="alice-m", text=responses_jsonl(BAD), owner=alice)
    report = probe_report(submission_id=a.probe_submission_id, user=alice)
    assert report["board"]["rank"] is None and report["board"]["entries"] is None
    assert report["board"]["rank_low"] is None and report["board"]["rank_high"] is None
    assert report["metrics"]["indices"]["resilience_index"] is not None  # the score stays
    [row] = probe_leaderboard(phase=phase, user=alice)
    assert (row["model"], row["rank"], row["rank_low"], row["tied"]) == (
        "alice-m",
        None,
        None,
        False,
    )
    api = APIClient()
    api.force_authenticate(alice)
    served = api.get(reverse("api:probes-report", args=[a.probe_submission_id])).json()
    assert served["board"]["rank"] is None and served["board"]["entries"] is None
    board = api.get(reverse("api:probes-leaderboard"), {"suite": "mini", "phase": "final"}).json()
    assert [(r["model"], r["rank"]) for r in board["results"]] == [("alice-m", None)]
    client.force_login(alice)
    page = client.get(reverse("probes:submission", args=[a.probe_submission_id])).content.decode()
    assert 'id="probe-board-hidden"' in page and "Rank " not in page
    # Staff see the place; once revealed, so does everybody.
    assert probe_report(submission_id=a.probe_submission_id, user=staff)["board"]["rank"] == 2
    phase_reveal(phase=phase)
    shown = probe_report(submission_id=a.probe_submission_id, user=alice)["board"]
    assert (shown["rank"], shown["entries"]) == (2, 2)
    client.force_login(alice)
    page = client.get(reverse("probes:submission", args=[a.probe_submission_id])).content.decode()
    assert "Rank 2 of 2" in page


def test_method_metadata_is_stored_shown_and_checked(suite, submit):
    submit(
        suite_name="mini",
        model_name="described",
        text=responses_jsonl(GOOD),
        method_name="  prompt   v2 ",
        method_description="A system prompt.",
        method_url="https://example.org/paper",
    )
    [row] = probe_leaderboard(suite_name="mini")
    assert (row["method_name"], row["method_url"]) == ("prompt v2", "https://example.org/paper")
    with pytest.raises(ProbeFormatError) as caught:
        submit(
            suite_name="mini",
            model_name="x",
            text=responses_jsonl(GOOD),
            method_url="javascript:alert(1)",
            method_name="n" * 101,
        )
    assert any(e.startswith("field 'method_url'") for e in caught.value.errors)
    assert any(e.startswith("field 'method_name'") for e in caught.value.errors)
    api = APIClient()
    api.force_authenticate(UserFactory.create())
    body = {
        "suite": "mini",
        "model": "y",
        "method_url": "not a url",
        "responses": [{"probe_id": k, "output": v} for k, v in GOOD.items()],
    }
    answer = api.post(reverse("api:probes-submit"), body, format="json")
    assert answer.status_code == 400
    assert [e["field"] for e in answer.json()["errors"]] == ["method_url"]


def test_a_json_document_sent_as_jsonl_is_one_message(client, suite):
    user = UserFactory.create()
    client.force_login(user)
    rows = [{"probe_id": f"p{i}", "output": "x"} for i in range(300)]
    pretty = json.dumps(rows, indent=2)
    answer = client.post(
        reverse("probes:submit"),
        {
            "suite": "mini",
            "model": "m",
            "file": SimpleUploadedFile("r.jsonl", pretty.encode()),
        },
    )
    errors = answer.context["form"].errors["file"]
    assert len(errors) == 1
    assert "JSON document" in errors[0] and "array of 300 items" in errors[0]
    assert not ResponseSubmission.objects.exists()


def test_error_lists_are_capped_and_help_shows_the_limit(client, suite, settings):
    settings.UPLOAD_MAX_MB = 7
    settings.PROBE_RESPONSES_EXTRA_ROWS = 100  # else the 100 lines pass the suite's row cap
    client.force_login(UserFactory.create())
    page = client.get(reverse("probes:submit")).content.decode()
    assert "up to 7 MB" in page and "UPLOAD_MAX_MB" not in page
    text = "\n".join("not json {" for _ in range(100))
    answer = client.post(
        reverse("probes:submit"),
        {"suite": "mini", "model": "m", "file": SimpleUploadedFile("r.jsonl", text.encode())},
    )
    errors = answer.context["form"].errors["file"]
    assert len(errors) == MAX_ERRORS_SHOWN + 1
    assert errors[-1] == f"… and {100 - MAX_ERRORS_SHOWN} more problems"


def test_api_unknown_suite_is_a_400_and_pages_in_constant_queries():
    seed_leaderboards(30)
    probe_board_refresh(suite=ProbeSuite.objects.get(name="bench-suite"))
    api = APIClient()
    unknown = api.get(reverse("api:probes-leaderboard"), {"suite": "nope"})
    assert unknown.status_code == 400
    assert [e["field"] for e in unknown.json()["errors"]] == ["suite"]
    assert "'nope'" in unknown.json()["detail"]
    url = reverse("api:probes-leaderboard")
    with CaptureQueriesContext(connection) as small:
        first = api.get(url, {"page_size": "10"}).json()
    assert first["count"] == 30 and [r["rank"] for r in first["results"]] == list(range(1, 11))
    values = [r["resilience_index"] for r in first["results"]]
    assert values == sorted(values, reverse=True)
    seed_leaderboards(200, start=30)
    probe_board_refresh(suite=ProbeSuite.objects.get(name="bench-suite"))
    with CaptureQueriesContext(connection) as large:
        last = api.get(url, {"page_size": "10", "page": "23", "ordering": "-pass_rate"}).json()
    assert len(large.captured_queries) == len(small.captured_queries)
    assert last["count"] == 230 and len(last["results"]) == 10
    rates = [r["pass_rate"] for r in last["results"]]
    assert rates == sorted(rates, reverse=True)
