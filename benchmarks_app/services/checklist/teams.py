"""Teams of the checklist challenge: participants create or join one team per challenge.

``checklist_team_create`` and ``checklist_membership_add`` are the staff paths (commands,
demo data); ``team_create`` and ``team_join`` are the participants' own, with the checks
and clear messages the forms and the API show.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import IntegrityError, transaction

from benchmarks_app.models import Challenge, Membership, Team
from benchmarks_app.models.checklist import new_invite_code
from benchmarks_app.selectors.checklist import team_owner_id
from benchmarks_app.services.checklist.boards import checklist_boards_refresh_for_team
from benchmarks_app.services.checklist.errors import ChecklistSubmissionError, NotAllowed, TeamError
from scoring.names import is_invisible, name_skeleton


@transaction.atomic
def checklist_team_create(*, challenge: Challenge, name: str, members: Iterable[Any] = ()) -> Team:
    """Get or create the team ``name`` and add ``members`` (staff path: no open-challenge check)."""
    team, _ = Team.objects.get_or_create(challenge=challenge, name=name)
    for user in members:
        checklist_membership_add(team=team, user=user)
    return team


@transaction.atomic
def checklist_membership_add(*, team: Team, user: Any) -> Membership:
    """Add ``user`` to ``team``; idempotent, refused when they are in another team already."""
    existing = Membership.objects.filter(user=user, challenge_id=team.challenge_id).first()
    if existing and existing.team_id != team.pk:
        raise ChecklistSubmissionError(
            f"{user} already belongs to team {existing.team} in this challenge"
        )
    if existing:
        return existing
    return Membership.objects.create(team=team, user=user, challenge_id=team.challenge_id)


def _already_in_team(*, user: Any, challenge: Challenge, field: str) -> TeamError:
    team = Membership.objects.filter(user=user, challenge=challenge).select_related("team")
    current = team.first()
    where = f"team {current.team.name}" if current else "a team"
    return TeamError(
        f"You are already in {where} of {challenge.name}; a participant belongs to one team "
        "per challenge.",
        field=field,
    )


def _join(*, team: Team, user: Any, field: str) -> Membership:
    """Add the user under the one-team-per-challenge constraint, which also settles races."""
    challenge = team.challenge
    if Membership.objects.filter(user=user, challenge=challenge).exists():
        raise _already_in_team(user=user, challenge=challenge, field=field)
    try:
        # A savepoint: a concurrent request that got there first leaves the outer
        # transaction usable, and the clear message replaces the IntegrityError.
        with transaction.atomic():
            return Membership.objects.create(team=team, user=user, challenge=challenge)
    except IntegrityError as exc:
        raise _already_in_team(user=user, challenge=challenge, field=field) from exc


@transaction.atomic
def team_create(*, user: Any, challenge: Challenge, name: str) -> Team:
    """A participant creates a team of ``challenge`` and becomes its first member."""
    name = " ".join(name.split())
    if not name:
        raise TeamError("Give the team a name.", field="name")
    if len(name) > 100:
        raise TeamError("The team name is longer than 100 characters.", field="name")
    if not challenge.is_open:
        raise TeamError(f"The challenge {challenge.name} is closed.", field="challenge")
    if Membership.objects.filter(user=user, challenge=challenge).exists():
        raise _already_in_team(user=user, challenge=challenge, field="name")
    taken = TeamError(
        f"The team name {name!r} is already taken in {challenge.name}; choose another, or ask "
        "that team for its invite code.",
        field="name",
    )
    if any(is_invisible(ch) for ch in name):
        raise TeamError("The team name contains invisible or control characters.", field="name")
    # Look-alikes are one name: "Deceivers" spelt with a Cyrillic e (U+0435) would pass for
    # the real "Deceivers".
    skeleton = name_skeleton(name)
    names = Team.objects.filter(challenge=challenge).values_list("name", flat=True)
    if any(name_skeleton(existing) == skeleton for existing in names.iterator()):
        raise taken
    try:
        with transaction.atomic():
            team = Team.objects.create(challenge=challenge, name=name, owner=user)
    except IntegrityError as exc:
        raise taken from exc
    _join(team=team, user=user, field="name")
    return team


@transaction.atomic
def team_join(*, user: Any, invite_code: str) -> Membership:
    """Join the team whose invite code this is (one team per user per challenge)."""
    code = invite_code.strip()
    team = (
        Team.objects.select_related("challenge").filter(invite_code=code).first() if code else None
    )
    if team is None:
        raise TeamError(
            "Unknown invite code: check it with a member of the team.", field="invite_code"
        )
    if not team.challenge.is_open:
        raise TeamError(f"The challenge {team.challenge.name} is closed.", field="invite_code")
    return _join(team=team, user=user, field="invite_code")


def _locked_team_of_owner(*, user: Any, team: Team) -> Team:
    locked = Team.objects.select_for_update(no_key=True).get(pk=team.pk)
    if not getattr(user, "is_authenticated", False) or team_owner_id(locked) != user.pk:
        raise NotAllowed(f"Only the owner of team {locked.name} may do that.")
    return locked


@transaction.atomic
def team_leave(*, user: Any, team: Team) -> None:
    """``user`` leaves ``team``; its entries stay the team's. An owner who leaves hands the
    team to the earliest remaining member."""
    locked = Team.objects.select_for_update(no_key=True).get(pk=team.pk)
    owner_id = team_owner_id(locked)
    deleted, _ = Membership.objects.filter(team=locked, user=user).delete()
    if not deleted:
        raise TeamError(f"You are not a member of team {locked.name}.", field="team")
    if owner_id == getattr(user, "pk", None):
        locked.owner_id = (
            Membership.objects.filter(team=locked)
            .order_by("created_at", "pk")
            .values_list("user_id", flat=True)
            .first()
        )
        locked.save(update_fields=["owner", "updated_at"])


@transaction.atomic
def team_member_remove(*, user: Any, team: Team, username: str) -> None:
    """The team's owner removes the member ``username`` (leaving is for oneself)."""
    locked = _locked_team_of_owner(user=user, team=team)
    membership = (
        Membership.objects.filter(team=locked, user__username=username)
        .select_related("user")
        .first()
    )
    if membership is None:
        raise TeamError(f"{username!r} is not a member of team {locked.name}.", field="username")
    if membership.user_id == user.pk:
        raise TeamError("To leave your own team, use Leave team.", field="username")
    membership.delete()


@transaction.atomic
def team_invite_rotate(*, user: Any, team: Team) -> str:
    """The team's owner replaces its invite code; the old one stops working at once."""
    locked = _locked_team_of_owner(user=user, team=team)
    locked.invite_code = new_invite_code()
    locked.save(update_fields=["invite_code", "updated_at"])
    team.invite_code = locked.invite_code
    return locked.invite_code


@transaction.atomic
def team_flags_set(
    *, team: Team, is_internal: bool | None = None, is_baseline: bool | None = None
) -> Team:
    """Mark a team internal (off every board) or a baseline (ranked, with a badge); the boards
    it is on are rewritten when a flag changes (staff path)."""
    locked = Team.objects.select_for_update(no_key=True).get(pk=team.pk)
    changed = []
    if is_internal is not None and locked.is_internal != is_internal:
        locked.is_internal = is_internal
        changed.append("is_internal")
    if is_baseline is not None and locked.is_baseline != is_baseline:
        locked.is_baseline = is_baseline
        changed.append("is_baseline")
    if changed:
        locked.save(update_fields=[*changed, "updated_at"])
        checklist_boards_refresh_for_team(team=locked)
    return locked
