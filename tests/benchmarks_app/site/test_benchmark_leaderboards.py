"""The three benchmark leaderboard pages (sortable, downloadable) and their API endpoints
(one paginated envelope, ordering with nulls last, filters).

Rows are real result rows written by the bulk seeding that ``make bench`` uses; every
expected order is derived from the selectors' own output, never hard-coded.
"""

from __future__ import annotations

import csv
import io
import json
from html.parser import HTMLParser
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from benchmarks_app.bench.api import seed_leaderboards
from benchmarks_app.models import (
    Benchmark,
    ChecklistScore,
    EvaluationRun,
    ProbeRunReport,
    ProbeSuite,
    ResponseSubmission,
    RunStatus,
    Team,
)
from benchmarks_app.selectors.audit import audit_leaderboard
from benchmarks_app.selectors.checklist import checklist_leaderboard
from benchmarks_app.selectors.probe_boards import probe_leaderboard
from benchmarks_app.services.checklist.boards import checklist_board_refresh
from benchmarks_app.services.probes.boards import probe_board_refresh
from tests.factories.common import (
    ChecklistRunFactory,
    ChecklistSubmissionFactory,
    StaffFactory,
    TeamFactory,
    UserFactory,
    join,
)

pytestmark = pytest.mark.django_db

SEEDED_SUITE = "bench-suite"  # the suite, and its table's prefix, written by seed_leaderboards


class _Tables(HTMLParser):
    """The cell texts of every ``<table id=...>``'s body rows, and each row's links."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.links: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._in_body = False
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        if tag == "table" and attr.get("id"):
            self._table = str(attr["id"])
            self.tables[self._table] = []
            self.links[self._table] = []
        elif self._table and tag == "tbody":
            self._in_body = True
        elif self._table and self._in_body and tag == "tr":
            self.tables[self._table].append([])
            self.links[self._table].append([])
        elif self._table and self._in_body and tag == "td":
            self._cell = []
        elif self._cell is not None and self._table and tag == "a":
            self.links[self._table][-1].append(str(attr.get("href")))

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None and self._table:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tbody":
            self._in_body = False
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def page_tables(response: Any) -> _Tables:
    assert response.status_code == 200
    parser = _Tables()
    parser.feed(response.content.decode())
    return parser


def column(rows: list[list[str]], index: int) -> list[str]:
    return [row[index] for row in rows]


def read_csv(response: Any) -> list[dict[str, str]]:
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith("attachment")
    return list(csv.DictReader(io.StringIO(download_text(response))))


def download_text(response: Any) -> str:
    """A download's body: the board pages stream theirs (the whole board, memory flat)."""
    assert response.streaming
    return b"".join(response.streaming_content).decode()


def download_json(response: Any) -> Any:
    assert response["Content-Type"] == "application/json"
    return json.loads(download_text(response))


# --- Audit page ----------------------------------------------------------------------------


def test_audit_page_sorts_by_a_column_and_keeps_ranks(client):
    seed_leaderboards(8)
    ranked = [r["scanner"] for r in audit_leaderboard()]
    default = page_tables(client.get("/audit/")).tables["audit-leaderboard-table"]
    # Cells: rank, scanner, F1+, baseline badge, method, repos, truth, reported, QA, TP, ...
    assert column(default, 1) == ranked
    assert column(default, 0) == [str(i) for i in range(1, 9)]

    by_tp = page_tables(client.get("/audit/?sort=tp")).tables["audit-leaderboard-table"]
    tps = [int(tp) for tp in column(by_tp, 11)]
    assert tps == sorted(tps) and column(by_tp, 1) != ranked
    # Each scanner keeps its place by F1 as its rank, whatever the order shown.
    assert {row[1]: int(row[0]) for row in by_tp} == {s: i for i, s in enumerate(ranked, 1)}
    by_name = page_tables(client.get("/audit/?sort=-scanner")).tables["audit-leaderboard-table"]
    assert column(by_name, 1) == sorted(ranked, reverse=True)


