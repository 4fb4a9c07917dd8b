"""Issue 36 item 2: a hidden probe phase's board page and its downloads show a participant
their own row, never its place among the rows they cannot see (rank, rank range, tie,
paired ranks), as the API and the report page already did."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from benchmarks_app.services.phases import phase_create
from tests.benchmarks_app.probes.conftest import BAD, GOOD, responses_jsonl
from tests.factories.common import StaffFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def hidden_board(suite, submit):
    now = timezone.now()
    phase_create(
        target=suite,
        name="Final",
        slug="final",
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=5),
        is_hidden=True,
    )
    leader, second = UserFactory.create(), UserFactory.create()
    submit(suite_name="mini", model_name="leader-m", text=responses_jsonl(GOOD), owner=leader)
    submit(suite_name="mini", model_name="second-m", text=responses_jsonl(BAD), owner=second)
    return leader, second


def test_the_hidden_board_page_shows_no_place_to_a_participant(client, hidden_board) -> None:
    _, second = hidden_board
    client.force_login(second)
    page = client.get(reverse("probes:leaderboard"), {"suite": "mini", "phase": "final"})
    html = page.content.decode()
    assert page.status_code == 200 and "second-m" in html and "leader-m" not in html
    # No rank column, and the rank range and paired ranks read as unknown, not "2".
    assert '<th class="num rank" scope="col">#</th>' not in html
    for path in ("csv", "json"):
        download = client.get(
            reverse("probes:leaderboard"),
            {"suite": "mini", "phase": "final", "mini-format": path},
        )
        body = b"".join(download.streaming_content).decode()
        if path == "csv":
            (record,) = list(csv.DictReader(io.StringIO(body)))
        else:
            (record,) = json.loads(body)["results"]
        assert record["model"] == "second-m"
        assert "rank" not in record
        assert record["rank_range"] in ("", None, "\u2013", "-")
        assert record.get("paired_range") in ("", None, "\u2013", "-")


def test_staff_see_the_hidden_board_placed(client, hidden_board) -> None:
    client.force_login(StaffFactory.create())
    download = client.get(
        reverse("probes:leaderboard"),
        {"suite": "mini", "phase": "final", "mini-format": "csv"},
    )
    records = list(csv.DictReader(io.StringIO(b"".join(download.streaming_content).decode())))
    assert [(r["rank"], r["model"]) for r in records] == [("1", "leader-m"), ("2", "second-m")]
