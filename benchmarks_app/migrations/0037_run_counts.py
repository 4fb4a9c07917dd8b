from __future__ import annotations

from typing import Any

from django.db import migrations, models


def _forward(apps: Any, schema_editor: Any) -> None:
    # The triggers are installed, and the counts filled, by post_migrate (services.run_counts):
    # a later migration that rebuilds the run table on SQLite drops its triggers, and
    # post_migrate puts them back after every migrate.
    pass


def _drop_triggers(apps: Any, schema_editor: Any) -> None:
    # Before the table goes: a trigger left behind would fail every write to the run table.
    # Written out here rather than imported from services.run_counts, so that this migration
    # keeps doing what it did whatever that module becomes (and migrations stay below services).
    connection = schema_editor.connection
    runs = apps.get_model("benchmarks_app", "EvaluationRun")._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
                [connection.ops.quote_name(runs)],
            )
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [runs]
            )
        names = sorted(name for (name,) in cursor.fetchall() if name.startswith("run_counts_"))
        for name in names:
            quoted = connection.ops.quote_name(name)
            if connection.vendor == "postgresql":
                cursor.execute(f"DROP TRIGGER {quoted} ON {connection.ops.quote_name(runs)}")
            else:
                cursor.execute(f"DROP TRIGGER {quoted}")


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks_app", "0036_worker_clock"),
    ]

    operations = [
        migrations.CreateModel(
            name="RunCount",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "benchmark",
                    models.CharField(
                        choices=[
                            ("audit", "Audit findings"),
                            ("probes", "Safety probes"),
                            ("checklist", "Paper checklist"),
                        ],
                        max_length=10,
                    ),
                ),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("queued", "Queued"),
                            ("running", "Running"),
                            ("succeeded", "Succeeded"),
                            ("failed", "Failed"),
                            ("cancelled", "Cancelled"),
                            ("waiting", "Waiting for judge"),
                        ],
                        max_length=10,
                    ),
                ),
                ("phase_key", models.BigIntegerField(default=0)),
                ("checklist_entry", models.BooleanField(default=False)),
                ("runs", models.BigIntegerField(default=0)),
            ],
            options={
                "indexes": [
                    models.Index(
                        fields=["benchmark", "status", "phase_key", "checklist_entry"],
                        name="run_count_key",
                    )
                ],
            },
        ),
        migrations.RunPython(_forward, _drop_triggers),
    ]
