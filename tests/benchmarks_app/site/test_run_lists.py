"""Run lists stay cheap as runs pile up: the count under a page reads the runs table alone
(no join with submissions, scanners or phases), whoever asks."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from benchmarks_app.models import RunStatus
from tests.factories.common import RunFactory, UserFactory

pytestmark = pytest.mark.django_db


def _count_queries(client: Client, path: str, **headers: Any) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path, **headers)
    assert response.status_code == 200, path
    return [q["sql"] for q in captured.captured_queries if re.search(r"COUNT\(", q["sql"])]


@pytest.mark.parametrize("who", ["anonymous", "participant"])
@pytest.mark.parametrize("path", ["/runs/", "/api/runs/", "/runs/?benchmark=audit"])
def test_the_count_under_a_run_list_joins_nothing(who: str, path: str) -> None:
    for _ in range(3):
        RunFactory.create(status=RunStatus.SUCCEEDED)
    client = Client()
    headers: dict[str, str] = {}
    if who == "participant":
        user = UserFactory.create()
        client.force_login(user)
        headers["HTTP_AUTHORIZATION"] = f"Token {Token.objects.create(user=user).key}"
    counts = _count_queries(client, path, **headers)
    assert counts, "the list counts its rows"
    for sql in counts:
        assert " JOIN " not in sql.upper(), sql


def test_the_join_free_filters_still_hide_what_they_hid() -> None:
    """An unrevealed hidden phase's runs reach their entrant and staff only; another team's
    checklist runs never reach a participant."""
    from django.utils import timezone

    from benchmarks_app.models.phases import Phase
    from benchmarks_app.selectors.visibility import visible_runs
    from tests.factories.common import (
        ChecklistSubmissionFactory,
        ResponseSubmissionFactory,
        StaffFactory,
    )

    owner, other = UserFactory.create(), UserFactory.create()
    entry = ResponseSubmissionFactory.create(owner=owner)
    phase = Phase.objects.create(
        benchmark="probes",
        suite=entry.suite,
        name="Final",
        slug="final",
        starts_at=timezone.now(),
        is_hidden=True,
    )
    public = RunFactory.create()
    secret = RunFactory.create(benchmark="probes", probe_submission=entry, phase=phase)
    checklist = RunFactory.create(
        benchmark="checklist", checklist_submission=ChecklistSubmissionFactory.create()
    )

    def seen(user: Any) -> set[int]:
        return set(visible_runs(user).values_list("pk", flat=True))

    assert seen(None) == {public.pk}
    assert seen(other) == {public.pk}
    assert seen(owner) == {public.pk, secret.pk}
    assert seen(StaffFactory.create()) == {public.pk, secret.pk, checklist.pk}
    phase.revealed_at = timezone.now()
    phase.save()
    assert seen(other) == {public.pk, secret.pk}