def test_audit_downloads_carry_every_row_in_the_order_shown(client):
    seed_leaderboards(6)
    rows = audit_leaderboard()
    data = read_csv(client.get("/audit/?format=csv&sort=-fp"))
    assert [int(r["fp"]) for r in data] == sorted((r["fp"] for r in rows), reverse=True)
    by_name = {r["scanner"]: r for r in rows}
    for record in data:
        expected = by_name[record["scanner"]]
        assert float(record["recall"]) == pytest.approx(expected["recall"])
        assert int(record["tp"]) == expected["tp"]

    response = client.get("/audit/?format=json")
    assert response["Content-Disposition"] == 'attachment; filename="audit-leaderboard.json"'
    body = download_json(response)
    assert body["count"] == 6
    assert [(r["rank"], r["scanner"]) for r in body["results"]] == [
        (i, r["scanner"]) for i, r in enumerate(rows, start=1)
    ]


# --- Probes page ---------------------------------------------------------------------------


def _probe_entry(suite: ProbeSuite, model: str, resilience: float | None) -> None:
    submission = ResponseSubmission.objects.create(suite=suite, model_name=model)
    run = EvaluationRun.objects.create(
        benchmark=Benchmark.PROBES,
        probe_submission=submission,
        status=RunStatus.SUCCEEDED,
        is_complete=True,
    )
    ProbeRunReport.objects.create(
        run=run,
        submission=submission,
        metrics={"counts": {"evaluated": 4}},
        resilience_index=resilience,
        pass_rate=resilience,
    )
    probe_board_refresh(suite=suite)


def test_probe_tables_sort_with_missing_values_last_one_suite_at_a_time(client):
    seed_leaderboards(14)  # entries 3 and 13 have no resilience index
    other = ProbeSuite.objects.create(name="Other suite")
    for model, value in (("o-low", 0.2), ("o-none", None), ("o-high", 0.9)):
        _probe_entry(other, model, value)
    seeded = probe_leaderboard(suite_name=SEEDED_SUITE)
    ranks = {r["model"]: r["rank"] for r in seeded}
    table_id = f"probes-{SEEDED_SUITE}"

    default = page_tables(client.get("/probes/"))
    assert column(default.tables[table_id], 1) == [r["model"] for r in seeded]
    assert column(default.tables["probes-other-suite"], 1) == ["o-high", "o-low", "o-none"]

    for sort in ("resilience_index", "-resilience_index"):
        tables = page_tables(client.get(f"/probes/?{SEEDED_SUITE}-sort={sort}")).tables
        rows = tables[table_id]
        shown = column(rows, 2)
        missing = [v == "—" for v in shown]
        assert missing == [False] * 12 + [True] * 2, shown
        values = [float(v) for v in shown[:12]]
        assert values == sorted(values, reverse=sort.startswith("-"))
        assert {row[1]: int(row[0]) for row in rows} == ranks  # ranks travel with their rows
        # The other suite's table is left in its own order.
        assert column(tables["probes-other-suite"], 1) == ["o-high", "o-low", "o-none"]

    ascending = page_tables(client.get("/probes/?other-suite-sort=resilience_index"))
    assert column(ascending.tables["probes-other-suite"], 1) == ["o-low", "o-high", "o-none"]


def test_probe_page_filters_by_suite_and_downloads_one_suite(client):
    seed_leaderboards(5)
    other = ProbeSuite.objects.create(name="Other suite")
    _probe_entry(other, "only-model", 0.5)

    everything = client.get("/probes/").content.decode()
    assert 'href="/probes/?suite=Other+suite"' in everything  # a chip per suite
    filtered = page_tables(client.get("/probes/", {"suite": "Other suite"}))
    assert set(filtered.tables) == {"probes-other-suite"}
    assert column(filtered.tables["probes-other-suite"], 1) == ["only-model"]
    unknown = client.get("/probes/", {"suite": "no such suite"}).content.decode()
    assert "No scored model on suite" in unknown and "<table" not in unknown

    download = client.get(f"/probes/?{SEEDED_SUITE}-format=csv")
    assert f'filename="probes-{SEEDED_SUITE}-leaderboard.csv"' in download["Content-Disposition"]
    data = read_csv(download)
    assert [r["model"] for r in data] == [
        r["model"] for r in probe_leaderboard(suite_name=SEEDED_SUITE)
    ]
    assert "report" not in data[0]  # the link column is not data
    body = download_json(client.get("/probes/?other-suite-format=json"))
    assert body["count"] == 1 and body["results"][0]["model"] == "only-model"
    assert body["results"][0]["resilience_index"] == 0.5


