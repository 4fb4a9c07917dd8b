"""Deliveries in the admin: filtered by status and event, read-only, with "retry now"."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from benchmarks_app.models import DeliveryStatus, WebhookDelivery
from benchmarks_app.services.webhooks import webhook_create
from tests.benchmarks_app.notifications.conftest import Receiver
from tests.benchmarks_app.notifications.helpers import ended_run
from tests.factories.common import StaffFactory, UserFactory

pytestmark = pytest.mark.django_db


def _admin() -> Client:
    client = Client()
    client.force_login(StaffFactory.create(is_superuser=True))
    return client


def test_deliveries_changelist_filters_and_readonly_page() -> None:
    user = UserFactory.create()
    webhook = webhook_create(owner=user, url="https://example.org/receiver-q")
    failed = WebhookDelivery.objects.create(
        webhook=webhook,
        run=ended_run(user=user),
        payload={"event": "run.finished", "marker": "payload-zeta"},
        status=DeliveryStatus.FAILED,
        last_error="HTTP 500: boom-eta",
    )
    WebhookDelivery.objects.create(
        webhook=webhook, run=ended_run(user=user), status=DeliveryStatus.DELIVERED
    )
    client = _admin()
    url = reverse("admin:benchmarks_app_webhookdelivery_changelist")
    page = client.get(url, {"status__exact": "failed"})
    assert page.status_code == 200
    assert page.context["cl"].result_count == 1
    assert client.get(url, {"event": "run.finished"}).status_code == 200
    detail = client.get(reverse("admin:benchmarks_app_webhookdelivery_change", args=[failed.pk]))
    assert b"payload-zeta" in detail.content
    assert b"boom-eta" in detail.content
    assert b'name="payload"' not in detail.content  # shown, not editable
    # The webhook's page does not show its secret.
    hook_page = client.get(reverse("admin:benchmarks_app_webhook_change", args=[webhook.pk]))
    assert b"receiver-q" in hook_page.content
    assert webhook.secret.encode() not in hook_page.content


def test_retry_now_action(receiver: Receiver, django_capture_on_commit_callbacks: Any) -> None:
    user = UserFactory.create()
    webhook = webhook_create(owner=user, url=receiver.url)
    receiver.secret = webhook.secret
    run = ended_run(user=user)
    failed = WebhookDelivery.objects.create(
        webhook=webhook,
        run=run,
        payload={"event": "run.finished", "run": {"id": run.pk}},
        status=DeliveryStatus.FAILED,
        attempts=6,
    )
    done = WebhookDelivery.objects.create(
        webhook=webhook, run=run, event="run.other", status=DeliveryStatus.DELIVERED, attempts=1
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = _admin().post(
            reverse("admin:benchmarks_app_webhookdelivery_changelist"),
            {"action": "retry_now", "_selected_action": [failed.pk, done.pk]},
            follow=True,
        )
    assert b"1 delivery(ies) queued" in response.content
    assert b"1 already delivered" in response.content
    failed.refresh_from_db()
    done.refresh_from_db()
    assert failed.status == DeliveryStatus.DELIVERED
    assert failed.attempts == 7
    assert done.attempts == 1
    assert len(receiver.received) == 1
    assert receiver.received[0].signature_ok
    assert receiver.received[0].json["delivery"] == failed.pk
