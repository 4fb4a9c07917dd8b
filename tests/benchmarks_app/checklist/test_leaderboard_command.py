"""The maintainers' command prints a hidden phase's board whole; the page hides it."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from benchmarks_app.models import ChecklistScore, Phase, RunStatus
from benchmarks_app.services.checklist.boards import checklist_board_refresh
from tests.factories.common import (
    ChallengeFactory,
    ChecklistRunFactory,
    ChecklistSubmissionFactory,
    TeamFactory,
)

pytestmark = pytest.mark.django_db


def test_a_hidden_phase_prints_whole_for_maintainers(client, capsys) -> None:
    challenge = ChallengeFactory.create(slug="cmd")
    final = Phase.objects.create(
        benchmark="checklist",
        challenge=challenge,
        name="Final",
        slug="final",
        starts_at=timezone.now() - timedelta(days=1),
        is_hidden=True,
    )
    for name, s in (("alpha", 0.5), ("beta", 0.25)):
        entry = ChecklistSubmissionFactory.create(
            team=TeamFactory.create(challenge=challenge, name=name), challenge=challenge
        )
        entry.phase = final
        entry.save()
        run = ChecklistRunFactory.create(checklist_submission=entry, status=RunStatus.SUCCEEDED)
        ChecklistScore.objects.create(run=run, submission=entry, c_g=1, c_a=1, c_t=1, r=0, s=s)
    checklist_board_refresh(challenge=challenge, phase=final)

    assert "alpha" not in client.get("/checklist/?challenge=cmd&phase=final").content.decode()
    call_command(
        "checklist_leaderboard", "--challenge", "cmd", "--phase", "final", "--format", "json"
    )
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["rank"], r["team"]) for r in rows] == [(1, "alpha"), (2, "beta")]
    with pytest.raises(CommandError):
        call_command("checklist_leaderboard", "--challenge", "cmd", "--phase", "nope")
