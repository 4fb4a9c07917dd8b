"""Issue 40: owed paired-marks tasks (enqueued_at) and the ``interrupted`` call outcome."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks_app", "0031_board_unique_phase_key"),
    ]

    operations = [
        migrations.AddField(
            model_name="pairedrefresh",
            name="enqueued_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="judgecall",
            name="status",
            field=models.CharField(
                choices=[
                    ("ok", "OK"),
                    ("cached", "Cached"),
                    ("invalid", "Invalid verdict"),
                    ("truncated", "Answer cut at the bound"),
                    ("error", "Error"),
                    ("pending", "In flight"),
                    ("lost", "Lost with its worker"),
                    ("abandoned", "Abandoned in flight"),
                    ("interrupted", "Interrupted by a fault"),
                ],
                db_index=True,
                max_length=16,
            ),
        ),
    ]