# --- Checklist page ------------------------------------------------------------------------


def test_checklist_page_sorts_downloads_and_links_only_the_own_entry(client):
    seed_leaderboards(7)
    rows = checklist_leaderboard(challenge_slug="bench")
    user = UserFactory.create()
    mine = rows[3]
    join(user, Team.objects.get(pk=mine["team_id"]))
    client.force_login(user)

    page = client.get("/checklist/?challenge=bench")
    tables = page_tables(page)
    shown = tables.tables["checklist-leaderboard"]
    assert column(shown, 1) == [r["team"] for r in rows]
    assert column(shown, 0) == [str(r["rank"]) for r in rows]
    detail = reverse("checklist:submission-detail", args=[mine["submission"]])
    # Only the viewer's own entry links to its page (it shows per-question feedback).
    assert [links for links in tables.links["checklist-leaderboard"] if links] == [[detail]]
    assert f"ranked <strong>#{mine['rank']}</strong>" in page.content.decode()

    by_c_a = page_tables(client.get("/checklist/?challenge=bench&sort=c_a"))
    sorted_rows = by_c_a.tables["checklist-leaderboard"]
    assert column(sorted_rows, 1) == [r["team"] for r in sorted(rows, key=lambda r: r["c_a"])]
    assert {row[1]: row[0] for row in sorted_rows} == {r["team"]: str(r["rank"]) for r in rows}

    data = read_csv(client.get("/checklist/?challenge=bench&format=csv&sort=-c_t"))
    assert [r["team"] for r in data] == [
        r["team"] for r in sorted(rows, key=lambda r: r["c_t"], reverse=True)
    ]
    assert {r["team"]: int(r["submission"]) for r in data} == {
        r["team"]: r["submission"] for r in rows
    }
    assert {r["kind"] for r in data} == {"GAT"}
    body = download_json(client.get("/checklist/?challenge=bench&format=json"))
    assert [r["s"] for r in body["results"]] == [r["s"] for r in rows]

    assert client.get("/checklist/?challenge=nonexistent").status_code == 404


def test_staff_see_every_entry_linked(client):
    seed_leaderboards(3)
    client.force_login(StaffFactory.create())
    links = page_tables(client.get("/checklist/?challenge=bench")).links["checklist-leaderboard"]
    assert all(len(row) == 1 for row in links) and len(links) == 3


@pytest.mark.parametrize("url", ["/audit/", "/probes/", "/checklist/?challenge=bench"])
def test_page_query_count_does_not_grow_with_entries(client, url, django_assert_num_queries):
    client.force_login(UserFactory.create())
    seed_leaderboards(3)
    with CaptureQueriesContext(connection) as small:
        assert client.get(url).status_code == 200
    seed_leaderboards(25, start=3)
    with django_assert_num_queries(len(small.captured_queries)):
        response = client.get(url)
    assert response.content.decode().count("<tr") >= 28  # head row + 28 entries


# --- Checklist submission page -------------------------------------------------------------


def test_submission_page_links_to_the_live_run_page_while_it_runs(client):
    user = UserFactory.create()
    team = TeamFactory.create()
    join(user, team)
    client.force_login(user)
    run = ChecklistRunFactory.create(
        checklist_submission=ChecklistSubmissionFactory.create(team=team),
        status=RunStatus.RUNNING,
        progress_done=3,
        progress_total=45,
    )
    url = reverse("checklist:submission-detail", args=[run.checklist_submission_id])
    html = client.get(url).content.decode()
    live = reverse("runs:detail", args=[run.pk])
    assert 'id="follow-run"' in html and f'href="{live}"' in html

    EvaluationRun.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, progress_done=45)
    html = client.get(url).content.decode()
    assert 'id="follow-run"' not in html
    assert f'href="{live}"' in html  # still reachable, no longer pushed


