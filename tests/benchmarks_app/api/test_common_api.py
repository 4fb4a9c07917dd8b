"""The shared API: index, benchmarks, runs, scanners, repos, own submissions, tokens."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from benchmarks_app.models import Benchmark, RunStatus
from tests.factories.common import (
    PASSWORD,
    ChecklistRunFactory,
    ChecklistSubmissionFactory,
    ProbeRunFactory,
    RepoFactory,
    ResponseSubmissionFactory,
    RunFactory,
    ScannerFactory,
    StaffFactory,
    TeamFactory,
    TruthFindingFactory,
    UserFactory,
    join,
    token_for,
)

pytestmark = pytest.mark.django_db


def ids(response) -> set[int]:
    assert response.status_code == 200, response.content
    return {row["id"] for row in response.json()["results"]}


# --- Index and benchmarks ----------------------------------------------------------------


def test_root_links_every_collection(api):
    body = api.get("/api/").json()
    assert body["runs"].endswith("/api/runs/")
    assert body["schema"].endswith("/api/schema/")
    assert body["my_submissions"].endswith("/api/submissions/")


def test_benchmarks_count_only_runs_the_client_may_see(api):
    RunFactory.create(status=RunStatus.SUCCEEDED)
    ProbeRunFactory.create(status=RunStatus.RUNNING)
    ChecklistRunFactory.create()  # another team's: private
    body = api.get("/api/benchmarks/").json()
    by_slug = {b["slug"]: b for b in body}
    assert list(by_slug) == [b.value for b in Benchmark]
    assert by_slug["audit"]["run_count"] == 1
    assert by_slug["audit"]["succeeded_runs"] == 1
    assert by_slug["probes"]["active_runs"] == 1
    assert by_slug["checklist"]["run_count"] == 0
    assert by_slug["audit"]["page"].endswith("/audit/")


# --- Runs --------------------------------------------------------------------------------


def test_runs_show_status_progress_and_timing(api):
    started = timezone.now() - timedelta(seconds=30)
    run = RunFactory.create(status=RunStatus.RUNNING, progress_done=3, progress_total=12)
    run.started_at = started
    run.save(update_fields=["started_at"])
    row = api.get("/api/runs/").json()["results"][0]
    assert row["id"] == run.pk
    assert row["status"] == "running"
    assert row["is_active"] is True
    assert (row["progress_done"], row["progress_total"]) == (3, 12)
    assert row["progress_percent"] == pytest.approx(25.0)
    assert row["duration_s"] >= 29
    assert run.scanner is not None
    assert row["target"] == run.scanner.name
    assert row["page"].endswith(f"/runs/{run.pk}/")
    detail = api.get(row["url"]).json()
    assert detail["repos"] == []


def test_checklist_runs_are_visible_to_their_team_and_staff_only(api):
    member, outsider, staff = UserFactory.create(), UserFactory.create(), StaffFactory.create()
    team = TeamFactory.create()
    join(member, team)
    mine = ChecklistRunFactory.create(
        checklist_submission=ChecklistSubmissionFactory.create(team=team)
    )
    theirs = ChecklistRunFactory.create()
    public = RunFactory.create()

    assert ids(api.get("/api/runs/")) == {public.pk}
    api.force_authenticate(outsider)
    assert ids(api.get("/api/runs/")) == {public.pk}
    assert api.get(f"/api/runs/{mine.pk}/").status_code == 404
    api.force_authenticate(member)
    assert ids(api.get("/api/runs/")) == {public.pk, mine.pk}
    assert api.get(f"/api/runs/{theirs.pk}/").status_code == 404
    api.force_authenticate(staff)
    assert ids(api.get("/api/runs/")) == {public.pk, mine.pk, theirs.pk}


def test_runs_filter_and_order(api):
    user = UserFactory.create()
    queued = RunFactory.create(status=RunStatus.QUEUED)
    done = RunFactory.create(status=RunStatus.SUCCEEDED, created_by=user)
    probe = ProbeRunFactory.create(status=RunStatus.FAILED)
    assert ids(api.get("/api/runs/?benchmark=probes")) == {probe.pk}
    assert ids(api.get("/api/runs/?status=queued&status=failed")) == {queued.pk, probe.pk}
    assert ids(api.get("/api/runs/?active=true")) == {queued.pk}
    assert ids(api.get("/api/runs/?active=false")) == {done.pk, probe.pk}
    assert ids(api.get(f"/api/runs/?scanner={done.scanner_id}")) == {done.pk}
    assert ids(api.get("/api/runs/?mine=true")) == set()
    api.force_authenticate(user)
    assert ids(api.get("/api/runs/?mine=true")) == {done.pk}
    oldest_first = [r["id"] for r in api.get("/api/runs/?ordering=created_at").json()["results"]]
    assert oldest_first == [queued.pk, done.pk, probe.pk]
    newest_first = [r["id"] for r in api.get("/api/runs/").json()["results"]]
    assert newest_first == oldest_first[::-1]


def test_bad_filter_value_names_the_field(api):
    response = api.get("/api/runs/?benchmark=chess")
    assert response.status_code == 400
    body = response.json()
    assert body["errors"][0]["field"] == "benchmark"
    assert "chess" in body["errors"][0]["reason"]
    assert body["detail"].startswith("benchmark: ")


def test_runs_are_read_only(api):
    anonymous = api.post("/api/runs/", {"benchmark": "audit"}, format="json")
    assert anonymous.status_code == 401
    assert anonymous.json()["code"] == "not_authenticated"
    assert anonymous.json()["errors"][0]["field"] is None
    api.force_authenticate(UserFactory.create())
    assert api.post("/api/runs/", {}, format="json").status_code == 405
    run = RunFactory.create()
    assert api.delete(f"/api/runs/{run.pk}/").status_code == 405


def test_pagination_honours_page_size_with_a_cap(api):
    RunFactory.create_batch(4)
    body = api.get("/api/runs/?page_size=3").json()
    assert body["count"] == 4
    assert len(body["results"]) == 3
    assert body["next"] is not None
    assert len(api.get("/api/runs/?page=2&page_size=3").json()["results"]) == 1
    assert api.get("/api/runs/?page=9").status_code == 404


# --- Scanners and repos ------------------------------------------------------------------


def test_scanners_list_filters_orders_and_hides_owners(api):
    owner = UserFactory.create()
    zeta = ScannerFactory.create(name="zeta-auditor", owner=owner)
    alpha = ScannerFactory.create(name="alpha-auditor")
    RunFactory.create(scanner=zeta)
    rows = api.get("/api/audit/scanners/").json()["results"]
    assert [r["name"] for r in rows] == ["alpha-auditor", "zeta-auditor"]
    assert "owner" not in rows[0]
    assert rows[1]["run_count"] == 1
    assert ids(api.get("/api/audit/scanners/?name=ZETA")) == {zeta.pk}
    by_runs = api.get("/api/audit/scanners/?ordering=-run_count").json()["results"]
    assert by_runs[0]["id"] == zeta.pk
    assert api.get(f"/api/audit/scanners/{alpha.pk}/").json()["name"] == "alpha-auditor"


def test_repo_descriptions_reach_only_those_allowed(api):
    hidden = RepoFactory.create(is_public=False)
    TruthFindingFactory.create(repo=hidden, description="SECRET-hidden-repo")
    public = RepoFactory.create(is_public=True)
    TruthFindingFactory.create(repo=public, description="open-description")

    listing = api.get("/api/audit/repos/")
    assert b"SECRET" not in listing.content
    row = next(r for r in listing.json()["results"] if r["id"] == hidden.pk)
    assert row["truth_count"] == 1
    assert "truth_findings" not in row

    for user in (None, UserFactory.create()):
        api.force_authenticate(user)
        detail = api.get(f"/api/audit/repos/{hidden.pk}/")
        assert b"SECRET" not in detail.content
        assert detail.json()["truth_findings"][0]["description"] is None
        assert detail.json()["truth_findings"][0]["title"] is None  # hidden truth stays hidden
        opened = api.get(f"/api/audit/repos/{public.pk}/").json()
        assert opened["truth_findings"][0]["description"] == "open-description"

    api.force_authenticate(StaffFactory.create())
    staff_view = api.get(f"/api/audit/repos/{hidden.pk}/").json()
    assert staff_view["truth_findings"][0]["description"] == "SECRET-hidden-repo"


def test_repos_filter_and_search(api):
    a = RepoFactory.create(
        project_id="code4rena_kinetiq_2025_07", platform="code4rena", is_public=True
    )
    b = RepoFactory.create(project_id="cantina_minimal-delegation_2025_04", platform="cantina")
    assert ids(api.get("/api/audit/repos/?platform=CANTINA")) == {b.pk}
    assert ids(api.get("/api/audit/repos/?search=kinetiq")) == {a.pk}
    assert ids(api.get("/api/audit/repos/?is_public=true")) == {a.pk}
    ordered = api.get("/api/audit/repos/?ordering=-project_id").json()["results"]
    assert [r["id"] for r in ordered] == [a.pk, b.pk]


# --- Own submissions ---------------------------------------------------------------------


def test_own_submissions_need_authentication(api):
    response = api.get("/api/submissions/")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_own_submissions_list_each_benchmark_with_status(api):
    user, other = UserFactory.create(), UserFactory.create()
    team = TeamFactory.create()
    join(user, team)
    scanner = ScannerFactory.create(owner=user)
    RunFactory.create(scanner=scanner, status=RunStatus.SUCCEEDED)
    probes = ResponseSubmissionFactory.create(owner=user)
    probe_run = ProbeRunFactory.create(
        probe_submission=probes, status=RunStatus.RUNNING, progress_done=2, progress_total=5
    )
    checklist = ChecklistSubmissionFactory.create(team=team, status="assessing")
    # Someone else's entries of every kind.
    ScannerFactory.create(owner=other)
    ResponseSubmissionFactory.create(owner=other)
    ChecklistSubmissionFactory.create()

    api.force_authenticate(user)
    rows = api.get("/api/submissions/").json()["results"]
    by_benchmark = {r["benchmark"]: r for r in rows}
    assert len(rows) == 3
    assert by_benchmark["audit"]["id"] == scanner.pk
    assert by_benchmark["audit"]["status"] == "succeeded"
    assert by_benchmark["probes"]["status"] == "running"
    assert by_benchmark["probes"]["run_id"] == probe_run.pk
    assert (by_benchmark["probes"]["progress_done"], by_benchmark["probes"]["progress_total"]) == (
        2,
        5,
    )
    assert by_benchmark["probes"]["run"].endswith(f"/api/runs/{probe_run.pk}/")
    assert by_benchmark["checklist"]["id"] == checklist.pk
    assert by_benchmark["checklist"]["status"] == "assessing"
    assert by_benchmark["checklist"]["run_id"] is None

    only_probes = api.get("/api/submissions/?benchmark=probes").json()["results"]
    assert [r["benchmark"] for r in only_probes] == ["probes"]
    running = api.get("/api/submissions/?status=running").json()["results"]
    assert [r["id"] for r in running] == [probes.pk]
    bad = api.get("/api/submissions/?benchmark=chess")
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["field"] == "benchmark"


def test_latest_run_decides_a_submission_status(api):
    user = UserFactory.create()
    probes = ResponseSubmissionFactory.create(owner=user)
    ProbeRunFactory.create(probe_submission=probes, status=RunStatus.FAILED)
    ProbeRunFactory.create(probe_submission=probes, status=RunStatus.SUCCEEDED)
    api.force_authenticate(user)
    (row,) = api.get("/api/submissions/").json()["results"]
    assert row["status"] == "succeeded"


# --- Token authentication ----------------------------------------------------------------


def test_token_is_issued_for_valid_credentials_and_authenticates(api):
    user = UserFactory.create()
    issued = api.post(
        "/api/auth/token/", {"username": user.username, "password": PASSWORD}, format="json"
    )
    assert issued.status_code == 200
    key = issued.json()["token"]
    assert key == token_for(user)
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/submissions/").status_code == 200


def test_wrong_password_and_bad_token_are_json_errors(api):
    user = UserFactory.create()
    wrong = api.post(
        "/api/auth/token/", {"username": user.username, "password": "nope"}, format="json"
    )
    assert wrong.status_code == 400
    assert "Unable to log in" in wrong.json()["errors"][0]["reason"]
    missing = api.post("/api/auth/token/", {"username": user.username}, format="json")
    assert missing.json()["errors"] == [
        {"field": "password", "reason": "This field is required.", "code": "required"}
    ]
    api.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    bad = api.get("/api/runs/")
    assert bad.status_code == 401
    assert bad.json()["code"] == "authentication_failed"
