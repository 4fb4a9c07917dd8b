"""Pages that send people to look for an e-mail say where it really went: in the demo (the
console backend) the message is in the terminal, not in a spam folder (issue 37 item 7)."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

CONSOLE = "django.core.mail.backends.console.EmailBackend"
SMTP = "django.core.mail.backends.smtp.EmailBackend"


@pytest.mark.parametrize("page", ["signup_sent", "password_reset_done"])
def test_a_console_backend_points_to_the_terminal_not_the_spam_folder(
    client: Any, settings: Any, page: str
) -> None:
    settings.EMAIL_BACKEND = CONSOLE
    html = client.get(reverse(page)).content.decode()
    assert "spam" not in html
    assert "printed in the terminal where the site runs" in html and "EMAIL_HOST" in html
    settings.EMAIL_BACKEND = SMTP
    html = client.get(reverse(page)).content.decode()
    assert "Check your spam folder" in html and 'id="mail-not-delivered"' not in html


def test_the_sign_up_answer_in_the_demo_names_the_terminal(client: Any, settings: Any) -> None:
    settings.EMAIL_BACKEND = CONSOLE
    answer = client.post(
        reverse("signup"),
        {
            "username": "newcomer",
            "email": "newcomer@example.org",
            "password1": "a long enough pass phrase",
            "password2": "a long enough pass phrase",
        },
        follow=True,
    )
    html = answer.content.decode()
    assert answer.redirect_chain[-1][0] == reverse("signup_sent"), html[:2000]
    assert "printed in the terminal" in html and "spam" not in html
