"""Repeated wrong passwords lock a username out from an address (issue 11 item 10).

django-axes guards the login form, the admin login and ``POST /api/auth/token/``: after
``AXES_FAILURE_LIMIT`` failures, even the right password is refused with a 429 until the
cool-off ends. Other usernames, and the same username from another address, are not locked.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from tests.factories.common import PASSWORD, StaffFactory, UserFactory

pytestmark = pytest.mark.django_db

LIMIT = 3
lockout = override_settings(
    AXES_ENABLED=True, AXES_FAILURE_LIMIT=LIMIT, AXES_COOLOFF_TIME=timedelta(minutes=15)
)


def _form(client: Client, username: str, password: str, *, admin: bool = False) -> Any:
    url = reverse("admin:login") if admin else reverse("login")
    return client.post(url, {"username": username, "password": password})


def _token(username: str, password: str, ip: str = "10.0.0.1") -> Any:
    return APIClient(REMOTE_ADDR=ip).post(
        "/api/auth/token/", {"username": username, "password": password}, format="json"
    )


@lockout
def test_login_form_locks_out_after_the_limit() -> None:
    user = UserFactory.create()
    client = Client(REMOTE_ADDR="10.0.0.1")
    for _ in range(LIMIT - 1):
        assert _form(client, user.username, "wrong").status_code == 200  # the form again
    locked = _form(client, user.username, "wrong")
    assert locked.status_code == 429
    assert b"Too many failed login attempts" in locked.content
    assert "Retry-After" in locked
    # The right password no longer helps during the cool-off.
    right = _form(client, user.username, PASSWORD)
    assert right.status_code == 429
    assert "_auth_user_id" not in client.session
    # Another username from the same address is not locked.
    other = UserFactory.create()
    assert _form(client, other.username, PASSWORD).status_code == 302


@lockout
def test_admin_login_locks_out() -> None:
    staff = StaffFactory.create()
    client = Client(REMOTE_ADDR="10.0.0.2")
    for _ in range(LIMIT):
        _form(client, staff.username, "wrong", admin=True)
    assert _form(client, staff.username, PASSWORD, admin=True).status_code == 429


@lockout
def test_token_endpoint_locks_out_with_the_api_error_shape() -> None:
    user = UserFactory.create()
    assert _token(user.username, PASSWORD).status_code == 200
    for _ in range(LIMIT - 1):
        assert _token(user.username, "wrong").status_code == 400
    locked = _token(user.username, "wrong")
    assert locked.status_code == 429
    body = locked.json()
    assert body["code"] == "locked_out"
    assert body["errors"] == [{"field": None, "reason": body["detail"], "code": "locked_out"}]
    assert _token(user.username, PASSWORD).status_code == 429
    # The same username from another address is not locked.
    assert _token(user.username, PASSWORD, ip="10.0.0.9").status_code == 200
    assert AccessAttempt.objects.filter(username=user.username).exists()


@lockout
def test_failures_across_form_and_api_share_one_count() -> None:
    user = UserFactory.create()
    client = Client(REMOTE_ADDR="10.0.0.1")
    _form(client, user.username, "wrong")
    for _ in range(LIMIT - 1):
        _token(user.username, "wrong")
    assert _form(client, user.username, PASSWORD).status_code == 429


@lockout
def test_a_form_login_before_the_limit_clears_the_count() -> None:
    user = UserFactory.create()
    for _ in range(LIMIT - 1):
        _form(Client(REMOTE_ADDR="10.0.0.1"), user.username, "wrong")
    assert _form(Client(REMOTE_ADDR="10.0.0.1"), user.username, PASSWORD).status_code == 302
    for _ in range(LIMIT - 1):
        _form(Client(REMOTE_ADDR="10.0.0.1"), user.username, "wrong")
    assert _form(Client(REMOTE_ADDR="10.0.0.1"), user.username, PASSWORD).status_code == 302
