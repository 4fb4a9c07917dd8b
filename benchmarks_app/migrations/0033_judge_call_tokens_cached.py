from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks_app", "0032_queue_faults"),
    ]

    operations = [
        migrations.AddField(
            model_name="judgecall",
            name="tokens_cached",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
