"""Account settings: the run-end e-mail opt-in, and one's webhooks (under /accounts/settings/).

A webhook's secret is shown once, in the answer to its creation or to "rotate secret"; the
page lists webhooks without their secrets afterwards.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_POST

from benchmarks_app.models import Webhook
from benchmarks_app.selectors.visibility import visible_webhook_deliveries
from benchmarks_app.services import notifications, webhooks
from scoring import webhooks as signing

app_name = "account"

RECENT_DELIVERIES = 20


class PreferenceForm(forms.Form):
    email_on_run_end = forms.BooleanField(
        required=False, label="E-mail me when one of my runs ends"
    )


class WebhookForm(forms.Form):
    url = forms.CharField(
        label="Webhook URL",
        max_length=500,
        help_text="Receives a signed JSON POST when one of your runs ends (http or https).",
        widget=forms.URLInput(attrs={"placeholder": "https://example.org/hooks/eval"}),
    )


def _page(
    request: HttpRequest,
    *,
    webhook_form: WebhookForm | None = None,
    revealed: Webhook | None = None,
    status: int = 200,
) -> HttpResponse:
    preference = notifications.notification_preference(request.user)
    owned = list(webhooks.webhooks_of(request.user))
    deliveries = (
        visible_webhook_deliveries(request.user)
        .select_related("webhook")
        .order_by("-created_at", "-id")[:RECENT_DELIVERIES]
    )
    return render(
        request,
        "accounts/settings.html",
        {
            "preference_form": PreferenceForm(
                initial={"email_on_run_end": preference.email_on_run_end}
            ),
            "webhook_form": webhook_form or WebhookForm(),
            "webhooks": owned,
            "revealed": revealed,
            "deliveries": deliveries,
            "signature_header": signing.SIGNATURE_HEADER,
            "timestamp_header": signing.TIMESTAMP_HEADER,
            "event_header": signing.EVENT_HEADER,
            "delivery_header": signing.DELIVERY_HEADER,
        },
        status=status,
    )


@login_required
def account_settings(request: HttpRequest) -> HttpResponse:
    return _page(request)


@login_required
@require_POST
def preferences_update(request: HttpRequest) -> HttpResponse:
    form = PreferenceForm(request.POST)
    form.is_valid()  # a missing box is "off": the form cannot be invalid
    wanted = bool(form.cleaned_data.get("email_on_run_end"))
    notifications.notification_preference_set(user=request.user, email_on_run_end=wanted)
    if wanted and not request.user.email:  # type: ignore[union-attr]
        messages.warning(request, "Your account has no e-mail address: no e-mail can be sent.")
    messages.success(
        request, "You will get an e-mail when a run ends." if wanted else "Run-end e-mails off."
    )
    return redirect("account:settings")


@login_required
@require_POST
def webhook_add(request: HttpRequest) -> HttpResponse:
    form = WebhookForm(request.POST)
    if not form.is_valid():
        return _page(request, webhook_form=form, status=400)
    try:
        webhook = webhooks.webhook_create(owner=request.user, url=form.cleaned_data["url"])
    except webhooks.WebhookError as exc:
        form.add_error("url", exc.message)
        return _page(request, webhook_form=form, status=400)
    # Rendered, not redirected: the secret is shown in this answer only.
    return _page(request, revealed=webhook, status=201)


def _own_webhook(request: HttpRequest, pk: int) -> Webhook:
    webhook = webhooks.webhooks_of(request.user).filter(pk=pk).first()
    if webhook is None:
        raise Http404("No such webhook")
    return webhook


@login_required
@require_POST
def webhook_delete(request: HttpRequest, pk: int) -> HttpResponse:
    webhook = _own_webhook(request, pk)
    url = webhook.url
    webhooks.webhook_delete(webhook=webhook)
    messages.success(request, f"Webhook {url} deleted.")
    return redirect("account:settings")


@login_required
@require_POST
def webhook_rotate(request: HttpRequest, pk: int) -> HttpResponse:
    webhook = webhooks.webhook_rotate_secret(webhook=_own_webhook(request, pk))
    return _page(request, revealed=webhook)


urlpatterns = [
    path("", account_settings, name="settings"),
    path("notifications/", preferences_update, name="preferences"),
    path("webhooks/", webhook_add, name="webhook-add"),
    path("webhooks/<int:pk>/delete/", webhook_delete, name="webhook-delete"),
    path("webhooks/<int:pk>/rotate-secret/", webhook_rotate, name="webhook-rotate"),
]
