"""Accounts: sign-up confirmed by e-mail, and the limits on the e-mails the account forms send.

Neither the sign-up form nor the password-reset form tells a visitor whether an address has an
account: both answer "check your e-mail" whatever the address, and what differs goes into the
mailbox, which only its owner reads. The same goes for the limits: past them, the forms answer
the same and send nothing, so a full allowance reveals nothing either.
"""

from __future__ import annotations

import contextlib
import hashlib
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.core.cache import cache
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import QuerySet
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
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
    # Counted first, then compared: the cache is shared by every process (config.env.caches)
    # and its increments are atomic, so of any number of requests at once exactly the
    # allowance see a count within it; a request over either limit takes its counts back.
    counted: list[str] = []
    allowed = True
    for key, limit in limits:
        counted.append(key)
        if _count(key) > limit:
            allowed = False
            break
    if not allowed:
        for key in counted:
            with contextlib.suppress(ValueError):  # expired meanwhile: nothing to take back
                cache.decr(key)
    return allowed


def _count(key: str) -> int:
    """Add one to the hour's count under ``key`` (add() starts the window) and return it."""
    cache.add(key, 0, MAIL_WINDOW_S)
    try:
        return int(cache.incr(key))
    except ValueError:  # expired between add() and incr()
        cache.add(key, 1, MAIL_WINDOW_S)
        return 1


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


def unconfirmed_accounts() -> QuerySet[Any]:
    """Accounts made by a sign-up whose link was never used: inactive, never logged in, not
    staff and in no team (an account staff deactivated has logged in, or belongs somewhere).

    Nobody has proved they own such an account's address, so it holds nothing: a later
    sign-up with the address replaces it, and it expires with its link.
    """
    return get_user_model().objects.filter(
        is_active=False, last_login__isnull=True, is_staff=False, memberships__isnull=True
    )


@transaction.atomic
def account_unconfirmed_expire(*, now: datetime | None = None) -> int:
    """Delete the unconfirmed accounts whose link has expired (``PASSWORD_RESET_TIMEOUT``
    after the sign-up), freeing their usernames and addresses; how many were deleted."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.PASSWORD_RESET_TIMEOUT)
    expired = list(
        unconfirmed_accounts().filter(date_joined__lt=cutoff).values_list("pk", flat=True)
    )
    if expired:
        get_user_model().objects.filter(pk__in=expired).delete()
    return len(expired)


def signup_replaces(*, username: str, email: str) -> bool:
    """Whether a sign-up of ``username`` with ``email`` would take over the unconfirmed
    account that holds that username with that address (the form then lets the name pass)."""
    return (
        unconfirmed_accounts()
        .filter(username__iexact=username, email__iexact=email.strip())
        .exists()
    )


@transaction.atomic
def account_signup(
    *, username: str, email: str, password: str, client: str, base_url: str, next_url: str = ""
) -> None:
    """Sign up ``username`` with ``email``, by a confirmation link sent to that address.

    A new address gets an inactive account and the link that activates it. An address whose
    account was never confirmed has that account replaced: this sign-up's username and
    password, and a new link (the old one stops working, since the password is part of its
    token). Whoever signed up first with somebody else's address therefore cannot log in to
    the account its owner confirms. An address with a confirmed account gets, instead, a note
    to its owner that someone tried to sign up with it, and where to reset the password (or,
    for an account staff deactivated, that it stays so); no account is created, and no mail
    ever carries the link of an account whose password this sign-up did not set. The caller
    answers the same in every case, and over the mail limits nothing is created or sent.

    The password is hashed in every case, the dearest step by far: an answer that came back
    sooner for a known address would tell which addresses have accounts.
    """
    hashed = make_password(password)
    if not account_mail_allowance_take(email=email, client=client):
        return
    users = get_user_model()
    account_unconfirmed_expire()
    existing = users.objects.filter(email__iexact=email).order_by("pk").first()
    context = {"base_url": base_url, "login_url": f"{base_url}{reverse('login')}"}
    replaced = (
        existing is not None
        and unconfirmed_accounts().filter(pk=existing.pk).exists()
        # The new username must be free, or the unconfirmed account's own.
        and not users.objects.filter(username__iexact=username).exclude(pk=existing.pk).exists()
    )
    if existing is None or replaced:
        user = existing if existing is not None and replaced else users(is_active=False)
        user.username = username
        user.email = email
        user.password = hashed
        user.date_joined = timezone.now()
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
    if unconfirmed_accounts().filter(pk=existing.pk).exists():
        # An unconfirmed account that this sign-up cannot take over: its username was taken
        # between the form's check and now. Its link must not go out: whoever made it chose
        # its password (issue 36: the squatter's link mailed to the victim logged her in to
        # an account he could still log in to). Nobody proved the address, so it goes.
        existing.delete()
        _mail(
            "registration/signup_retry_email.txt",
            to=email,
            subject="Your sign-up on the evaluation platform did not go through",
            context={
                **context,
                "username": username,
                "signup_url": f"{base_url}{reverse('signup')}",
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
            # An account that is inactive yet not unconfirmed was deactivated (by staff):
            # a sign-up does not bring it back, and the mail says so.
            "deactivated": not existing.is_active,
        },
    )


def _link_user(uidb64: str, token: str) -> Any | None:
    try:
        pk = int(urlsafe_base64_decode(uidb64).decode())
    except (ValueError, UnicodeDecodeError):
        return None
    # Only a sign-up never confirmed: a link must not bring back an account staff
    # deactivated, whenever the link was made.
    user = unconfirmed_accounts().filter(pk=pk).first()
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
