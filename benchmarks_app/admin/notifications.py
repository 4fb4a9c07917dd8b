"""Notifications admin: webhooks, their deliveries (read-only, with "retry now"), preferences."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from benchmarks_app.models import NotificationPreference, Webhook, WebhookDelivery
from benchmarks_app.services import webhooks as webhook_services


@admin.register(NotificationPreference)
class NotificationPreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "email_on_run_end", "updated_at"]
    list_filter = ["email_on_run_end"]
    search_fields = ["user__username", "user__email"]
    raw_id_fields = ["user"]


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    list_display = ["url", "owner", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["url", "owner__username"]
    raw_id_fields = ["owner"]
    # The secret signs deliveries: staff can deactivate a webhook, not read its key.
    exclude = ["secret"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "event",
        "webhook",
        "run",
        "status",
        "attempts",
        "last_status_code",
        "created_at",
        "next_attempt_at",
        "delivered_at",
    ]
    list_filter = ["status", "event"]
    search_fields = ["webhook__url", "webhook__owner__username", "run__id"]
    readonly_fields = [
        "webhook",
        "run",
        "event",
        "payload",
        "status",
        "attempts",
        "last_status_code",
        "last_error",
        "created_at",
        "next_attempt_at",
        "delivered_at",
    ]
    actions = ["retry_now"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A record of what was sent: shown, never edited (retries go through the action).
        return False

    @admin.action(description="Retry now (pending or failed deliveries)")
    def retry_now(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        queued = skipped = 0
        for delivery in queryset:
            if webhook_services.delivery_retry_now(delivery=delivery):
                queued += 1
            else:
                skipped += 1
        messages.success(request, f"{queued} delivery(ies) queued for another attempt.")
        if skipped:
            messages.warning(request, f"{skipped} already delivered: not sent again.")
