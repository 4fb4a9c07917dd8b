"""Webhook URLs: http(s) only, no credentials, and no private addresses in production (SSRF)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from benchmarks_app.models import Webhook
from benchmarks_app.services.webhooks import WebhookError, webhook_create, webhook_url_check
from tests.factories.common import UserFactory


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("", "is required"),
        ("ftp://example.org/hook", "must start with http:// or https://"),
        ("file:///etc/passwd", "must start with http:// or https://"),
        ("example.org/hook", "must start with http:// or https://"),
        ("https://user:pw@example.org/hook", "must not contain a user name or password"),
        ("https:///hook", "has no host name"),
        ("https://example.org:99999/hook", "has an invalid port"),
        ("https://example.org/a b", "must not contain spaces"),
        ("https://example.org/" + "a" * 500, "longer than 500"),
    ],
)
def test_malformed_urls_are_refused_naming_the_problem(url: str, reason: str) -> None:
    with pytest.raises(WebhookError, match=reason) as exc:
        webhook_url_check(url)
    assert exc.value.field == "url"


@override_settings(WEBHOOK_ALLOW_PRIVATE=False)
@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.10/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://0.0.0.0/hook",
    ],
)
def test_private_addresses_are_refused_in_production(url: str) -> None:
    with pytest.raises(WebhookError, match="private, loopback or reserved address"):
        webhook_url_check(url)


@override_settings(WEBHOOK_ALLOW_PRIVATE=False)
def test_public_address_is_accepted_in_production() -> None:
    # An address literal: resolving it needs no network.
    assert webhook_url_check(" https://93.184.216.34/hook ") == "https://93.184.216.34/hook"


@override_settings(WEBHOOK_ALLOW_PRIVATE=True)
def test_private_addresses_are_accepted_when_allowed() -> None:
    assert webhook_url_check("http://127.0.0.1:8000/hook") == "http://127.0.0.1:8000/hook"


@pytest.mark.django_db
@override_settings(WEBHOOKS_PER_USER=2)
def test_webhooks_per_user_are_limited() -> None:
    user = UserFactory.create()
    first = webhook_create(owner=user, url="https://example.org/1")
    webhook_create(owner=user, url="https://example.org/2")
    with pytest.raises(WebhookError, match="already have 2 webhooks"):
        webhook_create(owner=user, url="https://example.org/3")
    assert Webhook.objects.filter(owner=user).count() == 2
    # Each webhook has its own secret.
    assert len(first.secret) >= 32
    assert Webhook.objects.filter(secret=first.secret).count() == 1
