"""/api/webhooks/: authenticated, and each user sees and changes only their own webhooks."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from benchmarks_app.models import Webhook, WebhookDelivery
from benchmarks_app.services.webhooks import webhook_create
from tests.benchmarks_app.notifications.helpers import ended_run
from tests.factories.common import UserFactory, token_for

pytestmark = pytest.mark.django_db


def _api(user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    return client


def test_anonymous_requests_are_refused() -> None:
    webhook = webhook_create(owner=UserFactory.create(), url="https://example.org/h")
    client = APIClient()
    base = f"/api/webhooks/{webhook.pk}/"
    assert client.get("/api/webhooks/").status_code == 401
    assert client.post("/api/webhooks/", {"url": "https://x.org"}).status_code == 401
    assert client.delete(base).status_code == 401
    assert client.post(base + "rotate-secret/").status_code == 401
    assert client.get(base + "deliveries/").status_code == 401
    assert Webhook.objects.count() == 1


def test_create_list_rotate_delete() -> None:
    user = UserFactory.create()
    client = _api(user)
    created = client.post("/api/webhooks/", {"url": "https://example.org/h"}, format="json")
    assert created.status_code == 201
    body = created.json()
    webhook = Webhook.objects.get(owner=user)
    assert body["id"] == webhook.pk
    assert body["secret"] == webhook.secret
    assert body["deliveries"].endswith(f"/api/webhooks/{webhook.pk}/deliveries/")

    listed = client.get("/api/webhooks/").json()
    assert [w["url"] for w in listed["results"]] == ["https://example.org/h"]
    assert "secret" not in listed["results"][0]
    assert "secret" not in client.get(f"/api/webhooks/{webhook.pk}/").json()

    rotated = client.post(f"/api/webhooks/{webhook.pk}/rotate-secret/").json()
    webhook.refresh_from_db()
    assert rotated["secret"] == webhook.secret != body["secret"]

    assert client.delete(f"/api/webhooks/{webhook.pk}/").status_code == 204
    assert not Webhook.objects.exists()


def test_bad_url_is_a_400_naming_the_field() -> None:
    response = _api(UserFactory.create()).post(
        "/api/webhooks/", {"url": "gopher://x"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"field": "url", "reason": "must start with http:// or https://", "code": "invalid"}
    ]
    missing = _api(UserFactory.create()).post("/api/webhooks/", {}, format="json")
    assert missing.status_code == 400
    assert missing.json()["errors"][0]["field"] == "url"


def test_another_users_webhook_is_invisible() -> None:
    owner, other = UserFactory.create(), UserFactory.create()
    webhook = webhook_create(owner=owner, url="https://example.org/h")
    WebhookDelivery.objects.create(webhook=webhook, run=ended_run(user=owner), payload={"x": 1})
    secret = webhook.secret
    client = _api(other)
    base = f"/api/webhooks/{webhook.pk}/"
    assert client.get("/api/webhooks/").json()["results"] == []
    assert client.get(base).status_code == 404
    assert client.delete(base).status_code == 404
    assert client.post(base + "rotate-secret/").status_code == 404
    assert client.get(base + "deliveries/").status_code == 404
    webhook.refresh_from_db()
    assert webhook.secret == secret


def test_deliveries_of_own_webhook() -> None:
    user = UserFactory.create()
    webhook = webhook_create(owner=user, url="https://example.org/h")
    run = ended_run(user=user)
    delivery = WebhookDelivery.objects.create(
        webhook=webhook, run=run, payload={"event": "run.finished"}, last_status_code=500
    )
    body = _api(user).get(f"/api/webhooks/{webhook.pk}/deliveries/").json()
    assert body["count"] == 1
    row = body["results"][0]
    assert row["id"] == delivery.pk
    assert row["run"] == run.pk
    assert row["status"] == "pending"
    assert row["last_status_code"] == 500
    assert row["payload"] == {"event": "run.finished"}
