from __future__ import annotations

from typing import Any

from django.db import migrations, models

# The board tables whose rows the sizes count (models.board_sizes.SIZED_BOARDS).
BOARD_TABLES = (
    "benchmarks_app_auditboardrow",
    "benchmarks_app_probeboardrow",
    "benchmarks_app_checklistboardrow",
)


def _forward(apps: Any, schema_editor: Any) -> None:
    # The triggers are installed, and the sizes filled, by post_migrate
    # (services.board_sizes): a later migration that rebuilds a board table on SQLite drops
    # its triggers, and post_migrate puts them back after every migrate.
    pass


def _drop_triggers(apps: Any, schema_editor: Any) -> None:
    # Before the table goes: a trigger left behind would fail every write to the boards.
    # Written out here rather than imported from services.board_sizes, so that this migration
    # keeps doing what it did whatever that module becomes (and migrations stay below services).
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        for table in BOARD_TABLES:
            if connection.vendor == "postgresql":
                cursor.execute(
                    "SELECT tgname FROM pg_trigger "
                    "WHERE tgrelid = %s::regclass AND NOT tgisinternal",
                    [connection.ops.quote_name(table)],
                )
            else:
                cursor.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s",
                    [table],
                )
            names = sorted(n for (n,) in cursor.fetchall() if n.startswith("board_sizes_"))
            for name in names:
                quoted = connection.ops.quote_name(name)
                if connection.vendor == "postgresql":
                    cursor.execute(f"DROP TRIGGER {quoted} ON {connection.ops.quote_name(table)}")
                else:
                    cursor.execute(f"DROP TRIGGER {quoted}")


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks_app", "0038_piece_judge_outage"),
    ]

    operations = [
        migrations.CreateModel(
            name="BoardSize",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("board", models.CharField(max_length=10)),
                ("key_a", models.BigIntegerField()),
                ("key_b", models.CharField(blank=True, default="", max_length=300)),
                ("phase_key", models.BigIntegerField(default=0)),
                ("sort_group", models.SmallIntegerField(default=0)),
                ("entries", models.BigIntegerField(default=0)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("board", "key_a", "key_b", "phase_key", "sort_group"),
                        name="uniq_board_size_key",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="BoardBucket",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("board", models.CharField(max_length=10)),
                ("key_a", models.BigIntegerField()),
                ("key_b", models.CharField(blank=True, default="", max_length=300)),
                ("phase_key", models.BigIntegerField(default=0)),
                ("measure", models.SmallIntegerField()),
                ("group_a", models.BigIntegerField(default=0)),
                ("group_b", models.BigIntegerField(default=0)),
                ("bucket", models.BigIntegerField()),
                ("entries", models.BigIntegerField(default=0)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=(
                            "board",
                            "key_a",
                            "key_b",
                            "phase_key",
                            "measure",
                            "group_a",
                            "group_b",
                            "bucket",
                        ),
                        name="uniq_board_bucket_key",
                    )
                ],
            },
        ),
        migrations.RunPython(_forward, _drop_triggers),
    ]
