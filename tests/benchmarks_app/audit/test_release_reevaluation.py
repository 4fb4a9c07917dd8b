"""A new official release starts with an empty board; maintainers put its entries back on it
with one admin action (or ``evaluate_release``) instead of asking every participant to
upload again."""

from __future__ import annotations

import io
from typing import Any, cast

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from benchmarks_app.models import EvaluationRun, RunStatus, Scanner
from benchmarks_app.models.audit import AuditBoardRow, DatasetRelease
from benchmarks_app.services.audit import (
    audit_release_create,
    audit_release_make_official,
    audit_release_publish,
    audit_run_create,
)
from benchmarks_app.services.runs import run_wait
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import repo_with_scan

pytestmark = pytest.mark.django_db


def _two_scanners_on_release_one() -> DatasetRelease:
    repo, first = repo_with_scan(
        truths=["Reentrancy in withdraw", "Oracle staleness"],
        findings=["Reentrancy in withdraw drains the vault"],
        scanner="alpha",
    )
    publish_dataset(repo)
    from tests.factories.audit import ScanFindingFactory, ScannerFactory, ScanResultFactory

    second = ScanResultFactory(repo=repo, scanner=ScannerFactory(name="beta"))
    ScanFindingFactory(scan_result=second, index=0, title="Stale oracle price")
    for result in (first, second):
        run_wait(run=audit_run_create(scanner=cast(Scanner, result.scanner), judge="offline"))
    release = DatasetRelease.objects.get(number=1)
    assert AuditBoardRow.objects.filter(release=release, is_complete=True).count() == 2
    return release


def _new_official_release(first: DatasetRelease) -> DatasetRelease:
    second = audit_release_publish(release=audit_release_create(dataset=first.dataset))
    audit_release_make_official(release=second)
    return second


@pytest.fixture
def admin_client(db: Any) -> Client:
    client = Client()
    client.force_login(
        get_user_model().objects.create_superuser("root", "root@example.org", "pw-123456")
    )
    return client


def test_the_admin_action_puts_every_entry_on_the_new_board(
    admin_client: Client, django_capture_on_commit_callbacks: Any
) -> None:
    second = _new_official_release(_two_scanners_on_release_one())
    board_page = Client().get("/audit/").content.decode()
    assert "alpha" not in board_page and "beta" not in board_page  # empty, as before

    releases = reverse("admin:benchmarks_app_datasetrelease_changelist")
    # The runs are sent to the queue when the action's transaction commits (Q_SYNC: run here).
    with django_capture_on_commit_callbacks(execute=True):
        done = admin_client.post(
            releases, {"action": "evaluate_entries", "_selected_action": [second.pk]}, follow=True
        )
    assert "2 entries queued" in done.content.decode()
    runs = EvaluationRun.objects.filter(release=second)
    assert sorted(r.scanner.name for r in runs if r.scanner) == ["alpha", "beta"]
    assert {r.status for r in runs} == {RunStatus.SUCCEEDED}  # Q_SYNC ran them here
    rows = AuditBoardRow.objects.filter(release=second, is_complete=True, phase__isnull=True)
    assert sorted(rows.values_list("scanner__name", flat=True)) == ["alpha", "beta"]
    board_page = Client().get("/audit/").content.decode()
    assert "alpha" in board_page and "beta" in board_page

    # Repeating it queues nothing: both are on the board with their current results.
    again = admin_client.post(
        releases, {"action": "evaluate_entries", "_selected_action": [second.pk]}, follow=True
    ).content.decode()
    assert "0 entries queued" in again and "already on this board" in again
    assert EvaluationRun.objects.filter(release=second).count() == 2


def test_the_command_does_the_same_and_refuses_an_unknown_dataset() -> None:
    first = _two_scanners_on_release_one()
    second = _new_official_release(first)
    out = io.StringIO()
    call_command("evaluate_release", "--dataset", first.dataset.slug, stdout=out)
    assert f"{second}, judge offline: 2 entries queued" in out.getvalue()
    assert EvaluationRun.objects.filter(release=second).count() == 2
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no dataset 'nope'"):
        call_command("evaluate_release", "--dataset", "nope")


