"""Curation history of checklist questions in the admin (django-simple-history)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks_app.models import ChecklistQuestion

pytestmark = pytest.mark.django_db


def test_an_admin_edit_of_a_question_is_in_its_history_with_the_editor(admin_client, admin_user):
    question = ChecklistQuestion.objects.order_by("number").first()
    assert question is not None  # loaded by migration 0002
    url = reverse("admin:benchmarks_app_checklistquestion_change", args=[question.pk])
    response = admin_client.post(
        url,
        {
            "number": question.number,
            "title": question.title,
            "question": question.question,
            "guidelines": question.guidelines + "\nCurator's note: cite the section.",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    latest = question.history.order_by("-history_date", "-history_id").first()
    assert latest is not None
    assert (latest.history_type, latest.history_user) == ("~", admin_user)
    assert latest.guidelines.endswith("Curator's note: cite the section.")
    history = admin_client.get(
        reverse("admin:benchmarks_app_checklistquestion_history", args=[question.pk])
    )
    assert history.status_code == 200
    assert admin_user.get_username() in history.content.decode()
