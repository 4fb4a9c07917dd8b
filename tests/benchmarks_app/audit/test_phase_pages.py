"""The web side of audit challenge operations: the board's phase selector and hidden notice,
baseline badge and method link; the run page's choice button; the scanner page's description
form; the submit form's method fields and its "unchanged" answer."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, cast

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from benchmarks_app.models import EvaluationRun, Repo, Scanner
from benchmarks_app.models.audit import DatasetRelease
from benchmarks_app.services.phases import phase_create, phase_reveal
from benchmarks_app.services.runs import run_wait
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import RepoFactory, TruthFindingFactory

pytestmark = pytest.mark.django_db

HIT = {"title": "Reentrancy in withdraw", "description": "Vault.sol drains", "severity": "high"}


@pytest.fixture
def repo(db: Any) -> Repo:
    made = cast(Repo, RepoFactory(project_id="code4rena_vault_2025_01"))
    TruthFindingFactory(repo=made, title="Reentrancy in withdraw")
    publish_dataset(made)
    return made


@pytest.fixture
def other(db: Any) -> Any:
    return get_user_model().objects.create_user("rival", password="pw")


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def upload_form(client: Client, repo: Repo, findings: list[Any], **fields: Any) -> Any:
    raw = json.dumps(findings).encode()
    data = {
        "repo": repo.project_id,
        "scanner": "mytool",
        "judge": "offline",
        "file": SimpleUploadedFile("results.json", raw, content_type="application/json"),
        **fields,
    }
    return client.post("/audit/submit/", data)


def submitted(client: Client, repo: Repo, findings: list[Any], **fields: Any) -> EvaluationRun:
    answer = upload_form(client, repo, findings, **fields)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    return run_wait(run=EvaluationRun.objects.order_by("-pk").first())  # type: ignore[arg-type]


def test_the_form_carries_the_method_and_an_identical_upload_is_unchanged(
    user: Any, repo: Repo
) -> None:
    client = signed_in(user)
    run = submitted(
        client, repo, [HIT], method_name="Tree search", method_url="https://example.org/ts"
    )
    assert (run.method_name, run.method_url) == ("Tree search", "https://example.org/ts")
    page = Client().get("/audit/").content.decode()
    assert 'href="https://example.org/ts"' in page and "Tree search" in page

    again = upload_form(client, repo, [HIT])
    assert again.status_code == 302 and again["Location"] == f"/audit/runs/{run.pk}/"
    assert EvaluationRun.objects.count() == 1
    shown = client.get(again["Location"]).content.decode()
    assert "Unchanged: these are the findings that run #" in shown

    bad = upload_form(client, repo, [HIT, {"severity": "high"}], method_url="ftp://x")
    assert bad.status_code == 400 and EvaluationRun.objects.count() == 1


def test_the_board_shows_the_baseline_badge(user: Any, repo: Repo) -> None:
    submitted(signed_in(user), repo, [HIT])
    Scanner.objects.filter(name="mytool").update(is_baseline=True)
    from benchmarks_app.services.audit import audit_boards_refresh_all

    audit_boards_refresh_all()
    page = Client().get("/audit/").content.decode()
    assert ">baseline<" in page


def test_a_hidden_phase_board_page_says_so_and_shows_only_your_rows(
    user: Any, other: Any, repo: Repo
) -> None:
    release = DatasetRelease.objects.get(dataset__slug="ds")
    now = timezone.now()
    phase_create(
        target=release,
        name="Final",
        slug="final",
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=1),
        is_hidden=True,
    )
    submitted(signed_in(user), repo, [HIT])
    anonymous = Client().get("/audit/?phase=final").content.decode()
    assert 'id="hidden-phase"' in anonymous and "mytool" not in anonymous
    assert 'id="phase-chips"' in anonymous and "Final (hidden)" in anonymous
    mine = signed_in(user).get("/audit/?phase=final").content.decode()
    assert "you see only your own scanners" in mine and "mytool" in mine
    assert "mytool" not in signed_in(other).get("/audit/?phase=final").content.decode()


def _hidden_final(release: DatasetRelease) -> Any:
    now = timezone.now()
    return phase_create(
        target=release,
        name="Final",
        slug="final",
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=1),
        is_hidden=True,
    )


def _scanner_names(client: Client) -> dict[str, int]:
    answer = client.get("/api/audit/scanners/")
    assert answer.status_code == 200
    return {row["name"]: row["run_count"] for row in answer.json()["results"]}


def test_a_hidden_phase_entrant_is_shown_to_its_owner_and_staff_only(
    user: Any, other: Any, staff: Any, repo: Repo
) -> None:
    phase = _hidden_final(DatasetRelease.objects.get(dataset__slug="ds"))
    run = submitted(signed_in(user), repo, [HIT])
    assert run.phase_id == phase.pk
    Scanner.objects.create(name="imported-tool")  # no run: listed as before
    page = "/audit/scanners/mytool/"
    for outsider in (Client(), signed_in(other)):
        assert _scanner_names(outsider) == {"imported-tool": 0}
        assert outsider.get(page).status_code == 404
        scanner_id = Scanner.objects.get(name="mytool").pk
        assert outsider.get(f"/api/audit/scanners/{scanner_id}/").status_code == 404
        assert outsider.get("/api/audit/reports/mytool/").status_code == 404
    for insider in (signed_in(user), signed_in(staff)):
        assert _scanner_names(insider)["mytool"] == 1
        assert insider.get(page).status_code == 200
        assert insider.get("/api/audit/reports/mytool/").status_code == 200
    # Revealed, the entrant is everybody's to see.
    phase_reveal(phase=phase)
    assert _scanner_names(Client()) == {"imported-tool": 0, "mytool": 1}
    assert Client().get(page).status_code == 200


def test_run_count_leaves_out_hidden_phase_runs(user: Any, other: Any, repo: Repo) -> None:
    submitted(signed_in(user), repo, [HIT])  # before any phase: public
    _hidden_final(DatasetRelease.objects.get(dataset__slug="ds"))
    submitted(signed_in(user), repo, [{**HIT, "title": "Another"}])
    assert _scanner_names(signed_in(other)) == {"mytool": 1}
    assert _scanner_names(signed_in(user)) == {"mytool": 2}


def test_the_owner_chooses_a_run_on_its_page(user: Any, other: Any, repo: Repo) -> None:
    client = signed_in(user)
    first = submitted(client, repo, [HIT])
    submitted(client, repo, [{**HIT, "title": "Something else"}])
    url = f"/audit/runs/{first.pk}/"
    assert "Show this run on the board" in client.get(url).content.decode()
    assert "Show this run on the board" not in signed_in(other).get(url).content.decode()

    signed_in(other).post(f"{url}choose/", {"chosen": "1"})
    assert not EvaluationRun.objects.filter(board_choice=True).exists()
    answer = client.post(f"{url}choose/", {"chosen": "1"}, follow=True)
    assert "now stands for mytool" in answer.content.decode()
    assert list(EvaluationRun.objects.filter(board_choice=True)) == [first]
    assert "Use the latest results instead" in answer.content.decode()


def test_the_owner_describes_the_scanner_on_its_page(user: Any, other: Any, repo: Repo) -> None:
    submitted(signed_in(user), repo, [HIT])
    url = "/audit/scanners/mytool/"
    assert 'id="id_description"' in signed_in(user).get(url).content.decode()
    assert 'id="id_description"' not in signed_in(other).get(url).content.decode()
    signed_in(other).post(f"{url}describe/", {"description": "taken over"})
    assert Scanner.objects.get(name="mytool").description == ""
    signed_in(user).post(f"{url}describe/", {"description": "Symbolic execution"})
    assert Scanner.objects.get(name="mytool").description == "Symbolic execution"
    assert "Symbolic execution" in Client().get(url).content.decode()
