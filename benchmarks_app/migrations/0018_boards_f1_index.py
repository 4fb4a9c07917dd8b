"""Audit board rows: the metrics' F1 as a column (re-ranking reads it for every row), and an
index for the page's two tables (ranked rows, then the others)."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models


def fill_f1(apps: Any, schema_editor: Any) -> None:
    row_model = apps.get_model("benchmarks_app", "AuditBoardRow")
    rows = []
    for row in row_model.objects.only("id", "metrics").iterator(chunk_size=2000):
        row.f1 = (row.metrics or {}).get("f1")
        rows.append(row)
        if len(rows) >= 2000:
            row_model.objects.bulk_update(rows, ["f1"])
            rows = []
    row_model.objects.bulk_update(rows, ["f1"])


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks_app", "0017_judge_records"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditboardrow",
            name="f1",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.RunPython(fill_f1, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="auditboardrow",
            index=models.Index(
                fields=["release", "judge", "phase", "is_complete", "position"],
                name="audit_board_complete_pos",
            ),
        ),
    ]
