"""Self-service accounts: participants sign up (with an e-mail address, confirmed by a link
sent to it), then create or join a team; a forgotten password is reset through a link sent by
e-mail. Neither form tells whether an address has an account (see services/accounts.py)."""

from __future__ import annotations

from typing import Any

from axes.utils import reset as axes_reset
from django import forms
from django.contrib.auth import get_user_model, login
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import UserCreationForm, UsernameField
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from rest_framework.settings import api_settings

from benchmarks_app.client_address import client_address
from benchmarks_app.rate_limits import rate_parse, rate_take
from benchmarks_app.services.accounts import (
    account_mail_allowance_take,
    account_signup,
    account_signup_confirm,
    account_signup_link_valid,
    account_unconfirmed_expire,
    signup_replaces,
)
from benchmarks_app.views.busy import throttled_page


class SignupForm(UserCreationForm):
    """Username, e-mail address (required, one account per address) and password twice."""

    email = forms.EmailField(
        label="E-mail address",
        max_length=254,
        help_text="For password resets and, if you ask for them, run notifications.",
        widget=forms.EmailInput(attrs={"autocomplete": "email"}),
    )

    class Meta:
        model = get_user_model()
        fields = ("username", "email")
        field_classes = {"username": UsernameField}

    def clean_username(self) -> str:
        # A username held by an unconfirmed account with the address given here is this
        # sign-up's to take over (account_signup replaces that account): refusing it would let
        # whoever signed up first with somebody else's address keep their name too.
        username = self.cleaned_data.get("username")
        if username and signup_replaces(username=username, email=self.data.get("email", "")):
            self._replacing = True
            return str(username)
        return super().clean_username()

    def validate_unique(self) -> None:
        if getattr(self, "_replacing", False):
            return
        super().validate_unique()

    def clean_email(self) -> str:
        # Whether the address has an account is not checked here: an error would tell anybody
        # who owns an account; account_signup mails that address's owner instead.
        return str(get_user_model().objects.normalize_email(self.cleaned_data["email"].strip()))


class LoginView(auth_views.LoginView):
    """Django's login form, under the rate of ``POST /api/auth/token/``: each attempt counts
    against the client address's anonymous API allowance (``API_THROTTLE_ANON``, the same
    counts), so a form post (a password hash, ~0.4 s of CPU) is no cheaper a way in than
    the API. Past it the form answers 429 with Retry-After; the lockout still applies within.
    """

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = login_rate_take(request)
        if wait is not None:
            return throttled_page(
                "Too many login attempts from your address; "
                f"try again in {int(wait)} second{'s' if wait != 1 else ''}.",
                retry_after_s=wait,
            )
        return super().post(request, *args, **kwargs)


def login_rate_take(request: HttpRequest) -> float | None:
    """Count a login attempt as DRF's anonymous throttle counts the token endpoint's (same
    key, same rate): None when it fits, else the seconds to wait."""
    rate = api_settings.DEFAULT_THROTTLE_RATES.get("anon")
    if not rate:
        return None
    limit, duration_s = rate_parse(str(rate))
    return rate_take(
        key=f"throttle_anon_{client_address(request)}", limit=limit, duration_s=duration_s
    )


class PasswordResetView(auth_views.PasswordResetView):
    """Django's view, with at most so many e-mails per address and per client an hour.

    Past a limit the form answers as always ("check your e-mail") and sends nothing.
    """

    email_template_name = "registration/password_reset_email.txt"
    subject_template_name = "registration/password_reset_subject.txt"

    def form_valid(self, form: Any) -> HttpResponse:
        if not account_mail_allowance_take(
            email=form.cleaned_data["email"], client=client_address(self.request)
        ):
            return HttpResponseRedirect(self.get_success_url())
        return super().form_valid(form)


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """Django's view; a password reset through the e-mailed link also lifts a login lockout."""

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        # The link proves the mailbox: the lockout (django-axes) has done its job.
        axes_reset(username=form.user.get_username())
        return response


def _next_url(request: HttpRequest) -> str:
    """``next`` when it points to this site (no open redirect), else the team page."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return reverse("checklist:team")


def _base_url(request: HttpRequest) -> str:
    # Like Django's password-reset links: the host the form was posted to (ALLOWED_HOSTS).
    return request.build_absolute_uri("/").rstrip("/")


def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return HttpResponseRedirect(_next_url(request))
    # UserCreationForm runs AUTH_PASSWORD_VALIDATORS and names the field that failed.
    if request.method == "POST":
        # Expired sign-ups free their usernames before this one's is checked.
        account_unconfirmed_expire()
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        account_signup(
            username=form.cleaned_data["username"],
            email=form.cleaned_data["email"],
            password=form.cleaned_data["password1"],
            client=client_address(request),
            base_url=_base_url(request),
            next_url=_next_url(request),
        )
        # The same answer whether the address is new, known, or over its mail limit.
        return redirect("signup_sent")
    return render(
        request,
        "registration/signup.html",
        {"form": form, "next": request.POST.get("next") or request.GET.get("next", "")},
        status=400 if request.method == "POST" else 200,
    )


def signup_sent(request: HttpRequest) -> HttpResponse:
    return render(request, "registration/signup_sent.html")


def signup_confirm(request: HttpRequest, uidb64: str, token: str) -> HttpResponse:
    """GET shows a button, POST activates the account and logs in (which spends the link):
    mail scanners that open links must not use it up before its reader does."""
    if request.method == "POST":
        user = account_signup_confirm(uidb64=uidb64, token=token)
        if user is not None:
            # Several authentication backends (django-axes first): name the one that fits.
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            return HttpResponseRedirect(_next_url(request))
        valid = False
    else:
        valid = account_signup_link_valid(uidb64=uidb64, token=token)
    return render(
        request,
        "registration/signup_confirm.html",
        {"validlink": valid, "next": request.GET.get("next", "")},
        status=200 if valid else 400,
    )