# --- API ------------------------------------------------------------------------------------

ENDPOINTS = {
    "audit": "/api/audit/leaderboard/",
    "probes": "/api/probes/leaderboard/",
    "checklist": "/api/checklist/leaderboard/",
}


@pytest.mark.parametrize("bench", list(ENDPOINTS))
def test_api_answers_with_the_paginated_envelope(api, bench):
    seed_leaderboards(7)
    url = ENDPOINTS[bench]
    first = api.get(url, {"page_size": 3}).json()
    assert set(first) == {"count", "next", "previous", "results"}
    assert first["count"] == 7 and first["previous"] is None
    assert [r["rank"] for r in first["results"]] == [1, 2, 3]
    second = api.get(first["next"]).json()
    assert [r["rank"] for r in second["results"]] == [4, 5, 6]
    assert second["previous"] is not None
    last = api.get(second["next"]).json()
    assert [r["rank"] for r in last["results"]] == [7] and last["next"] is None


def test_api_ordering_puts_nulls_last_both_ways_and_keeps_ranks(api):
    seed_leaderboards(14)  # two models without a resilience index
    ranks = {r["model"]: r["rank"] for r in probe_leaderboard()}
    for ordering in ("resilience_index", "-resilience_index"):
        rows = api.get(ENDPOINTS["probes"], {"ordering": ordering}).json()["results"]
        values = [r["resilience_index"] for r in rows]
        assert [v is None for v in values] == [False] * 12 + [True] * 2
        assert values[:12] == sorted(values[:12], reverse=ordering.startswith("-"))
        assert {r["model"]: r["rank"] for r in rows} == ranks


def test_api_ordering_by_several_fields_and_unknown_field(api):
    seed_leaderboards(6)
    rows = api.get(ENDPOINTS["audit"], {"ordering": "repos,-tp"}).json()["results"]
    assert [r["tp"] for r in rows] == sorted((r["tp"] for r in audit_leaderboard()), reverse=True)
    checklist = api.get(ENDPOINTS["checklist"], {"ordering": "c_g"}).json()["results"]
    assert [r["c_g"] for r in checklist] == sorted(r["c_g"] for r in checklist)
    assert len(checklist) == 6

    answer = api.get(ENDPOINTS["checklist"], {"ordering": "-password"})
    assert answer.status_code == 400
    [error] = answer.json()["errors"]
    assert error["field"] == "ordering" and "'password'" in error["reason"]


def test_api_filters_by_suite_and_by_challenge(api):
    seed_leaderboards(4)
    other = ProbeSuite.objects.create(name="Other suite")
    _probe_entry(other, "only-model", 0.5)
    everything = api.get(ENDPOINTS["probes"]).json()
    assert everything["count"] == 5
    one = api.get(ENDPOINTS["probes"], {"suite": "Other suite"}).json()
    assert [(r["suite"], r["model"], r["rank"]) for r in one["results"]] == [
        ("Other suite", "only-model", 1)
    ]
    assert one["results"][0]["report"].endswith(
        reverse("api:probes-report", args=[one["results"][0]["submission_id"]])
    )

    # A scored entry in another (newer) challenge: challenges are never ranked together.
    elsewhere = ChecklistSubmissionFactory.create(team=TeamFactory.create(name="elsewhere"))
    run = ChecklistRunFactory.create(checklist_submission=elsewhere, status=RunStatus.SUCCEEDED)
    ChecklistScore.objects.create(run=run, submission=elsewhere, c_g=1, c_a=1, c_t=1, r=0, s=1)
    checklist_board_refresh(challenge=elsewhere.challenge, phase=None)
    default = api.get(ENDPOINTS["checklist"]).json()
    assert default["count"] == 1 and default["results"][0]["team"] == "elsewhere"
    bench = api.get(ENDPOINTS["checklist"], {"challenge": "bench"}).json()
    assert bench["count"] == 4 and {r["challenge"] for r in bench["results"]} == {"bench"}
    assert api.get(ENDPOINTS["checklist"], {"challenge": "nonexistent"}).json()["count"] == 0
