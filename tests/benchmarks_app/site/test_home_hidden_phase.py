"""The home page's top boards respect hidden phases like the board pages do."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from benchmarks_app.models import ChecklistScore, Phase, RunStatus
from benchmarks_app.services.checklist.boards import checklist_board_refresh
from benchmarks_app.services.phases import phase_reveal
from tests.factories.common import (
    ChallengeFactory,
    ChecklistRunFactory,
    ChecklistSubmissionFactory,
    TeamFactory,
    UserFactory,
    join,
)

pytestmark = pytest.mark.django_db


def test_a_hidden_phase_stays_off_the_home_page_until_revealed(client) -> None:
    challenge = ChallengeFactory.create(slug="home-hidden")
    final = Phase.objects.create(
        benchmark="checklist",
        challenge=challenge,
        name="Final",
        slug="final",
        starts_at=timezone.now() - timedelta(days=1),
        is_hidden=True,
    )
    member = UserFactory.create()
    for name in ("Team Zeta-Hidden", "Team Eta-Hidden"):
        team = TeamFactory.create(challenge=challenge, name=name)
        if name.startswith("Team Zeta"):
            join(member, team)
        entry = ChecklistSubmissionFactory.create(team=team, challenge=challenge)
        entry.phase = final
        entry.save()
        run = ChecklistRunFactory.create(checklist_submission=entry, status=RunStatus.SUCCEEDED)
        ChecklistScore.objects.create(run=run, submission=entry, c_g=1, c_a=1, c_t=1, r=0, s=0.5)
    checklist_board_refresh(challenge=challenge, phase=final)

    home = client.get("/").content.decode()
    assert "Team Zeta-Hidden" not in home and "Team Eta-Hidden" not in home
    client.force_login(member)
    mine = client.get("/").content.decode()
    assert "Team Eta-Hidden" not in mine  # another team's score stays hidden

    phase_reveal(phase=final)
    client.logout()
    revealed = client.get("/").content.decode()
    assert "Team Zeta-Hidden" in revealed and "Team Eta-Hidden" in revealed
