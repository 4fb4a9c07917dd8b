from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps
from django.contrib.admin.sites import AdminSite
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


def _install_default_judges(sender: AppConfig, **kwargs: Any) -> None:
    """The judge records of today's spellings (``offline``, ``openai``), so nothing breaks."""
    from django.db import connections

    from benchmarks_app.models import JudgeRecord
    from benchmarks_app.services.judge_records import judge_records_ensure_defaults

    using = kwargs.get("using", "default")
    if JudgeRecord._meta.db_table not in connections[using].introspection.table_names():
        return
    judge_records_ensure_defaults()


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


def _keep_run_counts(sender: AppConfig, **kwargs: Any) -> None:
    """The run counts' triggers (a migration that rebuilds the run table on SQLite drops them)
    and their reconcile: fills the counts of runs that predate them, and corrects them after a
    flush (``services.run_counts``)."""
    from django.db import connections

    from benchmarks_app.models import RunCount
    from benchmarks_app.services.run_counts import run_counts_reconcile

    using = kwargs.get("using", "default")
    if RunCount._meta.db_table not in connections[using].introspection.table_names():
        return
    run_counts_reconcile()


def _keep_board_sizes(sender: AppConfig, **kwargs: Any) -> None:
    """The board sizes' triggers and their reconcile, as for the run counts
    (``services.board_sizes``)."""
    from django.db import connections

    from benchmarks_app.models import BoardSize
    from benchmarks_app.services.board_sizes import board_sizes_reconcile

    using = kwargs.get("using", "default")
    if BoardSize._meta.db_table not in connections[using].introspection.table_names():
        return
    board_sizes_reconcile()


class BenchmarksAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "benchmarks_app"
    verbose_name = "Benchmarks"

    def ready(self) -> None:
        from django.core import checks

        from benchmarks_app.checks import check_connection_budget, check_static_manifest
        from benchmarks_app.db_pool import fork_guard_install, pooled

        if pooled():
            fork_guard_install()
        checks.register(check_static_manifest)
        checks.register(check_connection_budget, checks.Tags.database)
        post_migrate.connect(
            _install_default_probe_rules, sender=self, dispatch_uid="install_default_probe_rules"
        )
        post_migrate.connect(
            _install_queue_support, sender=self, dispatch_uid="install_queue_support"
        )
        post_migrate.connect(
            _install_default_judges, sender=self, dispatch_uid="install_default_judges"
        )
        post_migrate.connect(_backfill_boards, sender=self, dispatch_uid="backfill_boards")
        post_migrate.connect(_keep_run_counts, sender=self, dispatch_uid="keep_run_counts")
        post_migrate.connect(_keep_board_sizes, sender=self, dispatch_uid="keep_board_sizes")


# The admin index groups the one app's models by benchmark, the order a maintainer curates in
# (a flat alphabetical list of 36 models mixed the three benchmarks). A model not named here
# lands in "Operations", so a new model is never hidden.
ADMIN_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Audit findings",
        (
            "AuditDataset",
            "DatasetRelease",
            "Repo",
            "TruthFinding",
            "Scanner",
            "ScanResult",
            "ScanFinding",
            "AuditRepoResult",
            "AuditTruthResult",
        ),
    ),
    (
        "Safety probes",
        (
            "ProbeSuite",
            "Probe",
            "PatternRule",
            "ResponseSubmission",
            "Response",
            "ProbeRunReport",
            "ProbeCaseResult",
        ),
    ),
    (
        "Paper checklist challenge",
        (
            "Challenge",
            "ChecklistQuestion",
            "Team",
            "ChecklistSubmission",
            "Paper",
            "ChecklistAssessment",
            "ChecklistScore",
            "ChecklistBoardRow",
        ),
    ),
    (
        "Runs and judges",
        (
            "EvaluationRun",
            "RunPiece",
            "JudgeRecord",
            "CuratedVerdict",
            "JudgeCall",
            "JudgeCacheEntry",
        ),
    ),
    (
        "Operations",
        ("Phase", "NotificationPreference", "Webhook", "WebhookDelivery", "WorkerClock"),
    ),
)


class GroupedAdminSite(AdminSite):
    site_header = "Evaluation platform administration"
    site_title = "Evaluation platform admin"
    index_title = "Curation and operations"

    def get_app_list(self, request: Any, app_label: str | None = None) -> list[dict[str, Any]]:
        apps = super().get_app_list(request, app_label)
        ours = next((a for a in apps if a["app_label"] == BenchmarksAppConfig.name), None)
        if ours is None:
            return apps
        by_name = {m["object_name"]: m for m in ours["models"]}
        groups: list[dict[str, Any]] = []
        placed: set[str] = set()
        for title, names in ADMIN_GROUPS:
            models = [by_name[n] for n in names if n in by_name]
            placed.update(names)
            if models:
                groups.append({**ours, "name": title, "models": models})
        leftover = [m for n, m in by_name.items() if n not in placed]
        if leftover:
            operations = next((g for g in groups if g["name"] == "Operations"), None)
            if operations is None:
                groups.append({**ours, "name": "Operations", "models": leftover})
            else:
                operations["models"] = [*operations["models"], *leftover]
        index = apps.index(ours)
        # Ours first: the benchmarks are what a maintainer comes for; auth and the queue after.
        return [*groups, *apps[:index], *apps[index + 1 :]]


def _admin_checked_once_discovered(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """The admin's checks of every site's ModelAdmins, once the admin modules are imported
    (a ``check`` that runs before anything has loaded the URLconf would find none)."""
    from django.contrib import admin
    from django.contrib.admin.checks import check_admin_app

    admin.autodiscover()
    return list(check_admin_app(app_configs, **kwargs))


# Subclassed through its module: a bare AdminConfig name here would be a second candidate
# for this module's default AppConfig.
class GroupedAdminConfig(admin_apps.SimpleAdminConfig):
    """Django's admin without its discovery at start-up: the admin modules are imported by
    the URLconf (``config/urls.py``) and before the admin's checks, not by every process. A
    judging command or a queue worker never serves a page, and the admin modules were a
    quarter of its ``django.setup()`` (0.47 -> 0.36 s on 2 CPUs, 2026-12-07), paid again by
    every ``evaluate_* --wait`` and every cluster start (issue 38)."""

    default = False
    default_site = "benchmarks_app.apps.GroupedAdminSite"

    def ready(self) -> None:
        # SimpleAdminConfig.ready, with the ModelAdmin checks run after the discovery.
        from django.contrib.admin.checks import check_dependencies
        from django.core import checks

        checks.register(check_dependencies, checks.Tags.admin)
        checks.register(_admin_checked_once_discovered, checks.Tags.admin)
