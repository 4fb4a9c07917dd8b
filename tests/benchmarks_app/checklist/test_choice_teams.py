# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore,no-untyped-def"
"""Chosen board entries, withdrawal through the API, and team management by its owner."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import ChecklistSubmission, Membership, Team
from benchmarks_app.selectors.checklist import checklist_leaderboard
from benchmarks_app.services.checklist import (
    NotAllowed,
    TeamError,
    checklist_board_refresh,
    checklist_submission_choose,
    checklist_submission_unchoose,
    team_create,
    team_invite_rotate,
    team_join,
    team_leave,
    team_member_remove,
)
from tests.benchmarks_app.checklist.test_board_rows import scored
from tests.factories.checklist import (
    ChallengeFactory,
    ChecklistSubmissionFactory,
    ChecklistUserFactory,
    MembershipFactory,
    TeamFactory,
)
from tests.factories.phases import ChecklistPhaseFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def board():
    challenge = ChallengeFactory(slug="chosen")
    me = MembershipFactory(team__challenge=challenge, team__name="mine")
    best, _ = scored(me.team, 0.8)
    weaker, _ = scored(me.team, 0.3)
    scored(TeamFactory(challenge=challenge, name="rival"), 0.5)
    checklist_board_refresh(challenge=challenge, phase=None)
    return me, best, weaker


def _mine(rows):
    return next(r for r in rows if r["team"] == "mine")


def test_choosing_an_entry_replaces_the_best_until_unchosen(board) -> None:
    me, best, weaker = board
    assert _mine(checklist_leaderboard(challenge_slug="chosen"))["submission"] == best.pk
    checklist_submission_choose(user=me.user, submission=weaker)
    rows = checklist_leaderboard(challenge_slug="chosen")
    assert [(r["team"], r["s"]) for r in rows] == [("rival", 0.5), ("mine", 0.3)]
    # One choice per team and phase: choosing the other one moves it.
    checklist_submission_choose(user=me.user, submission=best)
    assert ChecklistSubmission.objects.filter(team=me.team, board_choice=True).get() == best
    checklist_submission_unchoose(user=me.user, submission=best)
    assert not ChecklistSubmission.objects.filter(board_choice=True).exists()
    assert _mine(checklist_leaderboard(challenge_slug="chosen"))["submission"] == best.pk


def test_only_members_choose_and_only_scored_entries(board) -> None:
    me, best, _ = board
    stranger = MembershipFactory(team__challenge=me.team.challenge)
    with pytest.raises(NotAllowed):
        checklist_submission_choose(user=stranger.user, submission=best)
    unscored = ChecklistSubmissionFactory(team=me.team, status="extracted")
    with pytest.raises(NotAllowed, match="no score yet"):
        checklist_submission_choose(user=me.user, submission=unscored)
    assert not ChecklistSubmission.objects.filter(board_choice=True).exists()


def test_choices_are_per_phase() -> None:
    challenge = ChallengeFactory(slug="choice-phases")
    me = MembershipFactory(team__challenge=challenge)
    dev = ChecklistPhaseFactory(challenge=challenge, slug="dev")
    final = ChecklistPhaseFactory(challenge=challenge, slug="final")
    in_dev, _ = scored(me.team, 0.2, phase=dev)
    in_final, _ = scored(me.team, 0.1, phase=final)
    checklist_submission_choose(user=me.user, submission=in_dev)
    checklist_submission_choose(user=me.user, submission=in_final)
    assert set(ChecklistSubmission.objects.filter(board_choice=True)) == {in_dev, in_final}


def test_api_choice_withdraw_and_other_teams_entries(board) -> None:
    me, best, weaker = board
    api = APIClient()
    url = reverse("api:checklist-submission-choice", args=[weaker.pk])
    assert api.post(url).status_code in (401, 403)
    api.force_authenticate(me.user)
    chosen = api.post(url)
    assert chosen.status_code == 200 and chosen.json()["board_choice"] is True
    assert _mine(checklist_leaderboard(challenge_slug="chosen"))["submission"] == weaker.pk
    assert api.delete(url).json()["board_choice"] is False
    refused = api.delete(url)
    assert refused.status_code == 403 and "not the team's chosen entry" in refused.content.decode()

    rival_sub = ChecklistSubmission.objects.get(team__name="rival")
    assert (
        api.post(reverse("api:checklist-submission-choice", args=[rival_sub.pk])).status_code == 404
    )
    withdraw = reverse("api:checklist-submission-withdraw", args=[rival_sub.pk])
    assert api.post(withdraw).status_code == 404

    scored_withdraw = api.post(reverse("api:checklist-submission-withdraw", args=[best.pk]))
    assert scored_withdraw.status_code == 403
    assert "has not been assessed" in scored_withdraw.content.decode()
    pending = ChecklistSubmissionFactory(team=me.team, status="extracted")
    done = api.post(reverse("api:checklist-submission-withdraw", args=[pending.pk]))
    assert done.status_code == 200 and done.json()["status"] == "withdrawn"


def test_choose_button_on_the_submission_page(board, client) -> None:
    me, _, weaker = board
    client.force_login(me.user)
    page = client.get(reverse("checklist:submission-detail", args=[weaker.pk])).content.decode()
    assert 'id="choose-entry"' in page
    client.post(reverse("checklist:submission-choose", args=[weaker.pk]))
    page = client.get(reverse("checklist:submission-detail", args=[weaker.pk])).content.decode()
    assert 'id="unchoose-entry"' in page
    weaker.refresh_from_db()
    assert weaker.board_choice


def test_owner_is_the_creator_and_manages_the_team() -> None:
    challenge = ChallengeFactory()
    owner, second, third = (ChecklistUserFactory() for _ in range(3))
    team = team_create(user=owner, challenge=challenge, name="crew")
    assert team.owner == owner
    team_join(user=second, invite_code=team.invite_code)
    old_code = team.invite_code
    with pytest.raises(NotAllowed):
        team_invite_rotate(user=second, team=team)
    new_code = team_invite_rotate(user=owner, team=team)
    assert new_code != old_code
    with pytest.raises(TeamError, match="Unknown invite code"):
        team_join(user=third, invite_code=old_code)
    team_join(user=third, invite_code=new_code)

    with pytest.raises(NotAllowed):
        team_member_remove(user=second, team=team, username=third.username)
    team_member_remove(user=owner, team=team, username=third.username)
    assert not Membership.objects.filter(team=team, user=third).exists()
    with pytest.raises(TeamError, match="not a member"):
        team_member_remove(user=owner, team=team, username=third.username)

    team_leave(user=owner, team=team)
    team.refresh_from_db()
    assert team.owner == second  # the earliest remaining member
    with pytest.raises(TeamError):
        team_leave(user=owner, team=team)


def test_teams_made_before_owners_are_owned_by_their_earliest_member() -> None:
    first = MembershipFactory()
    later = MembershipFactory(team=first.team)
    assert first.team.owner is None
    team_member_remove(user=first.user, team=first.team, username=later.user.username)
    with pytest.raises(NotAllowed):
        team_invite_rotate(user=later.user, team=first.team)


def test_team_api_and_page_buttons() -> None:
    challenge = ChallengeFactory(slug="crewed")
    owner, member = ChecklistUserFactory(), ChecklistUserFactory()
    team = team_create(user=owner, challenge=challenge, name="crew")
    team_join(user=member, invite_code=team.invite_code)
    api = APIClient()
    api.force_authenticate(member)
    rotate = reverse("api:checklist-team-invite-rotate") + "?challenge=crewed"
    assert api.post(rotate).status_code == 403
    api.force_authenticate(owner)
    body = api.post(rotate).json()
    assert body["owner"] == owner.username and body["invite_code"] != team.invite_code

    client = Client()
    client.force_login(owner)
    page = client.get(reverse("checklist:team") + "?challenge=crewed").content.decode()
    assert 'id="invite-rotate-form"' in page and "remove-member" in page
    client.force_login(member)
    page = client.get(reverse("checklist:team") + "?challenge=crewed").content.decode()
    assert 'id="invite-rotate-form"' not in page and "remove-member" not in page

    api.force_authenticate(owner)
    removed = api.delete(
        reverse("api:checklist-team-member", args=[member.username]) + "?challenge=crewed"
    )
    assert removed.status_code == 200 and [m["username"] for m in removed.json()["members"]] == [
        owner.username
    ]
    left = api.post(reverse("api:checklist-team-leave") + "?challenge=crewed")
    assert left.status_code == 204
    assert not Membership.objects.filter(team=team).exists()
    assert Team.objects.filter(pk=team.pk).exists()  # its entries stay the team's
