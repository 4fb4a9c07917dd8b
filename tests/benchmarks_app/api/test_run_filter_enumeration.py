"""Run filters by submission id reveal nothing about other teams (issue 11 item 9)."""

from __future__ import annotations

import pytest

from tests.factories.common import (
    ChecklistRunFactory,
    ChecklistSubmissionFactory,
    TeamFactory,
    UserFactory,
    join,
)

pytestmark = pytest.mark.django_db


def test_missing_and_foreign_checklist_submissions_answer_alike(api):
    member, outsider = UserFactory.create(), UserFactory.create()
    team = TeamFactory.create()
    join(member, team)
    theirs = ChecklistRunFactory.create(
        checklist_submission=ChecklistSubmissionFactory.create(team=team)
    )
    assert theirs.checklist_submission_id is not None
    missing = theirs.checklist_submission_id + 1000

    api.force_authenticate(outsider)
    real = api.get(f"/api/runs/?checklist_submission={theirs.checklist_submission_id}")
    fake = api.get(f"/api/runs/?checklist_submission={missing}")
    assert (real.status_code, fake.status_code) == (200, 200)
    assert real.json() == fake.json()
    assert real.json()["results"] == []

    # The team itself still filters its own runs by submission.
    api.force_authenticate(member)
    own = api.get(f"/api/runs/?checklist_submission={theirs.checklist_submission_id}").json()
    assert [row["id"] for row in own["results"]] == [theirs.pk]


def test_missing_probe_submission_id_is_not_an_error(api):
    assert api.get("/api/runs/?probe_submission=987654").status_code == 200
    assert api.get("/api/runs/?checklist_submission=abc").status_code == 400
