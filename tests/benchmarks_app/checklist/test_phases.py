# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore,no-untyped-def"
"""Checklist phases: where a submission lands, per-phase quotas, hidden boards and reveal."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.sites import site
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from benchmarks_app.admin.phases import PhaseForm
from benchmarks_app.models import Benchmark, EvaluationRun, Phase
from benchmarks_app.selectors.checklist import checklist_leaderboard, checklist_quota
from benchmarks_app.services.checklist import (
    ChecklistSubmissionError,
    PhaseNotOpen,
    QuotaExceeded,
    checklist_submission_create,
)
from benchmarks_app.services.phases import phase_reveal
from tests.benchmarks_app.checklist.conftest import SAMPLE
from tests.factories.checklist import ChallengeFactory, MembershipFactory, TeamFactory
from tests.factories.common import StaffFactory
from tests.factories.phases import ChecklistPhaseFactory

pytestmark = pytest.mark.django_db


def _genuine():
    from django.core.files.uploadedfile import SimpleUploadedFile

    path = SAMPLE / "demo" / "genuine.tex"
    return SimpleUploadedFile(path.name, path.read_bytes(), content_type="text/x-tex")


def test_submission_lands_in_the_open_phase_and_its_run_too(genuine_tex) -> None:
    m = MembershipFactory()
    dev = ChecklistPhaseFactory(challenge=m.team.challenge, name="Development", slug="dev")
    sub = checklist_submission_create(
        team=m.team, user=m.user, files={"G": genuine_tex}, assess=True, method_name="Mine"
    )
    assert sub.phase_id == dev.pk
    run = EvaluationRun.objects.get(checklist_submission=sub)
    assert (run.phase_id, run.method_name) == (dev.pk, "Mine")


def test_outside_every_phase_is_refused_with_the_dates(genuine_tex) -> None:
    m = MembershipFactory()
    start = timezone.now() + timedelta(days=2)
    ChecklistPhaseFactory(
        challenge=m.team.challenge,
        name="Final",
        starts_at=start,
        ends_at=start + timedelta(days=5),
    )
    with pytest.raises(PhaseNotOpen) as caught:
        checklist_submission_create(team=m.team, user=m.user, files={"G": genuine_tex})
    assert "the next, Final, opens" in caught.value.message
    assert f"{start:%Y-%m-%d}" in caught.value.message

    api = APIClient()
    api.force_authenticate(m.user)
    refused = api.post(
        reverse("api:checklist-submission-list"), {"genuine": _genuine()}, format="multipart"
    )
    assert refused.status_code == 403 and "Final" in refused.content.decode()

    client = Client()
    client.force_login(m.user)
    page = client.post(
        f"{reverse('checklist:submit')}?challenge={m.team.challenge.slug}",
        {"genuine": _genuine()},
    )
    assert page.status_code == 400 and "the next, Final, opens" in page.content.decode()


def test_phase_quota_overrides_the_challenge_and_counts_within_the_phase(genuine_tex) -> None:
    m = MembershipFactory(team__challenge__daily_limit=5, team__challenge__total_limit=10)
    challenge = m.team.challenge
    old = ChecklistPhaseFactory(
        challenge=challenge,
        starts_at=timezone.now() - timedelta(days=3),
        ends_at=timezone.now() - timedelta(minutes=5),
    )
    # An entry of an earlier phase does not count in the next one.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("benchmarks_app.services.checklist.submissions.phase_open_for", lambda _c: old)
        checklist_submission_create(team=m.team, user=m.user, files={"G": genuine_tex})
    final = ChecklistPhaseFactory(challenge=challenge, name="Final", total_limit=1)
    quota = checklist_quota(team=m.team)
    assert (quota.phase, quota.total_limit, quota.daily_limit, quota.used_total) == (
        "Final",
        1,
        5,
        0,
    )
    checklist_submission_create(team=m.team, user=m.user, files={"G": genuine_tex})
    with pytest.raises(QuotaExceeded) as caught:
        checklist_submission_create(team=m.team, user=m.user, files={"G": genuine_tex})
    assert "all 1 submissions of the Final phase" in caught.value.message
    assert final.checklist_submissions.count() == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"method_name": "x" * 101}, "method_name"),
        ({"method_description": "y" * 501}, "method_description"),
        ({"method_url": "javascript:alert(1)"}, "method_url"),
        ({"method_url": "not a url"}, "method_url"),
    ],
)
def test_bad_metadata_is_refused_naming_the_field(genuine_tex, fields, field) -> None:
    m = MembershipFactory()
    with pytest.raises(ChecklistSubmissionError) as caught:
        checklist_submission_create(team=m.team, user=m.user, files={"G": genuine_tex}, **fields)
    assert caught.value.field == field
    assert not m.team.submissions.exists()


def test_api_refuses_a_bad_link_and_stores_good_metadata() -> None:
    m = MembershipFactory()
    api = APIClient()
    api.force_authenticate(m.user)
    url = reverse("api:checklist-submission-list")
    bad = api.post(url, {"genuine": _genuine(), "method_url": "nope"}, format="multipart")
    assert bad.status_code == 400 and "method_url" in str(bad.json())
    ok = api.post(
        url,
        {
            "genuine": _genuine(),
            "method_name": "Careful reader",
            "method_description": "Reads twice.",
            "method_url": "https://example.org/m",
        },
        format="multipart",
    )
    assert ok.status_code == 201, ok.content
    body = ok.json()
    assert (body["method_name"], body["method_description"], body["method_url"]) == (
        "Careful reader",
        "Reads twice.",
        "https://example.org/m",
    )


def _submit_and_assess(client: Client, challenge_slug: str) -> None:
    response = client.post(
        f"{reverse('checklist:submit')}?challenge={challenge_slug}",
        {"genuine": _genuine(), "method_name": "Our method"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    client.post(response["Location"] + "assess/")


def test_done_when_development_public_final_hidden_then_revealed(
    django_capture_on_commit_callbacks,
) -> None:
    challenge = ChallengeFactory(slug="phased")
    me = MembershipFactory(team__challenge=challenge, team__name="mine")
    other = MembershipFactory(team__challenge=challenge, team__name="rival")
    client, rival = Client(), Client()
    client.force_login(me.user)
    rival.force_login(other.user)
    anon = Client()
    now = timezone.now()
    dev = ChecklistPhaseFactory(
        challenge=challenge, name="Development", slug="dev", starts_at=now - timedelta(days=2)
    )
    with django_capture_on_commit_callbacks(execute=True):
        _submit_and_assess(client, "phased")
        _submit_and_assess(rival, "phased")
    dev_board = client.get("/checklist/?challenge=phased&phase=dev").content.decode()
    assert "mine" in dev_board and "rival" in dev_board and "Our method" in dev_board

    # The final phase opens (hidden); development ends.
    Phase.objects.filter(pk=dev.pk).update(ends_at=now - timedelta(minutes=1))
    final = ChecklistPhaseFactory(
        challenge=challenge,
        name="Final",
        slug="final",
        starts_at=now - timedelta(minutes=1),
        is_hidden=True,
    )
    with django_capture_on_commit_callbacks(execute=True):
        _submit_and_assess(client, "phased")
        _submit_and_assess(rival, "phased")
    assert final.checklist_board_rows.count() == 2  # written, only not shown

    mine = client.get("/checklist/?challenge=phased").content.decode()
    assert "hidden until the organizers reveal it" in mine
    assert "mine" in mine and "rival" not in mine
    assert "its rank is shown when the board is revealed" in mine
    public = anon.get("/checklist/?challenge=phased").content.decode()
    assert "hidden until the organizers reveal it" in public and "rival" not in public
    api = APIClient()
    assert api.get("/api/checklist/leaderboard/", {"challenge": "phased"}).json()["count"] == 0
    api.force_authenticate(me.user)
    own = api.get("/api/checklist/leaderboard/", {"challenge": "phased"}).json()
    assert [(r["team"], r["rank"], r["phase"]) for r in own["results"]] == [("mine", None, "final")]
    api.force_authenticate(StaffFactory())
    assert api.get("/api/checklist/leaderboard/", {"challenge": "phased"}).json()["count"] == 2

    phase_reveal(phase=final)
    revealed = anon.get("/checklist/?challenge=phased").content.decode()
    assert "hidden until" not in revealed and "mine" in revealed and "rival" in revealed
    rows = checklist_leaderboard(challenge_slug="phased")
    assert [r["rank"] for r in rows] == [1, 2] and {r["phase"] for r in rows} == {"final"}


def test_admin_phase_form_derives_the_benchmark_and_reveal_action() -> None:
    challenge = ChallengeFactory()
    now = timezone.now()
    form = PhaseForm(
        data={
            "challenge": challenge.pk,
            "name": "Final",
            "slug": "final",
            "starts_at": now.strftime("%Y-%m-%d %H:%M:%S"),
            "ends_at": (now - timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S"),
        }
    )
    assert not form.is_valid() and "ends_at" in form.errors
    form = PhaseForm(
        data={
            "challenge": challenge.pk,
            "name": "Final",
            "slug": "final",
            "starts_at": now.strftime("%Y-%m-%d %H:%M:%S"),
            "is_hidden": "on",
        }
    )
    assert form.is_valid(), form.errors
    phase = form.save()
    assert phase.benchmark == Benchmark.CHECKLIST and not phase.is_revealed
    assert not PhaseForm(data={"name": "x", "slug": "x", "starts_at": "2026-01-01"}).is_valid()

    client = Client()
    client.force_login(StaffFactory(is_superuser=True))
    changelist = reverse("admin:benchmarks_app_phase_changelist")
    assert Phase in site._registry
    response = client.post(
        changelist, {"action": "reveal_board", "_selected_action": [phase.pk]}, follow=True
    )
    assert response.status_code == 200
    phase.refresh_from_db()
    assert phase.revealed_at is not None and phase.is_revealed
    client.post(changelist, {"action": "hide_board", "_selected_action": [phase.pk]})
    phase.refresh_from_db()
    assert phase.revealed_at is None


def test_phase_list_endpoint_marks_the_default_and_hidden_boards() -> None:
    challenge = ChallengeFactory(slug="listed")
    now = timezone.now()
    ChecklistPhaseFactory(
        challenge=challenge, slug="dev", starts_at=now - timedelta(days=3), ends_at=now
    )
    ChecklistPhaseFactory(
        challenge=challenge, slug="final", starts_at=now - timedelta(hours=1), is_hidden=True
    )
    TeamFactory(challenge=challenge)
    body = APIClient().get(reverse("api:checklist-phases"), {"challenge": "listed"}).json()
    got = [(p["slug"], p["is_open"], p["is_default"], p["board_public"]) for p in body["results"]]
    assert got == [("dev", False, False, True), ("final", True, True, False)]
