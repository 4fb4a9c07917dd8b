"""Issue 36 item 3, probes: a bad file answers the same under a hidden phase's model name as
under a free one (the name is judged only once the file is good)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from benchmarks_app.services.phases import phase_create
from tests.benchmarks_app.probes.conftest import GOOD, responses_jsonl
from tests.factories.common import UserFactory

pytestmark = pytest.mark.django_db


def _answer(response: Any, name: str) -> tuple[int, str]:
    return response.status_code, response.content.decode().replace(name, "NAME")


def test_a_bad_probe_file_answers_the_same_under_a_hidden_model_name(
    suite: Any, submit: Any
) -> None:
    now = timezone.now()
    phase_create(
        target=suite,
        name="Final",
        slug="final",
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=5),
        is_hidden=True,
    )
    submit(
        suite_name="mini",
        model_name="hidden-model",
        text=responses_jsonl(GOOD),
        owner=UserFactory.create(),
    )
    prober = APIClient()
    prober.force_authenticate(UserFactory.create())

    def post(model: str) -> tuple[int, str]:
        body = {"suite": "mini", "model": model, "responses": [{"probe_id": "w1", "output": ""}]}
        return _answer(prober.post(reverse("api:probes-submit"), body, format="json"), model)

    assert post("hidden-model") == post("hidden-mode9")
    assert post("hidden-model")[0] == 400
