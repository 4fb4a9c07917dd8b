"""Audit challenge operations: phases (dates, quotas, hidden boards), the entry a scanner's
owner chooses for the board, the method an entry carries, and what an upload is refused for
(every bad finding named) or answered with ("unchanged", at no cost)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from benchmarks_app.models import EvaluationRun, Phase, Repo, Scanner
from benchmarks_app.models.audit import AuditBoardRow, DatasetRelease
from benchmarks_app.selectors.audit_submission_quota import audit_submission_quota
from benchmarks_app.services.phases import phase_create, phase_reveal
from benchmarks_app.services.runs import run_wait
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import RepoFactory, TruthFindingFactory

pytestmark = pytest.mark.django_db

HIT = {"title": "Reentrancy in withdraw", "description": "Vault.sol drains", "severity": "high"}
MISS = {"title": "Unchecked return value", "description": "Token.sol ignores it", "severity": "low"}
BOARD = "/api/audit/leaderboard/"


@pytest.fixture
def repo(db: Any) -> Repo:
    made = cast(Repo, RepoFactory(project_id="code4rena_vault_2025_01"))
    TruthFindingFactory(repo=made, title="Reentrancy in withdraw")
    TruthFindingFactory(repo=made, title="Oracle price can be stale")
    publish_dataset(made)
    return made


@pytest.fixture
def release(repo: Repo) -> DatasetRelease:
    return DatasetRelease.objects.get(dataset__slug="ds", number=1)


@pytest.fixture
def other(db: Any) -> Any:
    return get_user_model().objects.create_user("rival", password="pw")


def client_for(user: Any = None) -> APIClient:
    api = APIClient()
    if user is not None:
        api.force_authenticate(user)
    return api


def submit(user: Any, repo: Repo, findings: list[Any], **params: Any) -> Any:
    query = "&".join(f"{k}={v}" for k, v in {"scanner": "mine", **params}.items())
    return client_for(user).post(
        f"/api/audit/repos/{repo.project_id}/results/?{query}", findings, format="json"
    )


def submitted_run(answer: Any) -> EvaluationRun:
    assert answer.status_code == 202, answer.json()
    return run_wait(run=EvaluationRun.objects.get(pk=answer.json()["run"]))


def reasons(answer: Any) -> dict[str, str]:
    return {e["field"]: e["reason"] for e in answer.json()["errors"]}


def open_phase(release: DatasetRelease, **kwargs: Any) -> Phase:
    now = timezone.now()
    return phase_create(
        target=release,
        name=kwargs.pop("name", "Development"),
        slug=kwargs.pop("slug", "dev"),
        starts_at=kwargs.pop("starts_at", now - timedelta(days=1)),
        ends_at=kwargs.pop("ends_at", now + timedelta(days=1)),
        **kwargs,
    )


def board(api: APIClient, **params: Any) -> list[dict[str, Any]]:
    answer = api.get(BOARD, params)
    assert answer.status_code == 200, answer.json()
    return cast(list[dict[str, Any]], answer.json()["results"])


# --- phases --------------------------------------------------------------------------------


def test_a_submission_outside_every_phase_is_refused_with_the_dates(
    user: Any, repo: Repo, release: DatasetRelease
) -> None:
    now = timezone.now()
    open_phase(release, name="Final", slug="final", starts_at=now + timedelta(days=2), ends_at=None)
    answer = submit(user, repo, [HIT])
    assert answer.status_code == 400
    message = reasons(answer)["phase"]
    assert "the next, Final, opens" in message and "open-ended" in message
    assert EvaluationRun.objects.count() == 0


def test_a_submission_lands_in_the_open_phase_and_its_board(
    user: Any, repo: Repo, release: DatasetRelease
) -> None:
    phase = open_phase(release)
    run = submitted_run(submit(user, repo, [HIT]))
    assert run.phase_id == phase.pk and run.release_id == release.pk
    phase_rows = AuditBoardRow.objects.filter(release=release, phase=phase)
    whole_rows = AuditBoardRow.objects.filter(release=release, phase__isnull=True)
    assert [r.run_ids for r in phase_rows] == [[run.pk]] == [r.run_ids for r in whole_rows]
    assert [r["scanner"] for r in board(client_for(), phase="dev")] == ["mine"]
    unknown = client_for().get(BOARD, {"phase": "nope"})
    assert unknown.status_code == 404 and "no phase 'nope'" in str(unknown.json())


def test_a_phase_with_limits_counts_its_own_submissions_instead_of_the_site_limit(
    user: Any, repo: Repo, release: DatasetRelease, settings: Any
) -> None:
    settings.AUDIT_DAILY_SUBMISSIONS = 0  # the site allows none, but the phase has its own
    phase = open_phase(release, total_limit=1)
    assert submit(user, repo, [HIT]).status_code == 202
    quota = audit_submission_quota(user=user, phase=phase)
    assert (quota.total_limit, quota.used_total, quota.remaining) == (1, 1, 0)
    again = submit(user, repo, [HIT, MISS])
    assert again.status_code == 429
    assert "limit of 1 audit submission(s) in phase Development" in reasons(again)["submissions"]
    assert EvaluationRun.objects.count() == 1


def test_a_hidden_phase_board_shows_staff_all_and_participants_their_own(
    user: Any, other: Any, staff: Any, repo: Repo, release: DatasetRelease
) -> None:
    phase = open_phase(release, is_hidden=True)
    submitted_run(submit(user, repo, [HIT], method_name="Mine-v1"))
    submitted_run(submit(other, repo, [MISS], scanner="theirs"))
    assert board(client_for(), phase="dev") == []
    assert [r["scanner"] for r in board(client_for(user), phase="dev")] == ["mine"]
    assert {r["scanner"] for r in board(client_for(staff), phase="dev")} == {"mine", "theirs"}
    # The whole release's board is public: a hidden phase's runs are not on it yet.
    assert board(client_for()) == []
    # Revealing rewrites the release's boards by itself.
    phase_reveal(phase=phase)
    assert {r["scanner"] for r in board(client_for(), phase="dev")} == {"mine", "theirs"}
    rows = {r["scanner"]: r for r in board(client_for())}
    assert set(rows) == {"mine", "theirs"} and rows["mine"]["method_name"] == "Mine-v1"


# --- the chosen entry ----------------------------------------------------------------------


def test_the_owner_chooses_which_run_stands_for_the_scanner(
    user: Any, other: Any, repo: Repo, release: DatasetRelease
) -> None:
    first = submitted_run(submit(user, repo, [HIT], method_name="good"))
    second = submitted_run(submit(user, repo, [MISS], method_name="worse"))
    (row,) = board(client_for())
    assert (row["tp"], row["method_name"]) == (0, "worse")  # the latest, by default

    url = f"/api/audit/runs/{first.pk}/choose/"
    assert client_for(other).post(url, {"chosen": True}, format="json").status_code == 403
    assert client_for().post(url, {"chosen": True}, format="json").status_code in (401, 403)
    answer = client_for(user).post(url, {"chosen": True}, format="json")
    assert answer.status_code == 200 and answer.json()["chosen"] is True
    (row,) = board(client_for())
    assert (row["tp"], row["method_name"]) == (1, "good")

    # Choosing the other run unchooses the first; unchoosing goes back to the latest.
    client_for(user).post(f"/api/audit/runs/{second.pk}/choose/", {}, format="json")
    assert list(EvaluationRun.objects.filter(board_choice=True)) == [second]
    client_for(user).post(f"/api/audit/runs/{second.pk}/choose/", {"chosen": False}, format="json")
    assert not EvaluationRun.objects.filter(board_choice=True).exists()
    assert board(client_for())[0]["method_name"] == "worse"


def test_only_a_complete_run_can_be_chosen(user: Any, repo: Repo) -> None:
    run = EvaluationRun.objects.get(pk=submit(user, repo, [HIT]).json()["run"])
    EvaluationRun.objects.filter(pk=run.pk).update(status="failed")
    answer = client_for(user).post(f"/api/audit/runs/{run.pk}/choose/", {}, format="json")
    assert answer.status_code == 400 and "only a complete run" in reasons(answer)["run"]


# --- method metadata and scanner descriptions ------------------------------------------------


def test_the_method_is_stored_with_the_run_and_a_bad_link_is_refused(user: Any, repo: Repo) -> None:
    bad = submit(user, repo, [HIT], method_url="javascript:alert(1)")
    assert bad.status_code == 400 and "http(s) link" in reasons(bad)["method_url"]
    long = submit(user, repo, [HIT], method_name="x" * 101)
    assert long.status_code == 400 and "at most 100" in reasons(long)["method_name"]
    assert EvaluationRun.objects.count() == 0
    run = submitted_run(
        submit(user, repo, [HIT], method_name="GPT%20auditor", method_url="https://x.org/p")
    )
    assert (run.method_name, run.method_url) == ("GPT auditor", "https://x.org/p")
    (row,) = board(client_for())
    assert (row["method_name"], row["method_url"], row["is_baseline"]) == (
        "GPT auditor",
        "https://x.org/p",
        False,
    )


def test_a_scanner_description_is_set_by_its_owner_only(
    user: Any, other: Any, staff: Any, repo: Repo
) -> None:
    submit(user, repo, [HIT])
    scanner = Scanner.objects.get(name="mine")
    url = f"/api/audit/scanners/{scanner.pk}/"
    body = {"description": "Static analysis plus an LLM"}
    assert client_for().patch(url, body, format="json").status_code in (401, 403)
    assert client_for(other).patch(url, body, format="json").status_code == 403
    answer = client_for(user).patch(url, body, format="json")
    assert answer.status_code == 200 and answer.json()["description"] == body["description"]
    too_long = client_for(staff).patch(url, {"description": "x" * 2001}, format="json")
    assert too_long.status_code == 400
    assert Scanner.objects.get(pk=scanner.pk).description == body["description"]


# --- uploads: every bad finding named, untitled ones confirmed, unchanged re-uploads ----------


def test_every_bad_finding_is_named_from_one(user: Any, repo: Repo) -> None:
    findings: list[Any] = [HIT, {"severity": "high"}, {**HIT, "severity": "urgent"}, 7]
    answer = submit(user, repo, findings)
    assert answer.status_code == 400
    message = reasons(answer)["findings"]
    assert message.startswith("finding 2: title and description both missing; finding 3.sev")
    assert "finding 4: expected an object" in message and "finding 1" not in message
    assert EvaluationRun.objects.count() == 0


def test_a_long_list_of_bad_findings_is_capped(user: Any, repo: Repo) -> None:
    answer = submit(user, repo, [{"severity": "high"}] * 25)
    message = reasons(answer)["findings"]
    assert message.count("title and description both missing") == 20
    assert "finding 20:" in message and "finding 21:" not in message
    assert "and 5 more" in message and "confirm_untitled=true" in message


def test_untitled_findings_are_kept_once_confirmed(user: Any, repo: Repo) -> None:
    refused = submit(user, repo, [HIT, {"severity": "high"}])
    assert refused.status_code == 400 and "confirm_untitled" in reasons(refused)["findings"]
    run = submitted_run(submit(user, repo, [HIT, {"severity": "high"}], confirm_untitled="true"))
    titles = list(
        run.audit_scans.get().scan_result.findings.order_by("index").values_list("title", flat=True)
    )
    assert titles == [HIT["title"], "(untitled)"]


def test_an_identical_upload_is_unchanged_and_costs_nothing(user: Any, repo: Repo) -> None:
    run = submitted_run(submit(user, repo, [HIT]))
    again = submit(user, repo, [HIT])
    assert again.status_code == 200
    body = again.json()
    assert (body["status"], body["run"]) == ("unchanged", run.pk)
    assert "nothing was stored" in body["detail"]
    assert EvaluationRun.objects.count() == 1
    assert audit_submission_quota(user=user).used_today == 1
    # A failed run judged nothing: the same findings are then a new submission.
    EvaluationRun.objects.filter(pk=run.pk).update(status="failed")
    assert submit(user, repo, [HIT]).status_code == 202


def test_a_hidden_phase_run_and_its_report_are_for_its_owner_and_staff(
    user: Any, other: Any, staff: Any, repo: Repo, release: DatasetRelease
) -> None:
    open_phase(release, is_hidden=True)
    run = submitted_run(submit(user, repo, [HIT]))
    page, report = f"/audit/runs/{run.pk}/", f"/api/audit/reports/mine/?run={run.pk}"
    for who, seen in ((None, False), (other, False), (user, True), (staff, True)):
        api = client_for(who)
        assert (api.get(report).status_code == 200) is seen, who
        web = APIClient()
        if who is not None:
            web.force_login(who)
        assert (web.get(page).status_code == 200) is seen, who
