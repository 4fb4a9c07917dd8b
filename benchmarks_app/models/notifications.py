"""What a participant asked to be told when a run ends: e-mail, signed webhooks."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models

from benchmarks_app.models.common import TimeStampedModel
from benchmarks_app.models.runs import EvaluationRun


class NotificationPreference(TimeStampedModel):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preference"
    )
    email_on_run_end = models.BooleanField(
        default=False, help_text="Send an e-mail when one of my runs ends."
    )

    def __str__(self) -> str:
        return f"{self.user}: e-mail on run end {'on' if self.email_on_run_end else 'off'}"


def new_webhook_secret() -> str:
    return secrets.token_urlsafe(32)


class Webhook(TimeStampedModel):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhooks"
    )
    url = models.URLField(max_length=500)
    secret = models.CharField(
        max_length=100,
        default=new_webhook_secret,
        help_text="Signs each delivery: HMAC-SHA256 of the body, X-Eval-Signature.",
    )
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.url


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed (gave up)"


class WebhookDelivery(models.Model):
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    run = models.ForeignKey(
        EvaluationRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    event = models.CharField(max_length=50, default="run.finished")
    payload = models.JSONField(default=dict)
    status = models.CharField(
        max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING, db_index=True
    )
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["webhook", "run", "event"], name="uniq_webhook_delivery_per_run_event"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} → {self.webhook} ({self.status})"
