from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _install_default_probe_rules(sender: AppConfig, **kwargs: Any) -> None:
    """Give a fresh database the default probe rule set (only while the rule table is empty)."""
    from django.db import connections

    from benchmarks_app.models import PatternRule
    from benchmarks_app.services.probes import pattern_rules_install_defaults

    using = kwargs.get("using", "default")
    if PatternRule._meta.db_table not in connections[using].introspection.table_names():
        return
    pattern_rules_install_defaults()


def _install_queue_support(sender: AppConfig, **kwargs: Any) -> None:
    """The sweeper's schedule and the table where clusters publish that they are alive."""
    from django.core.management import call_command

    from benchmarks_app.services.queue_canary import queue_canary_write
    from benchmarks_app.services.sweeper import sweep_schedule_ensure

    using = kwargs.get("using", "default")
    call_command("createcachetable", database=using, verbosity=0)
    sweep_schedule_ensure()
    # Before any cluster starts: one with another SECRET_KEY then refuses to.
    queue_canary_write(force=True)


def _backfill_boards(sender: AppConfig, **kwargs: Any) -> None:
    """Fill the stored boards once on a database whose results predate them."""
    from django.db import connections

    from benchmarks_app.models import ChecklistBoardRow
    from benchmarks_app.services.boards import boards_missing, boards_rebuild

    using = kwargs.get("using", "default")
    if ChecklistBoardRow._meta.db_table not in connections[using].introspection.table_names():
        return
    if boards_missing():
        boards_rebuild()


class BenchmarksAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "benchmarks_app"
    verbose_name = "Benchmarks"

    def ready(self) -> None:
        from django.core import checks

        from benchmarks_app.checks import check_static_manifest

        checks.register(check_static_manifest)
        post_migrate.connect(
            _install_default_probe_rules, sender=self, dispatch_uid="install_default_probe_rules"
        )
        post_migrate.connect(
            _install_queue_support, sender=self, dispatch_uid="install_queue_support"
        )
        post_migrate.connect(_backfill_boards, sender=self, dispatch_uid="backfill_boards")
