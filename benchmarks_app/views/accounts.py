"""Self-service accounts: participants sign up (with an e-mail address), then create or join
a team; a forgotten password is reset through a link sent by e-mail."""

from __future__ import annotations

from typing import Any

from axes.utils import reset as axes_reset
from django import forms
from django.contrib.auth import get_user_model, login
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import UserCreationForm, UsernameField
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme


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

    def clean_email(self) -> str:
        email = get_user_model().objects.normalize_email(self.cleaned_data["email"].strip())
        # Case-insensitive: addresses differing in case reach the same mailbox, and a reset
        # sent to one must not open another's account.
        if get_user_model().objects.filter(email__iexact=email).exists():
            raise forms.ValidationError(
                "An account with this e-mail address already exists. Log in, or reset its password."
            )
        return email


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


def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect(_next_url(request))
    # UserCreationForm runs AUTH_PASSWORD_VALIDATORS and names the field that failed.
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        # Several authentication backends (django-axes first): name the one that fits.
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect(_next_url(request))
    return render(
        request,
        "registration/signup.html",
        {"form": form, "next": request.POST.get("next") or request.GET.get("next", "")},
        status=400 if request.method == "POST" else 200,
    )
