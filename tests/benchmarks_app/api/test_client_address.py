"""One rule for the client's address (issue 23 row 10): the API throttles and the login
lockout both read ``X-Forwarded-For`` only as far as ``NUM_PROXIES`` trusts it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client, RequestFactory, override_settings
from django.urls import reverse

from benchmarks_app.client_address import client_address
from tests.factories.common import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def low_rates(settings):
    rest = dict(settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"] = {"anon": "3/min", "user": "5/min"}
    settings.REST_FRAMEWORK = rest


def _get(forwarded: str, remote: str = "203.0.113.9") -> int:
    client = Client(REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)
    return client.get("/api/runs/").status_code


def test_rotating_forwarded_for_does_not_escape_the_anonymous_limit(low_rates, settings):
    settings.NUM_PROXIES = 0
    codes = [_get(f"198.51.100.{i}") for i in range(5)]
    assert codes == [200, 200, 200, 429, 429]


def test_one_trusted_proxy_keys_clients_by_the_hop_it_appended(low_rates, settings):
    settings.NUM_PROXIES = 1
    # The proxy appends the address it saw; what the client put before it is not trusted.
    codes = [_get(f"10.9.9.{i}, 198.51.100.7", remote="10.0.0.1") for i in range(4)]
    assert codes == [200, 200, 200, 429]
    # Another client behind the same proxy has its own allowance.
    assert _get("198.51.100.8", remote="10.0.0.1") == 200


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, "1.1.1.1, 2.2.2.2", "10.0.0.1"),
        (1, "1.1.1.1, 2.2.2.2", "2.2.2.2"),
        (2, "1.1.1.1, 2.2.2.2", "1.1.1.1"),
        (3, "1.1.1.1, 2.2.2.2", "1.1.1.1"),
        (1, "", "10.0.0.1"),
    ],
)
def test_client_address_counts_hops_from_the_right(proxies, forwarded, expected, settings):
    settings.NUM_PROXIES = proxies
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_address(request) == expected


@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=3, AXES_COOLOFF_TIME=timedelta(minutes=15))
def test_lockout_keys_the_same_address_as_the_throttles(settings):
    settings.NUM_PROXIES = 0
    user = UserFactory.create()
    for i in range(3):
        Client(REMOTE_ADDR="203.0.113.5", HTTP_X_FORWARDED_FOR=f"198.51.100.{i}").post(
            reverse("login"), {"username": user.username, "password": "wrong"}
        )
    # A new X-Forwarded-For does not make a new client: still locked.
    locked = Client(REMOTE_ADDR="203.0.113.5", HTTP_X_FORWARDED_FOR="192.0.2.77").post(
        reverse("login"), {"username": user.username, "password": PASSWORD}
    )
    assert locked.status_code == 429
    # Behind one trusted proxy, the hop it appended is the client: another one is free.
    settings.NUM_PROXIES = 1
    other = Client(REMOTE_ADDR="203.0.113.5", HTTP_X_FORWARDED_FOR="192.0.2.77").post(
        reverse("login"), {"username": user.username, "password": PASSWORD}
    )
    assert other.status_code == 302
