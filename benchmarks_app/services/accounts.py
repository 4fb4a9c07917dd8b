"""Accounts: sign-up confirmed by e-mail, and the limits on the e-mails the account forms send.

Neither the sign-up form nor the password-reset form tells a visitor whether an address has an
account: both answer "check your e-mail" whatever the address, and what differs goes into the
mailbox, which only its owner reads. The same goes for the limits: past them, the forms answer
the same and send nothing, so a full allowance reveals nothing either.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.core.cache import cache
from django.core.mail import send_mail
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_decode, urlsafe_base64_encode

MAIL_WINDOW_S = 3600


class SignupTokenGenerator(PasswordResetTokenGenerator):
    """Tokens of the confirmation link: a salt of their own, so that a sign-up link is never a
    password-reset link. Confirming logs the user in, which sets ``last_login`` and so spends
    the token (it is part of the hash)."""

    key_salt = "benchmarks_app.services.accounts.SignupTokenGenerator"


signup_token = SignupTokenGenerator()


def _count_key(kind: str, value: str) -> str:
    # Hashed: cache keys must not carry raw addresses (memcached refuses spaces, and a cache
    # dump should not list who asked for mail).
    digest = hashlib.sha256(value.strip().lower().encode()).hexdigest()[:32]
    return f"account-mail:{kind}:{digest}"


def account_mail_allowance_take(*, email: str, client: str) -> bool:
    """Count one account e-mail to ``email`` asked for by ``client`` (an address, see
    :mod:`benchmarks_app.client_address`); False, counting nothing, when either has had
    its hourly allowance (``ACCOUNT_MAILS_PER_ADDRESS_HOUR``, ``ACCOUNT_MAILS_PER_CLIENT_HOUR``).

    Every request counts, whether or not the address has an account: a count that moved only
    for known addresses would enumerate them through the limit.
    """
    limits = (
        (_count_key("address", email), settings.ACCOUNT_MAILS_PER_ADDRESS_HOUR),
        (_count_key("client", client), settings.ACCOUNT_MAILS_PER_CLIENT_HOUR),
    )
    counts = cache.get_many([key for key, _ in limits])
    if any(counts.get(key, 0) >= limit for key, limit in limits):
        return False
    for key, _ in limits:
        # add() starts the hour's window; incr() is atomic in Redis and memcached.
        cache.add(key, 0, MAIL_WINDOW_S)
        try:
            cache.incr(key)
        except ValueError:  # expired between add() and incr()
            cache.set(key, 1, MAIL_WINDOW_S)
    return True


def _confirm_url(user: Any, *, base_url: str, next_url: str) -> str:
    path = reverse(
        "signup_confirm",
        kwargs={
            "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
            "token": signup_token.make_token(user),
        },
    )
    query = f"?{urlencode({'next': next_url})}" if next_url else ""
    return f"{base_url}{path}{query}"


def _mail(template: str, *, to: str, subject: str, context: dict[str, Any]) -> None:
    send_mail(subject, render_to_string(template, context), None, [to])


@transaction.atomic
def account_signup(
    *, username: str, email: str, password: str, client: str, base_url: str, next_url: str = ""
) -> None:
    """Sign up ``username`` with ``email``, by a confirmation link sent to that address.

    A new address gets an inactive account and the link that activates it. An address that
    already has an account gets, instead, a note to its owner that someone tried to sign up
    with it, and where to reset the password (an unconfirmed account gets its link again);
    no account is created. The caller answers the same in every case, and over the mail
    limits nothing is created or sent.
    """
    if not account_mail_allowance_take(email=email, client=client):
        return
    users = get_user_model()
    existing = users.objects.filter(email__iexact=email).order_by("pk").first()
    context = {"base_url": base_url, "login_url": f"{base_url}{reverse('login')}"}
    if existing is None:
        user = users(username=username, email=email, is_active=False)
        user.set_password(password)
        user.save()
        _mail(
            "registration/signup_confirm_email.txt",
            to=email,
            subject="Confirm your sign-up on the evaluation platform",
            context={
                **context,
                "user": user,
                "confirm_url": _confirm_url(user, base_url=base_url, next_url=next_url),
            },
        )
        return
    _mail(
        "registration/signup_existing_email.txt",
        to=existing.email,
        subject="Someone tried to sign up with your address on the evaluation platform",
        context={
            **context,
            "user": existing,
            "reset_url": f"{base_url}{reverse('password_reset')}",
            "confirm_url": (
                None
                if existing.is_active
                else _confirm_url(existing, base_url=base_url, next_url=next_url)
            ),
        },
    )


def _link_user(uidb64: str, token: str) -> Any | None:
    try:
        pk = int(urlsafe_base64_decode(uidb64).decode())
    except (ValueError, UnicodeDecodeError):
        return None
    user = get_user_model().objects.filter(pk=pk).first()
    if user is None or not signup_token.check_token(user, token):
        return None
    return user


def account_signup_link_valid(*, uidb64: str, token: str) -> bool:
    """Whether a confirmation link is good, without spending it: a GET only shows the
    button, since mail scanners open links before their reader does."""
    return _link_user(uidb64, token) is not None


@transaction.atomic
def account_signup_confirm(*, uidb64: str, token: str) -> Any | None:
    """The account that the confirmation link names, activated; None for a link that is
    wrong, used already or expired (``PASSWORD_RESET_TIMEOUT``). The caller logs the user
    in, which spends the link."""
    user = _link_user(uidb64, token)
    if user is not None and not user.is_active:
        user.is_active = True
        user.save(update_fields=["is_active"])
    return user
