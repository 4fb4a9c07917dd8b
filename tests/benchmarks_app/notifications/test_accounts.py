"""Sign-up asks for an e-mail address; a forgotten password is reset through an e-mailed link."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client, override_settings
from django.urls import reverse

from tests.factories.common import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "violet-Anchor-4471"


def _signup(client: Client, **fields: str) -> Any:
    data = {"username": "newcomer", "password1": "plover-Quartz-917"}
    data.update(fields)
    data.setdefault("password2", data["password1"])
    return client.post(reverse("signup"), data)


def test_signup_stores_the_email() -> None:
    client = Client()
    response = _signup(client, email="Newcomer@Example.ORG")
    assert response.status_code == 302
    user = get_user_model().objects.get(username="newcomer")
    assert user.email == "Newcomer@example.org"  # the domain is normalised
    assert client.session["_auth_user_id"] == str(user.pk)


@pytest.mark.parametrize(
    ("email", "message"),
    [("", "This field is required."), ("not-an-address", "Enter a valid email address.")],
)
def test_signup_without_a_valid_email_is_refused(email: str, message: str) -> None:
    response = _signup(Client(), email=email)
    assert response.status_code == 400
    assert not get_user_model().objects.filter(username="newcomer").exists()
    assert response.context["form"].errors["email"] == [message]
    assert f"E-mail address: {message}".encode() in response.content


def test_signup_email_is_unique_ignoring_case() -> None:
    UserFactory.create(username="first", email="taken@example.org")
    response = _signup(Client(), email="TAKEN@example.ORG")
    assert response.status_code == 400
    assert "already exists" in response.context["form"].errors["email"][0]
    assert not get_user_model().objects.filter(username="newcomer").exists()


def test_signup_page_asks_for_the_email() -> None:
    page = Client().get(reverse("signup"))
    assert b'type="email"' in page.content
    assert b'name="email"' in page.content


def _reset_link(body: str) -> str:
    match = re.search(r"http://testserver(/accounts/reset/\S+/)", body)
    assert match, body
    return match.group(1)


def _reset(client: Client, email: str) -> str:
    response = client.post(reverse("password_reset"), {"email": email})
    assert response.status_code == 302
    assert response["Location"] == reverse("password_reset_done")
    assert len(mail.outbox) == 1
    return _reset_link(str(mail.outbox[0].body))


def test_password_reset_end_to_end() -> None:
    user = UserFactory.create(email="ada@example.org")
    client = Client()
    login_page = client.get(reverse("login"))
    assert reverse("password_reset").encode() in login_page.content
    assert b"Forgot password?" in login_page.content

    link = _reset(client, "ADA@example.org")  # the address, whatever its case
    message = mail.outbox[0]
    assert message.to == ["ada@example.org"]
    assert user.username in message.body
    # The link leads to the form (Django moves the token into the session first).
    form_page = client.get(link, follow=True)
    assert form_page.status_code == 200
    assert form_page.context["validlink"] is True
    set_url = form_page.redirect_chain[-1][0]
    done = client.post(set_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done.status_code == 302
    assert done["Location"] == reverse("password_reset_complete")
    user.refresh_from_db()
    assert user.check_password(NEW_PASSWORD)
    assert not user.check_password(PASSWORD)
    assert Client().login(username=user.username, password=NEW_PASSWORD)
    # The link works once.
    again = Client().get(link, follow=True)
    assert again.context["validlink"] is False
    assert b"This reset link is invalid" in again.content


def test_password_reset_refuses_a_weak_password() -> None:
    user = UserFactory.create(email="bo@example.org")
    client = Client()
    page = client.get(_reset(client, "bo@example.org"), follow=True)
    response = client.post(
        page.redirect_chain[-1][0], {"new_password1": "12345", "new_password2": "12345"}
    )
    assert response.status_code == 200
    assert "too short" in " ".join(response.context["form"].errors["new_password2"])
    user.refresh_from_db()
    assert user.check_password(PASSWORD)


def test_unknown_address_sends_nothing_and_says_the_same() -> None:
    UserFactory.create(email="known@example.org")
    response = Client().post(reverse("password_reset"), {"email": "unknown@example.org"})
    assert response.status_code == 302
    assert response["Location"] == reverse("password_reset_done")
    assert mail.outbox == []


@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=3, AXES_COOLOFF_TIME=timedelta(minutes=15))
def test_reset_works_under_the_lockout_and_lifts_it() -> None:
    user = UserFactory.create(email="locked@example.org")
    client = Client(REMOTE_ADDR="10.0.0.7")
    for _ in range(3):
        client.post(reverse("login"), {"username": user.username, "password": "wrong"})
    locked = client.post(reverse("login"), {"username": user.username, "password": PASSWORD})
    assert locked.status_code == 429

    page = client.get(_reset(client, "locked@example.org"), follow=True)
    done = client.post(
        page.redirect_chain[-1][0], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    )
    assert done["Location"] == reverse("password_reset_complete")
    logged_in = client.post(reverse("login"), {"username": user.username, "password": NEW_PASSWORD})
    assert logged_in.status_code == 302
    assert client.session["_auth_user_id"] == str(user.pk)
