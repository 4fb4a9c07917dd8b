from __future__ import annotations

from typing import Any

from django.db import models


class TimeStampedModel(models.Model):
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class EntryMetadata(models.Model):
    """What a participant says about the method behind an entry (shown on boards)."""

    method_name = models.CharField(max_length=100, blank=True)
    method_description = models.CharField(max_length=500, blank=True)
    method_url = models.URLField(max_length=500, blank=True)

    class Meta:
        abstract = True


class AppendOnlyError(RuntimeError):
    """A stored result row was about to be changed: results are appended, never overwritten."""


class AppendOnlyModel(models.Model):
    """Result rows: written once so that any leaderboard can be reproduced from them."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError(f"{type(self).__name__} rows are append-only")
        super().save(*args, **kwargs)


class Severity(models.TextChoices):
    """Normalized audit severities."""

    HIGH = "High", "High"
    MEDIUM = "Medium", "Medium"
    LOW = "Low", "Low"
    INFO = "Info", "Info"
    BEST_PRACTICES = "Best Practices", "Best Practices"


QA_SEVERITIES = (Severity.INFO, Severity.BEST_PRACTICES)
