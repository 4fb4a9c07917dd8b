"""The audit submission forms say where a submission made now lands (the open phase, with its
dates) and what is left of the entrant's quota, as the checklist form does (issue 37 item 8);
a dataset that is the only one is chosen already."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from benchmarks_app.models import Repo
from benchmarks_app.services.phases import phase_create
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import RepoFactory, TruthFindingFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def release(db: Any) -> Any:
    repo = cast(Repo, RepoFactory(project_id="code4rena_vault_2025_01"))
    TruthFindingFactory(repo=repo, title="Reentrancy in withdraw")
    return publish_dataset(repo)


@pytest.fixture
def participant(db: Any) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_user("entrant", password="pw"))
    return client


def _windows(html: str) -> str:
    start = html.index('id="submit-windows"')
    return html[start : html.index("</ul>", start)]


@pytest.mark.parametrize("path", ["/audit/submit/", "/audit/submit/dataset/"])
def test_both_forms_name_the_open_phase_and_the_quota_left_in_it(
    release: Any, participant: Client, path: str
) -> None:
    now = timezone.now()
    phase_create(
        target=release,
        name="Final round",
        slug="final",
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=5),
        daily_limit=3,
        total_limit=7,
    )
    windows = _windows(participant.get(path).content.decode())
    assert "dataset ds" in windows
    assert "lands in the Final round phase" in windows
    assert "3 of 3 left today" in windows and "7 of 7 left in this phase" in windows


def test_without_phases_the_form_gives_the_sites_daily_limit(
    release: Any, participant: Client, settings: Any
) -> None:
    settings.AUDIT_DAILY_SUBMISSIONS = 4
    windows = _windows(participant.get("/audit/submit/").content.decode())
    assert "4 of 4 left today" in windows and "the site&#x27;s daily limit" in windows


def test_a_closed_phase_is_said_before_the_upload(release: Any, participant: Client) -> None:
    now = timezone.now()
    phase_create(target=release, name="Later", slug="later", starts_at=now + timedelta(days=2))
    windows = _windows(participant.get("/audit/submit/dataset/").content.decode())
    assert "No phase of" in windows and "Later" in windows


def test_the_only_dataset_is_chosen_already(release: Any, participant: Client) -> None:
    html = participant.get("/audit/submit/dataset/").content.decode()
    assert '<option value="ds" selected>' in html
