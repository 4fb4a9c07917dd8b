"""Home, run pages, own submissions, log in and out."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from benchmarks_app.bench.api import seed_leaderboards
from benchmarks_app.models import RunStatus
from benchmarks_app.views.home import TOP_N
from tests.factories.common import (
    PASSWORD,
    ChecklistRunFactory,
    ChecklistSubmissionFactory,
    ProbeRunFactory,
    ResponseSubmissionFactory,
    RunFactory,
    ScannerFactory,
    TeamFactory,
    UserFactory,
    join,
)

pytestmark = pytest.mark.django_db


def test_home_shows_the_three_boards_with_empty_states(client):
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    for slug in ("audit", "probes", "checklist"):
        assert f'id="board-{slug}"' in html
        assert f'href="/{slug}/"' in html
    assert "No scanner has been scored yet" in html
    assert "No model has been scored yet" in html
    assert "No team has been scored yet" in html


def test_home_counts_runs_and_links_active_ones(client):
    RunFactory.create(status=RunStatus.RUNNING)
    RunFactory.create(status=RunStatus.SUCCEEDED)
    html = client.get("/").content.decode()
    assert "2 runs" in html
    assert "/runs/?benchmark=audit" in html and "1 in progress" in html


def test_run_list_shows_visible_runs_and_filters(client):
    audit = RunFactory.create(status=RunStatus.RUNNING, progress_done=1, progress_total=4)
    probe = ProbeRunFactory.create(status=RunStatus.SUCCEEDED)
    private = ChecklistRunFactory.create()
    html = client.get("/runs/").content.decode()
    assert f'href="/runs/{audit.pk}/"' in html
    assert f'href="/runs/{probe.pk}/"' in html
    assert f'href="/runs/{private.pk}/"' not in html
    filtered = client.get("/runs/?benchmark=probes").content.decode()
    assert f'href="/runs/{audit.pk}/"' not in filtered
    assert f'href="/runs/{probe.pk}/"' in filtered
    empty = client.get("/runs/?status=cancelled").content.decode()
    assert "No runs match these filters" in empty


def test_run_page_polls_while_active_and_shows_progress(client):
    run = RunFactory.create(status=RunStatus.RUNNING, progress_done=3, progress_total=4)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'data-active="1"' in html
    assert f'data-status-url="/runs/{run.pk}/status/"' in html
    assert "run_progress.js" in html
    assert 'style="width: 75.0%"' in html
    finished = RunFactory.create(status=RunStatus.SUCCEEDED)
    assert 'data-active="0"' in client.get(f"/runs/{finished.pk}/").content.decode()


def test_status_endpoint_reports_progress_and_timing(client):
    run = RunFactory.create(status=RunStatus.RUNNING, progress_done=1, progress_total=8)
    run.started_at = timezone.now() - timedelta(seconds=5)
    run.save(update_fields=["started_at"])
    response = client.get(f"/runs/{run.pk}/status/")
    assert response["Cache-Control"].startswith("max-age=0")
    body = response.json()
    assert body["status"] == "running" and body["is_active"] is True
    assert (body["progress_done"], body["progress_total"], body["progress_percent"]) == (1, 8, 12.5)
    assert body["duration_s"] >= 5
    assert body["finished_at"] is None


def test_private_runs_are_hidden_from_other_users(client):
    member, outsider = UserFactory.create(), UserFactory.create()
    team = TeamFactory.create()
    join(member, team)
    run = ChecklistRunFactory.create(
        checklist_submission=ChecklistSubmissionFactory.create(team=team)
    )
    for url in (f"/runs/{run.pk}/", f"/runs/{run.pk}/status/"):
        assert client.get(url).status_code == 404
        client.force_login(outsider)
        assert client.get(url).status_code == 404
        client.force_login(member)
        assert client.get(url).status_code == 200
        client.logout()


def test_my_submissions_needs_login_and_lists_only_ones_own(client):
    assert client.get("/runs/mine/").status_code == 302
    user, other = UserFactory.create(), UserFactory.create()
    mine = ResponseSubmissionFactory.create(owner=user, model_name="my-model")
    ProbeRunFactory.create(probe_submission=mine, status=RunStatus.QUEUED)
    ResponseSubmissionFactory.create(owner=other, model_name="their-model")
    ScannerFactory.create(owner=other, name="their-scanner")
    client.force_login(user)
    html = client.get("/runs/mine/").content.decode()
    assert "my-model" in html
    assert "their-model" not in html and "their-scanner" not in html
    assert 'class="badge queued"' in html
    client.force_login(other)
    assert "my-model" not in client.get("/runs/mine/").content.decode()


def test_my_submissions_empty_state_says_what_to_do(client):
    client.force_login(UserFactory.create())
    html = client.get("/runs/mine/").content.decode()
    assert "You have not submitted anything yet" in html
    assert 'href="/checklist/"' in html


def test_log_in_and_out(client):
    user = UserFactory.create()
    bad = client.post("/accounts/login/", {"username": user.username, "password": "wrong"})
    assert bad.status_code == 200
    assert "Please enter a correct username and password" in bad.content.decode()
    response = client.post(
        "/accounts/login/", {"username": user.username, "password": PASSWORD}, follow=True
    )
    html = response.content.decode()
    assert response.redirect_chain[-1][0] == "/"
    assert user.username in html and "Log out" in html
    client.post("/accounts/logout/")
    assert "Log in" in client.get("/").content.decode()


def test_login_redirects_back_to_the_page_asked_for(client):
    user = UserFactory.create()
    response = client.get("/runs/mine/")
    assert response["Location"].startswith("/accounts/login/?next=/runs/mine/")
    response = client.post(
        "/accounts/login/?next=/runs/mine/",
        {"username": user.username, "password": PASSWORD, "next": "/runs/mine/"},
    )
    assert response["Location"] == "/runs/mine/"


def test_my_submissions_link_to_each_benchmark_page(client):
    user = UserFactory.create()
    team = TeamFactory.create()
    join(user, team)
    scanner = ScannerFactory.create(owner=user, name="my-scanner")
    RunFactory.create(scanner=scanner)
    probes = ResponseSubmissionFactory.create(owner=user)
    checklist = ChecklistSubmissionFactory.create(team=team)
    client.force_login(user)
    html = client.get("/runs/mine/").content.decode()
    assert 'href="/audit/scanners/my-scanner/"' in html
    assert f'href="/probes/submissions/{probes.pk}/"' in html
    assert f'href="/checklist/submissions/{checklist.pk}/"' in html


def test_finished_run_links_to_its_results(client):
    probes = ResponseSubmissionFactory.create()
    run = ProbeRunFactory.create(probe_submission=probes, status=RunStatus.SUCCEEDED)
    body = client.get(f"/runs/{run.pk}/status/").json()
    assert body["result_url"] == f"/probes/submissions/{probes.pk}/"
    audit = RunFactory.create(status=RunStatus.SUCCEEDED)
    assert (
        client.get(f"/runs/{audit.pk}/status/").json()["result_url"] == f"/audit/runs/{audit.pk}/"
    )


def test_home_and_checklist_board_say_who_is_ranked_and_how_s_is_made(client):
    for path in ("/", "/checklist/"):
        html = client.get(path).content.decode()
        assert 'id="checklist-how-scored"' in html, path
        assert "Teams of paper authors are ranked" in html, path
        assert "S = C_G · C_A · (1 \u2212 R) · C_T" in html, path
        assert "LLM assessors" not in html, path


def test_home_shows_each_boards_top_rows_without_counting_the_board(client):
    """The home page's tables are each board's first rows (``Top N``, linked to the full
    board, which counts its entries): no board's rows are counted, and the top table's
    download holds the rows it shows."""
    seed_leaderboards(TOP_N + 5)
    with CaptureQueriesContext(connection) as queries:
        html = client.get("/").content.decode()
    assert html.count(f"Top {TOP_N}<") == 3
    counted = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith('SELECT COUNT(*) AS "__count" FROM') and "boardrow" in q["sql"]
    ]
    assert counted == []
    answer = client.get("/?audit-format=json")
    top = json.loads(b"".join(answer.streaming_content))
    assert top["count"] == len(top["results"]) == TOP_N
    assert [r["rank"] for r in top["results"]] == list(range(1, TOP_N + 1))
