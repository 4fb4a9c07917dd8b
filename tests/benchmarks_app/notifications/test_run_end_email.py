"""Opt-in e-mail when a run ends (locmem backend), and a notifier that never raises."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail

from benchmarks_app.models import RunStatus, WebhookDelivery
from benchmarks_app.services import notifications
from benchmarks_app.services.run_events import run_ended
from scoring.audit.metrics import overall
from tests.benchmarks_app.notifications.helpers import ended_run
from tests.factories.common import UserFactory

pytestmark = pytest.mark.django_db


def _end(run: Any, capture: Any) -> None:
    with capture(execute=True):
        run_ended(run=run)


def test_opted_in_creator_gets_an_email(django_capture_on_commit_callbacks: Any) -> None:
    user = UserFactory.create(email="ada@example.org")
    notifications.notification_preference_set(user=user, email_on_run_end=True)
    run = ended_run(user=user)
    _end(run, django_capture_on_commit_callbacks)

    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["ada@example.org"]
    assert message.subject == f"Run #{run.pk} (Audit findings) succeeded"
    f1 = overall([run.audit_repo_results.get().metrics])["f1_with_partial"]
    # Named as the board names it, with what it is, never by its raw key (issue 37 item 8).
    assert f"F1+ (F1 with partial matches counted: the ranking metric): {f1:.4f}" in message.body
    assert "  P (precision: TP / reported): " in message.body
    assert not [
        k for k in ("f1_with_partial", "recall_with_partial", "  tp: ") if k in message.body
    ]
    assert f"http://testserver/runs/{run.pk}/" in message.body
    assert run.scanner is not None
    assert run.scanner.name in str(message.body)
    assert "http://testserver/accounts/settings/" in message.body


def test_failed_run_email_gives_the_error(django_capture_on_commit_callbacks: Any) -> None:
    user = UserFactory.create()
    notifications.notification_preference_set(user=user, email_on_run_end=True)
    run = ended_run(user=user, status=RunStatus.FAILED, error="judge refused: context too long")
    _end(run, django_capture_on_commit_callbacks)
    (message,) = mail.outbox
    assert message.subject == f"Run #{run.pk} (Audit findings) failed"
    assert "Error: judge refused: context too long" in message.body
    assert "F1+" not in message.body


def test_no_email_without_opt_in_or_after_opting_out(
    django_capture_on_commit_callbacks: Any,
) -> None:
    user = UserFactory.create()
    _end(ended_run(user=user), django_capture_on_commit_callbacks)
    assert mail.outbox == []
    notifications.notification_preference_set(user=user, email_on_run_end=True)
    notifications.notification_preference_set(user=user, email_on_run_end=False)
    _end(ended_run(user=user), django_capture_on_commit_callbacks)
    assert mail.outbox == []
    # Someone else's opt-in does not make this user's runs send mail.
    notifications.notification_preference_set(user=UserFactory.create(), email_on_run_end=True)
    _end(ended_run(user=user), django_capture_on_commit_callbacks)
    assert mail.outbox == []


def test_user_without_address_gets_nothing(django_capture_on_commit_callbacks: Any) -> None:
    user = UserFactory.create(email="")
    notifications.notification_preference_set(user=user, email_on_run_end=True)
    _end(ended_run(user=user), django_capture_on_commit_callbacks)
    assert mail.outbox == []
    assert notifications.run_end_email_send(run_id=ended_run(user=user).pk) is False


def test_rolled_back_end_sends_nothing(django_capture_on_commit_callbacks: Any) -> None:
    user = UserFactory.create()
    notifications.notification_preference_set(user=user, email_on_run_end=True)
    run = ended_run(user=user)
    # Without the commit, the on-commit notification never runs.
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_ended(run=run)
    assert len(callbacks) == 1
    assert mail.outbox == []


def test_notify_never_raises(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    notifications.run_end_notify(run_id=987654321)  # no such run: nothing, quietly
    user = UserFactory.create()
    notifications.notification_preference_set(user=user, email_on_run_end=True)
    run = ended_run(user=user)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr("django_q.tasks.async_task", broken)
    notifications.run_end_notify(run_id=run.pk)
    assert "could not queue the notifications of run" in caplog.text
    assert mail.outbox == []
    assert not WebhookDelivery.objects.exists()


def test_the_e_mails_names_are_the_boards_column_labels() -> None:
    from benchmarks_app.views import audit_columns, checklist_columns, probes_columns

    columns = {
        c.key: c.label
        for c in [
            *audit_columns.LEADERBOARD_COLUMNS,
            *probes_columns.LEADERBOARD_COLUMNS,
            *checklist_columns.leaderboard_columns(my_team_id=None, staff=False),
        ]
    }
    shared = set(columns) & set(notifications.METRIC_NAMES)
    assert {"f1_with_partial", "precision", "resilience_index", "s", "c_g", "r"} <= shared
    for key in shared:
        assert notifications.METRIC_NAMES[key][0] == columns[key], key
