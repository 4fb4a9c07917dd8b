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
