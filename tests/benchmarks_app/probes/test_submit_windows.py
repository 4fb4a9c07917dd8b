"""The probe submission form says which phase a submission lands in and what is left of the
entrant's entries there, as the checklist form does (issue 37 item 8); the only suite is
chosen already."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from benchmarks_app.services.phases import phase_create
from tests.benchmarks_app.probes.conftest import GOOD, responses_jsonl

pytestmark = pytest.mark.django_db


def test_the_form_names_the_phase_and_the_entries_left(suite: Any, submit: Any) -> None:
    user = get_user_model().objects.create_user("entrant", password="pw")
    now = timezone.now()
    phase_create(
        target=suite,
        name="Final round",
        slug="final",
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=5),
        daily_limit=2,
        total_limit=5,
    )
    submit(suite_name="mini", model_name="m1", text=responses_jsonl(GOOD), owner=user)
    client = Client()
    client.force_login(user)
    html = client.get("/probes/submit/").content.decode()
    windows = html[html.index('id="submit-windows"') :]
    windows = windows[: windows.index("</ul>")]
    assert "suite mini" in windows and "lands in the Final round phase" in windows
    assert "1 of 2 left in 24 hours" in windows and "4 of 5 left in this phase" in windows
    assert '<option value="mini" selected>' in html


def test_a_suite_without_phases_says_nothing_of_limits(suite: Any) -> None:
    client = Client()
    client.force_login(get_user_model().objects.create_user("entrant", password="pw"))
    html = client.get("/probes/submit/").content.decode()
    assert 'id="submit-windows"' not in html
