# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore,return-value"
"""Sign-up, and teams that participants create or join themselves."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import ChecklistSubmission, Membership, Team
from benchmarks_app.services.checklist import TeamError, team_create, team_join
from tests.factories.checklist import (
    ChallengeFactory,
    ChecklistUserFactory,
    MembershipFactory,
)

pytestmark = pytest.mark.django_db
SAMPLE = Path(__file__).resolve().parents[3] / "benchmarks_app" / "sample_data" / "checklist"


def _api(user: object | None = None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def _fields(response: object) -> dict[str | None, str]:
    return {e["field"]: e["reason"] for e in response.json()["errors"]}


# --- sign-up -------------------------------------------------------------------------------


def _confirm(client: Client) -> Any:
    """Open the sign-up mail's link and confirm; the answer of the confirmation."""
    match = re.search(r"http://testserver(/accounts/signup/confirm/\S+)", mail.outbox[-1].body)
    assert match, mail.outbox[-1].body
    page = client.get(match.group(1))
    return client.post(match.group(1), {"next": page.context["next"]})


def test_signup_creates_and_logs_in_the_user_once_confirmed() -> None:
    client = Client()
    response = client.post(
        reverse("signup"),
        {
            "username": "newcomer",
            "email": "newcomer@example.org",
            "password1": "plover-Quartz-917",
            "password2": "plover-Quartz-917",
        },
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("signup_sent")
    response = _confirm(client)
    assert response["Location"] == reverse("checklist:team")
    user = get_user_model().objects.get(username="newcomer")
    assert user.check_password("plover-Quartz-917")
    assert client.session["_auth_user_id"] == str(user.pk)
    # Logged in: the login-required team page answers instead of redirecting.
    assert client.get(reverse("checklist:team")).status_code == 200


def test_signup_follows_a_local_next_only() -> None:
    data = {
        "username": "a1",
        "email": "a1@example.org",
        "password1": "plover-Quartz-917",
        "password2": "plover-Quartz-917",
    }
    client = Client()
    client.post(reverse("signup") + "?next=/checklist/submit/", data)
    assert _confirm(client)["Location"] == "/checklist/submit/"
    data["username"] = "a2"
    data["email"] = "a2@example.org"
    client = Client()
    client.post(reverse("signup"), {**data, "next": "https://evil.example/"})
    assert _confirm(client)["Location"] == reverse("checklist:team")


def test_signup_refuses_a_weak_password_naming_the_field() -> None:
    response = Client().post(
        reverse("signup"), {"username": "weak", "password1": "12345", "password2": "12345"}
    )
    assert response.status_code == 400
    assert not get_user_model().objects.filter(username="weak").exists()
    errors = response.context["form"].errors
    assert "password2" in errors
    assert any("too short" in e for e in errors["password2"])
    assert b"too short" in response.content


def test_login_page_and_topbar_link_to_signup() -> None:
    page = Client().get(reverse("login"))
    assert page.content.count(reverse("signup").encode()) >= 2


# --- services ------------------------------------------------------------------------------


def test_create_team_makes_the_creator_a_member_with_an_invite_code() -> None:
    challenge = ChallengeFactory()
    user = ChecklistUserFactory()
    team = team_create(user=user, challenge=challenge, name="  Blue   Team ")
    assert team.name == "Blue Team"
    assert len(team.invite_code) >= 12
    assert list(team.members.all()) == [user]
    other = team_create(user=ChecklistUserFactory(), challenge=challenge, name="Red")
    assert other.invite_code != team.invite_code


def test_second_team_in_the_same_challenge_is_refused() -> None:
    challenge = ChallengeFactory()
    user = ChecklistUserFactory()
    team_create(user=user, challenge=challenge, name="First")
    with pytest.raises(TeamError, match="already in team First") as exc:
        team_create(user=user, challenge=challenge, name="Second")
    assert exc.value.field == "name"
    assert not Team.objects.filter(name="Second").exists()
    # Another challenge is another team.
    team_create(user=user, challenge=ChallengeFactory(), name="Second")


def test_team_name_taken_is_refused() -> None:
    challenge = ChallengeFactory()
    team_create(user=ChecklistUserFactory(), challenge=challenge, name="Owls")
    with pytest.raises(TeamError, match="already taken") as exc:
        team_create(user=ChecklistUserFactory(), challenge=challenge, name="owls")
    assert exc.value.field == "name"


def test_join_by_code_and_unknown_code_and_closed_challenge() -> None:
    challenge = ChallengeFactory()
    team = team_create(user=ChecklistUserFactory(), challenge=challenge, name="Owls")
    joiner = ChecklistUserFactory()
    membership = team_join(user=joiner, invite_code=f" {team.invite_code} ")
    assert membership.team == team and membership.challenge == challenge
    with pytest.raises(TeamError, match="already in team Owls") as exc:
        team_join(user=joiner, invite_code=team.invite_code)
    assert exc.value.field == "invite_code"
    with pytest.raises(TeamError, match="Unknown invite code") as exc:
        team_join(user=ChecklistUserFactory(), invite_code="not-a-code")
    assert exc.value.field == "invite_code"
    challenge.is_open = False
    challenge.save()
    with pytest.raises(TeamError, match="closed"):
        team_join(user=ChecklistUserFactory(), invite_code=team.invite_code)
    with pytest.raises(TeamError, match="closed"):
        team_create(user=ChecklistUserFactory(), challenge=challenge, name="Late")
    assert team.members.count() == 2


def test_race_on_membership_turns_into_the_clear_error(monkeypatch) -> None:
    """The pre-check passes in both requests; the constraint decides, with a clear message."""
    challenge = ChallengeFactory()
    team_a = team_create(user=ChecklistUserFactory(), challenge=challenge, name="A")
    team_b = team_create(user=ChecklistUserFactory(), challenge=challenge, name="B")
    user = ChecklistUserFactory()
    team_join(user=user, invite_code=team_a.invite_code)
    # Simulate the concurrent request: its existence check ran before the first commit.
    real_filter = Membership.objects.filter
    calls = {"n": 0}

    def blind_filter(*args: object, **kwargs: object):
        calls["n"] += 1
        qs = real_filter(*args, **kwargs)
        return qs.none() if calls["n"] == 1 else qs

    monkeypatch.setattr(Membership.objects, "filter", blind_filter)
    with pytest.raises(TeamError, match="already in team A") as exc:
        team_join(user=user, invite_code=team_b.invite_code)
    assert isinstance(exc.value.__cause__, IntegrityError)
    monkeypatch.undo()
    assert list(Membership.objects.filter(user=user).values_list("team__name", flat=True)) == ["A"]


# --- pages ---------------------------------------------------------------------------------


def test_team_page_create_then_shows_members_and_code() -> None:
    challenge = ChallengeFactory()
    user = ChecklistUserFactory()
    client = Client()
    client.force_login(user)
    page = client.get(reverse("checklist:team"))
    assert b'id="team-create-form"' in page.content and b'id="team-join-form"' in page.content
    response = client.post(
        reverse("checklist:team"), {"action": "create", "create-name": "Kestrels"}
    )
    assert response.status_code == 302
    team = Team.objects.get(challenge=challenge, name="Kestrels")
    page = client.get(response["Location"])
    assert team.invite_code.encode() in page.content
    assert user.username.encode() in page.content
    assert b'id="team-create-form"' not in page.content


def test_team_page_join_and_errors_name_the_field() -> None:
    challenge = ChallengeFactory()
    team = team_create(user=ChecklistUserFactory(), challenge=challenge, name="Kestrels")
    client = Client()
    client.force_login(ChecklistUserFactory())
    bad = client.post(reverse("checklist:team"), {"action": "join", "join-invite_code": "nope"})
    assert bad.status_code == 400
    assert "invite_code" in bad.context["join_form"].errors
    assert b"Unknown invite code" in bad.content
    taken = client.post(reverse("checklist:team"), {"action": "create", "create-name": "Kestrels"})
    assert taken.status_code == 400
    assert "already taken" in taken.context["create_form"].errors["name"][0]
    ok = client.post(
        reverse("checklist:team"), {"action": "join", "join-invite_code": team.invite_code}
    )
    assert ok.status_code == 302
    assert team.members.count() == 2


def test_submit_and_mine_pages_link_to_the_team_page_without_a_team() -> None:
    ChallengeFactory()
    client = Client()
    client.force_login(ChecklistUserFactory())
    link = reverse("checklist:team").encode()
    assert link in client.get(reverse("checklist:submit")).content
    mine = client.get(reverse("checklist:mine")).content
    assert b"Create a team or join one" in mine and link in mine


def test_anonymous_is_sent_to_login_or_refused() -> None:
    ChallengeFactory()
    page = Client().get(reverse("checklist:team"))
    assert page.status_code == 302 and page["Location"].startswith(reverse("login"))
    api = _api()
    for name, method in (
        ("api:checklist-team-create", api.post),
        ("api:checklist-team-join", api.post),
        ("api:checklist-team-mine", api.get),
    ):
        assert method(reverse(name), {}, format="json").status_code in (401, 403)
    assert not Team.objects.exists()


# --- API -----------------------------------------------------------------------------------


def test_api_create_join_and_mine() -> None:
    challenge = ChallengeFactory()
    owner, joiner = ChecklistUserFactory(), ChecklistUserFactory()
    created = _api(owner).post(reverse("api:checklist-team-create"), {"name": "Herons"})
    assert created.status_code == 201
    body = created.json()
    team = Team.objects.get(challenge=challenge, name="Herons")
    assert body["invite_code"] == team.invite_code
    assert [m["username"] for m in body["members"]] == [owner.username]

    again = _api(owner).post(reverse("api:checklist-team-create"), {"name": "Egrets"})
    assert again.status_code == 400
    assert "already in team Herons" in _fields(again)["name"]

    unknown = _api(joiner).post(reverse("api:checklist-team-join"), {"invite_code": "zzz"})
    assert unknown.status_code == 400
    assert "Unknown invite code" in _fields(unknown)["invite_code"]

    joined = _api(joiner).post(
        reverse("api:checklist-team-join"), {"invite_code": team.invite_code}
    )
    assert joined.status_code == 201
    mine = _api(joiner).get(reverse("api:checklist-team-mine"))
    assert mine.status_code == 200
    assert mine.json()["name"] == "Herons"
    assert [m["username"] for m in mine.json()["members"]] == [owner.username, joiner.username]


def test_invite_code_is_hidden_from_non_members() -> None:
    challenge = ChallengeFactory()
    team = team_create(user=ChecklistUserFactory(), challenge=challenge, name="Secretive")
    outsider = MembershipFactory(team__challenge=challenge).user
    code = team.invite_code.encode()
    client = Client()
    client.force_login(outsider)
    for url in (
        reverse("checklist:team"),
        reverse("checklist:leaderboard"),
        reverse("checklist:mine"),
        reverse("checklist:submit"),
    ):
        assert code not in client.get(url).content, url
    api = _api(outsider)
    for name in (
        "api:checklist-team-mine",
        "api:checklist-leaderboard",
        "api:checklist-submission-list",
        "api:checklist-quota",
    ):
        response = api.get(reverse(name))
        assert response.status_code < 500
        assert code not in response.content, name
    assert _api(outsider).get(reverse("api:checklist-team-mine")).json()["name"] != "Secretive"
    assert code not in _api().get(reverse("api:checklist-leaderboard")).content


def test_new_member_can_submit_and_the_quota_is_the_teams() -> None:
    challenge = ChallengeFactory(daily_limit=1, total_limit=5)
    owner, joiner = ChecklistUserFactory(), ChecklistUserFactory()
    team = team_create(user=owner, challenge=challenge, name="Quota")
    team_join(user=joiner, invite_code=team.invite_code)

    def submit(user: object) -> object:
        data = (SAMPLE / "demo" / "genuine.tex").read_bytes()
        return _api(user).post(
            reverse("api:checklist-submission-list"),
            {"genuine": SimpleUploadedFile("genuine.tex", data)},
            format="multipart",
        )

    first = submit(joiner)
    assert first.status_code == 201, first.content
    assert first.json()["quota"]["remaining_today"] == 0
    second = submit(owner)
    assert second.status_code == 429
    assert ChecklistSubmission.objects.filter(team=team).count() == 1
    assert ChecklistSubmission.objects.get(team=team).submitted_by == joiner
