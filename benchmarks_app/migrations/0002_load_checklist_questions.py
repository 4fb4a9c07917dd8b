"""Load the 15 NeurIPS 2024 checklist questions from the shipped JSON."""

from __future__ import annotations

import json
from pathlib import Path

from django.db import migrations

QUESTIONS_FILE = (
    Path(__file__).resolve().parent.parent
    / "sample_data"
    / "checklist"
    / "neurips2024_checklist.json"
)


def load_questions(apps, schema_editor):  # type: ignore[no-untyped-def]
    question_model = apps.get_model("benchmarks_app", "ChecklistQuestion")
    for item in json.loads(QUESTIONS_FILE.read_text(encoding="utf-8")):
        question_model.objects.update_or_create(
            number=item["number"],
            defaults={
                "title": item["title"],
                "question": item["question"],
                "guidelines": item.get("guidelines", ""),
            },
        )


def unload_questions(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("benchmarks_app", "ChecklistQuestion").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [("benchmarks_app", "0001_initial")]
    operations = [migrations.RunPython(load_questions, unload_questions)]
