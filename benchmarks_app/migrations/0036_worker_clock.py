from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks_app", "0035_paired_board_summary"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkerClock",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("host", models.CharField(max_length=200, unique=True)),
                (
                    "skew_s",
                    models.FloatField(
                        help_text="The database's clock minus this host's, in seconds."
                    ),
                ),
                ("measured_at", models.DateTimeField(help_text="By the database's clock.")),
            ],
        ),
    ]
