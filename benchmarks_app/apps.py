from __future__ import annotations

from django.apps import AppConfig


class BenchmarksAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "benchmarks_app"
    verbose_name = "Benchmarks"
