"""Run-end webhooks: a signed JSON POST to a real local receiver, retried with back-off."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone
from django_q.models import Schedule

from benchmarks_app.models import DeliveryStatus, RunStatus, Webhook, WebhookDelivery
from benchmarks_app.services import webhooks
from benchmarks_app.services.run_events import run_ended
from benchmarks_app.tasks.notifications import deliver_webhook
from scoring.audit.metrics import overall
from scoring.webhooks import verify_signature
from tests.benchmarks_app.notifications.conftest import HEADERS, Receiver
from tests.benchmarks_app.notifications.helpers import ended_run
from tests.factories.common import UserFactory

pytestmark = pytest.mark.django_db


def _hook(receiver: Receiver, user: Any) -> Webhook:
    webhook = webhooks.webhook_create(owner=user, url=receiver.url)
    receiver.secret = webhook.secret
    return webhook


def _end(run: Any, capture: Any) -> None:
    with capture(execute=True):
        run_ended(run=run)


def test_run_end_posts_a_signed_payload(
    receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    user = UserFactory.create()
    webhook = _hook(receiver, user)
    run = ended_run(user=user)
    _end(run, django_capture_on_commit_callbacks)

    assert len(receiver.received) == 1
    got = receiver.received[0]
    assert got.path == "/hooks/eval"
    assert got.signature_ok
    for header in HEADERS:
        assert header in got.headers
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["X-Eval-Event"] == "run.finished"
    delivery = WebhookDelivery.objects.get(webhook=webhook, run=run)
    assert got.headers["X-Eval-Delivery"] == str(delivery.pk)
    # The signature is over "timestamp.body" exactly as received.
    assert verify_signature(
        webhook.secret, got.headers["X-Eval-Timestamp"], got.body, got.headers["X-Eval-Signature"]
    )
    assert not verify_signature(
        "another-secret",
        got.headers["X-Eval-Timestamp"],
        got.body,
        got.headers["X-Eval-Signature"],
    )
    payload = got.json
    assert payload["event"] == "run.finished"
    assert payload["delivery"] == delivery.pk
    assert payload["sent_at"]
    summary = payload["run"]
    assert summary["id"] == run.pk
    assert summary["benchmark"] == "audit"
    assert summary["status"] == "succeeded"
    assert run.scanner is not None and run.started_at is not None
    assert summary["target"] == run.scanner.name
    assert summary["url"] == f"http://testserver/runs/{run.pk}/"
    assert summary["started_at"] == run.started_at.isoformat()
    expected = overall([run.audit_repo_results.get().metrics])
    assert summary["metrics"]["f1_with_partial"] == pytest.approx(expected["f1_with_partial"])
    assert summary["metrics"]["tp"] == 1
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED
    assert delivery.attempts == 1
    assert delivery.last_status_code == 200
    assert delivery.delivered_at is not None
    assert delivery.next_attempt_at is None


def test_failed_run_payload_carries_the_error(
    receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    user = UserFactory.create()
    _hook(receiver, user)
    run = ended_run(user=user, status=RunStatus.FAILED, error="repo-x: scanner file missing")
    _end(run, django_capture_on_commit_callbacks)
    summary = receiver.received[0].json["run"]
    assert summary["status"] == "failed"
    assert summary["error"] == "repo-x: scanner file missing"
    assert summary["metrics"] == {}


def test_retry_after_a_500_then_delivered_once(
    receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    receiver.statuses = [500, 200]
    user = UserFactory.create()
    webhook = _hook(receiver, user)
    run = ended_run(user=user)
    before = timezone.now()
    _end(run, django_capture_on_commit_callbacks)

    delivery = WebhookDelivery.objects.get(webhook=webhook, run=run)
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.attempts == 1
    assert delivery.last_status_code == 500
    assert "receiver says no" in delivery.last_error
    # The next attempt is scheduled on the queue, after the first back-off step.
    assert delivery.next_attempt_at is not None
    first_wait = timedelta(seconds=webhooks.RETRY_DELAYS_S[0])
    assert before + first_wait <= delivery.next_attempt_at
    scheduled = Schedule.objects.get(func=webhooks.DELIVER_TASK)
    assert scheduled.schedule_type == Schedule.ONCE
    assert scheduled.next_run == delivery.next_attempt_at
    assert scheduled.args == repr((delivery.pk, 1))

    # The queue runs the scheduled attempt (called directly: no waiting).
    assert deliver_webhook(delivery.pk, 1) == DeliveryStatus.DELIVERED
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED
    assert delivery.attempts == 2
    assert delivery.last_status_code == 200
    assert delivery.last_error == ""
    assert [r.signature_ok for r in receiver.received] == [True, True]
    ids = {r.headers["X-Eval-Delivery"] for r in receiver.received}
    assert ids == {str(delivery.pk)}

    # A stale schedule, a repeated notification or "retry now" never sends it again.
    assert deliver_webhook(delivery.pk, 1) == "skipped"
    assert deliver_webhook(delivery.pk, None) == "skipped"
    assert webhooks.delivery_retry_now(delivery=delivery) is False
    with django_capture_on_commit_callbacks(execute=True):
        assert webhooks.deliveries_create_for_run(run=run) == []
    assert len(receiver.received) == 2
    assert WebhookDelivery.objects.filter(run=run).count() == 1


def test_back_off_grows_then_gives_up(
    receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    receiver.statuses = [503]
    user = UserFactory.create()
    webhook = _hook(receiver, user)
    run = ended_run(user=user)
    with override_settings(WEBHOOK_MAX_ATTEMPTS=3):
        _end(run, django_capture_on_commit_callbacks)
        delivery = WebhookDelivery.objects.get(webhook=webhook)
        waits = []
        for attempt in (1, 2):
            delivery.refresh_from_db()
            assert delivery.status == DeliveryStatus.PENDING
            assert delivery.attempts == attempt
            waits.append(delivery.next_attempt_at)
            with django_capture_on_commit_callbacks(execute=True):
                deliver_webhook(delivery.pk, attempt)
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.attempts == 3
    assert delivery.next_attempt_at is None
    assert len(receiver.received) == 3
    # Two retries were scheduled (after attempts 1 and 2), none after the last.
    assert Schedule.objects.filter(func=webhooks.DELIVER_TASK).count() == 2
    assert webhooks.retry_delay_s(2) > webhooks.retry_delay_s(1)
    assert webhooks.retry_delay_s(99) == webhooks.RETRY_DELAYS_S[-1]

    # "Retry now" gives a failed delivery one more attempt.
    receiver.statuses = [200]
    receiver.received.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert webhooks.delivery_retry_now(delivery=delivery) is True
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED
    assert delivery.attempts == 4
    assert len(receiver.received) == 1


def test_redirects_are_not_followed(
    receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    receiver.statuses = [302]
    receiver.redirect_to = receiver.url.replace("/hooks/eval", "/elsewhere")
    user = UserFactory.create()
    webhook = _hook(receiver, user)
    _end(ended_run(user=user), django_capture_on_commit_callbacks)
    delivery = WebhookDelivery.objects.get(webhook=webhook)
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.last_status_code == 302
    assert [r.path for r in receiver.received] == ["/hooks/eval"]


def test_unreachable_receiver_is_recorded(django_capture_on_commit_callbacks: Any) -> None:
    user = UserFactory.create()
    # Port 9 on this machine: nothing listens, the connection is refused at once.
    webhook = webhooks.webhook_create(owner=user, url="http://127.0.0.1:9/hook")
    _end(ended_run(user=user), django_capture_on_commit_callbacks)
    delivery = WebhookDelivery.objects.get(webhook=webhook)
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.last_status_code is None
    assert delivery.last_error


def test_only_the_creators_active_webhooks_receive(
    receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    user, other = UserFactory.create(), UserFactory.create()
    mine = _hook(receiver, user)
    off = webhooks.webhook_create(owner=user, url=receiver.url + "?off")
    off.is_active = False
    off.save()
    theirs = webhooks.webhook_create(owner=other, url=receiver.url + "?theirs")
    _end(ended_run(user=user), django_capture_on_commit_callbacks)
    assert list(WebhookDelivery.objects.values_list("webhook_id", flat=True)) == [mine.pk]
    assert [r.path for r in receiver.received] == ["/hooks/eval"]
    assert not WebhookDelivery.objects.filter(webhook__in=[off, theirs]).exists()


def test_run_without_creator_sends_nothing(
    receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    _hook(receiver, UserFactory.create())
    run = ended_run()
    run.created_by = None
    run.save()
    _end(run, django_capture_on_commit_callbacks)
    assert receiver.received == []
    assert not WebhookDelivery.objects.exists()


def test_rotated_secret_signs_the_next_attempt(
    receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    receiver.statuses = [500, 200]
    user = UserFactory.create()
    webhook = _hook(receiver, user)
    old = webhook.secret
    _end(ended_run(user=user), django_capture_on_commit_callbacks)
    webhook = webhooks.webhook_rotate_secret(webhook=webhook)
    assert webhook.secret != old
    receiver.secret = webhook.secret
    delivery = WebhookDelivery.objects.get(webhook=webhook)
    deliver_webhook(delivery.pk, 1)
    second = receiver.received[1]
    assert second.signature_ok
    stamp, signature = second.headers["X-Eval-Timestamp"], second.headers["X-Eval-Signature"]
    assert not verify_signature(old, stamp, second.body, signature)


def test_overdue_deliveries_are_swept(
    receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    receiver.statuses = [500, 200]
    user = UserFactory.create()
    webhook = _hook(receiver, user)
    _end(ended_run(user=user), django_capture_on_commit_callbacks)
    delivery = WebhookDelivery.objects.get(webhook=webhook)
    # Not overdue yet: nothing is sent.
    assert webhooks.deliveries_sweep() == []
    assert delivery.next_attempt_at is not None
    later = delivery.next_attempt_at + webhooks.SWEEP_GRACE + timedelta(seconds=1)
    assert webhooks.deliveries_sweep(now=later) == [delivery.pk]
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED
    assert len(receiver.received) == 2


@override_settings(WEBHOOK_ALLOW_PRIVATE=False)
def test_private_target_is_refused_at_send_time_too(
    receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    user = UserFactory.create()
    with override_settings(WEBHOOK_ALLOW_PRIVATE=True):
        webhook = _hook(receiver, user)
    _end(ended_run(user=user), django_capture_on_commit_callbacks)
    delivery = WebhookDelivery.objects.get(webhook=webhook)
    assert receiver.received == []
    assert delivery.last_error.startswith("refused: url resolves to 127.0.0.1")


def test_an_unexpected_error_is_recorded_and_retried(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("socket layer exploded")

    monkeypatch.setattr(webhooks, "_post", broken)
    user = UserFactory.create()
    webhook = webhooks.webhook_create(owner=user, url="http://127.0.0.1:9/h")
    _end(ended_run(user=user), django_capture_on_commit_callbacks)
    delivery = WebhookDelivery.objects.get(webhook=webhook)
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.attempts == 1
    assert delivery.last_error == "RuntimeError: socket layer exploded"
    assert Schedule.objects.filter(func=webhooks.DELIVER_TASK).count() == 1
