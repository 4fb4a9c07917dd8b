"""The account settings page: run-end e-mail opt-in and one's webhooks."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from benchmarks_app.models import NotificationPreference, Webhook
from benchmarks_app.services.webhooks import webhook_create
from tests.factories.common import UserFactory

pytestmark = pytest.mark.django_db


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_settings_need_a_login() -> None:
    for name in ("account:settings",):
        response = Client().get(reverse(name))
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
    response = Client().post(reverse("account:webhook-add"), {"url": "https://example.org/h"})
    assert response.status_code == 302
    assert not Webhook.objects.exists()


def test_email_opt_in_and_out() -> None:
    user = UserFactory.create()
    client = _client(user)
    assert client.get(reverse("account:settings")).context["preference_form"].initial == {
        "email_on_run_end": False
    }
    client.post(reverse("account:preferences"), {"email_on_run_end": "on"})
    assert NotificationPreference.objects.get(user=user).email_on_run_end is True
    page = client.get(reverse("account:settings"))
    assert page.context["preference_form"].initial == {"email_on_run_end": True}
    client.post(reverse("account:preferences"), {})
    assert NotificationPreference.objects.get(user=user).email_on_run_end is False


def test_new_webhook_secret_is_shown_once() -> None:
    user = UserFactory.create()
    client = _client(user)
    response = client.post(reverse("account:webhook-add"), {"url": "https://example.org/h"})
    assert response.status_code == 201
    webhook = Webhook.objects.get(owner=user)
    assert webhook.url == "https://example.org/h"
    assert webhook.secret.encode() in response.content
    later = client.get(reverse("account:settings"))
    assert b"https://example.org/h" in later.content
    assert webhook.secret.encode() not in later.content


def test_rotate_shows_the_new_secret() -> None:
    user = UserFactory.create()
    webhook = webhook_create(owner=user, url="https://example.org/h")
    old = webhook.secret
    response = _client(user).post(reverse("account:webhook-rotate", args=[webhook.pk]))
    webhook.refresh_from_db()
    assert webhook.secret != old
    assert webhook.secret.encode() in response.content
    assert old.encode() not in response.content


def test_bad_url_is_refused_naming_the_field() -> None:
    response = _client(UserFactory.create()).post(
        reverse("account:webhook-add"), {"url": "ftp://example.org/h"}
    )
    assert response.status_code == 400
    assert b"Webhook URL: must start with http:// or https://" in response.content
    assert not Webhook.objects.exists()


def test_nobody_else_can_delete_or_rotate_a_webhook() -> None:
    owner, other = UserFactory.create(), UserFactory.create()
    webhook = webhook_create(owner=owner, url="https://example.org/owner-only-hook")
    secret = webhook.secret
    intruder = _client(other)
    assert intruder.post(reverse("account:webhook-delete", args=[webhook.pk])).status_code == 404
    assert intruder.post(reverse("account:webhook-rotate", args=[webhook.pk])).status_code == 404
    assert (
        b"https://example.org/owner-only-hook"
        not in intruder.get(reverse("account:settings")).content
    )
    webhook.refresh_from_db()
    assert webhook.secret == secret
    # The owner can.
    response = _client(owner).post(reverse("account:webhook-delete", args=[webhook.pk]))
    assert response.status_code == 302
    assert not Webhook.objects.exists()
