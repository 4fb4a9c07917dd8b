# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""Team names that look like a taken one are refused (issue 11 item 8)."""

from __future__ import annotations

import pytest

from benchmarks_app.models import Team
from benchmarks_app.services.checklist import TeamError, team_create
from tests.factories.checklist import ChallengeFactory, ChecklistUserFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("look_alike", ["Deceivers\u200b", "D\u0435ceivers", "DECEIVERS"])
def test_look_alike_team_name_is_refused(look_alike: str) -> None:
    challenge = ChallengeFactory()
    team_create(user=ChecklistUserFactory(), challenge=challenge, name="Deceivers")
    with pytest.raises(TeamError) as caught:
        team_create(user=ChecklistUserFactory(), challenge=challenge, name=look_alike)
    assert caught.value.field == "name"
    assert list(Team.objects.filter(challenge=challenge).values_list("name", flat=True)) == [
        "Deceivers"
    ]


def test_look_alikes_in_another_challenge_and_distinct_names_pass() -> None:
    first, second = ChallengeFactory(), ChallengeFactory()
    team_create(user=ChecklistUserFactory(), challenge=first, name="Deceivers")
    assert team_create(user=ChecklistUserFactory(), challenge=second, name="D\u0435ceivers")
    assert team_create(user=ChecklistUserFactory(), challenge=first, name="Deceivers 2")
