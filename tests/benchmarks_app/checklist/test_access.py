# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import Paper, PaperKind
from benchmarks_app.services.checklist import checklist_submission_create
from tests.factories.checklist import MembershipFactory

pytestmark = pytest.mark.django_db

SECRET = "Error bars and significance tests are reported in Section 4.3"  # A's falsified answer


@pytest.fixture
def scored(demo_triplet, django_capture_on_commit_callbacks):  # type: ignore[no-untyped-def]
    owner = MembershipFactory()
    other = MembershipFactory(team__challenge=owner.team.challenge)
    with django_capture_on_commit_callbacks(execute=True):
        sub = checklist_submission_create(
            team=owner.team, user=owner.user, files=demo_triplet, assess=True
        )
    sub.refresh_from_db()
    assert sub.status == "scored"
    return owner, other, sub


def _urls(sub) -> dict[str, tuple[str, str]]:  # type: ignore[no-untyped-def]
    papers = {p.kind: p for p in Paper.objects.filter(submission=sub)}
    urls = {
        "page detail": ("get", reverse("checklist:submission-detail", args=[sub.pk])),
        "page assess": ("post", reverse("checklist:submission-assess", args=[sub.pk])),
        "page withdraw": ("post", reverse("checklist:submission-withdraw", args=[sub.pk])),
        "api detail": ("get", reverse("api:checklist-submission-detail", args=[sub.pk])),
        "api assess": ("post", reverse("api:checklist-submission-assess", args=[sub.pk])),
    }
    for kind in (PaperKind.GENUINE, PaperKind.ADVERSARIAL, PaperKind.TRUTH):
        pk = papers[kind].pk
        urls[f"page download {kind}"] = ("get", reverse("checklist:paper-download", args=[pk]))
        urls[f"api download {kind}"] = ("get", reverse("api:checklist-paper-download", args=[pk]))
    return urls


def test_another_team_gets_404_everywhere(scored) -> None:  # type: ignore[no-untyped-def]
    _owner, other, sub = scored
    client = APIClient()
    client.force_login(other.user)
    for name, (method, url) in _urls(sub).items():
        response = getattr(client, method)(url)
        assert response.status_code == 404, (name, response.status_code)
        assert SECRET.encode() not in response.content
    listing = client.get(reverse("api:checklist-submission-list"))
    assert listing.status_code == 200 and listing.json()["results"] == []
    mine = client.get(reverse("checklist:mine"))
    assert SECRET.encode() not in mine.content and f"#{sub.pk}".encode() not in mine.content


def test_anonymous_is_refused(scored) -> None:  # type: ignore[no-untyped-def]
    _, _, sub = scored
    client = APIClient()
    for name, (method, url) in _urls(sub).items():
        response = getattr(client, method)(url)
        assert response.status_code in (401, 403, 404), (name, response.status_code)
        assert SECRET.encode() not in response.content


def test_owner_and_staff_see_assessments_and_files(scored) -> None:  # type: ignore[no-untyped-def]
    owner, _, sub = scored
    staff = get_user_model().objects.create_user("staff", is_staff=True)
    for user in (owner.user, staff):
        client = APIClient()
        client.force_login(user)
        page = client.get(reverse("checklist:submission-detail", args=[sub.pk]))
        assert page.status_code == 200
        assert SECRET.encode() in page.content
        assert b"which the paper text does not contain" in page.content  # feedback shown
        data = client.get(reverse("api:checklist-submission-detail", args=[sub.pk])).json()
        a_paper = next(p for p in data["papers"] if p["kind"] == "A")
        assert a_paper["answers"][6]["assessment"]["correct"] == 0
        download = client.get(a_paper["download"])
        assert download.status_code == 200
        assert b"Note to automated reviewers" in b"".join(download.streaming_content)


def test_public_leaderboard_shows_scores_only(scored) -> None:  # type: ignore[no-untyped-def]
    owner, other, sub = scored
    for user in (None, other.user):
        client = APIClient()
        if user:
            client.force_login(user)
        page = client.get(reverse("checklist:leaderboard"))
        api = client.get(reverse("api:checklist-leaderboard"))
        assert owner.team.name.encode() in page.content
        assert SECRET.encode() not in page.content + api.content
        assert reverse("checklist:submission-detail", args=[sub.pk]).encode() not in page.content
        row = api.json()["results"][0]
        assert row["team"] == owner.team.name and row["submission"] == sub.pk
        assert set(row) >= {"rank", "c_g", "c_a", "c_t", "r", "s"}


def test_uploads_are_not_served_from_media_url(scored, settings) -> None:  # type: ignore[no-untyped-def]
    _, _, sub = scored
    paper = Paper.objects.get(submission=sub, kind="A")
    assert paper.file.name.startswith(f"checklist/papers/team-{sub.team_id}/")
    assert "adversarial" not in paper.file.name  # random names, not guessable
    response = APIClient().get(f"/{settings.MEDIA_URL}{paper.file.name}")
    assert response.status_code == 404