def test_board_and_scanner_pages_say_what_is_being_evaluated() -> None:
    first = _two_scanners_on_release_one()
    second = _new_official_release(first)
    scanner = Scanner.objects.get(name="alpha")
    run = audit_run_create(scanner=scanner, release=second, judge="offline", enqueue=False)
    board = Client().get("/audit/").content.decode()
    assert 'id="board-in-progress"' in board
    assert reverse("audit:run", args=[run.pk]) in board and "alpha" in board
    page = Client().get(reverse("audit:scanner", args=["alpha"])).content.decode()
    assert 'id="scanner-in-progress"' in page and f"run #{run.pk}" in page
    # The other scanner's page says nothing of alpha's run.
    other = Client().get(reverse("audit:scanner", args=["beta"])).content.decode()
    assert 'id="scanner-in-progress"' not in other
    # Once the run ends, the notice is gone.
    run_wait(run=run)
    assert 'id="board-in-progress"' not in Client().get("/audit/").content.decode()


def _hidden_entrant_on_release_one() -> tuple[DatasetRelease, Any]:
    """alpha and beta on release 1's public board; ``hidden-scan`` only in its hidden phase."""
    from datetime import timedelta

    from django.utils import timezone

    from benchmarks_app.services.phases import phase_create
    from tests.factories.audit import ScanFindingFactory, ScannerFactory, ScanResultFactory

    first = _two_scanners_on_release_one()
    now = timezone.now()
    hidden = phase_create(
        target=first,
        name="Final",
        slug="final",
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=5),
        is_hidden=True,
    )
    from benchmarks_app.models import Repo

    repo = Repo.objects.get()
    owner = get_user_model().objects.create_user("hider", password="pw")
    result = ScanResultFactory(repo=repo, scanner=ScannerFactory(name="hidden-scan", owner=owner))
    ScanFindingFactory(scan_result=result, index=0, title="Reentrancy in withdraw")
    run_wait(
        run=audit_run_create(
            scanner=cast(Scanner, result.scanner), judge="offline", release=first, phase=hidden
        )
    )
    assert "hidden-scan" not in Client().get("/audit/").content.decode()
    return first, owner


def test_a_hidden_phase_entrant_stays_hidden_when_a_release_is_evaluated_again(
    admin_client: Client, django_capture_on_commit_callbacks: Any
) -> None:
    first, _ = _hidden_entrant_on_release_one()
    second = _new_official_release(first)
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("evaluate_release", "--dataset", first.dataset.slug, stdout=out)
    # Left out until the reveal, and said so; the public entrants are queued.
    assert "2 entries queued" in out.getvalue()
    assert "hidden-scan: an entrant of a hidden phase not yet revealed" in out.getvalue()
    assert not EvaluationRun.objects.filter(release=second, scanner__name="hidden-scan").exists()
    anonymous = Client()
    for url in ("/audit/", "/api/audit/scanners/", "/api/audit/leaderboard/", "/runs/"):
        assert "hidden-scan" not in anonymous.get(url).content.decode(), url
    assert anonymous.get(reverse("audit:scanner", args=["hidden-scan"])).status_code == 404
    # The admin action follows the same rule.
    releases = reverse("admin:benchmarks_app_datasetrelease_changelist")
    with django_capture_on_commit_callbacks(execute=True):
        again = admin_client.post(
            releases, {"action": "evaluate_entries", "_selected_action": [second.pk]}, follow=True
        ).content.decode()
    assert "an entrant of a hidden phase not yet revealed" in again
    assert not EvaluationRun.objects.filter(release=second, scanner__name="hidden-scan").exists()


def test_a_hidden_entrant_is_evaluated_into_the_new_release_s_open_hidden_phase(
    django_capture_on_commit_callbacks: Any,
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from benchmarks_app.services.phases import phase_create

    first, _ = _hidden_entrant_on_release_one()
    second = _new_official_release(first)
    now = timezone.now()
    still_hidden = phase_create(
        target=second,
        name="Final",
        slug="final",
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=5),
        is_hidden=True,
    )
    with django_capture_on_commit_callbacks(execute=True):
        call_command("evaluate_release", "--dataset", first.dataset.slug, stdout=io.StringIO())
    run = EvaluationRun.objects.get(release=second, scanner__name="hidden-scan")
    assert run.phase_id == still_hidden.pk
    public = EvaluationRun.objects.filter(release=second, phase__isnull=True)
    assert sorted(r.scanner.name for r in public if r.scanner) == ["alpha", "beta"]
    assert "hidden-scan" not in Client().get("/audit/").content.decode()
