"""Cancel, resume, the bundle and the judge's cost on every page a run lands on: ``/runs/N/``,
the audit run page, the probe and the checklist submission pages (one include,
``runs/_actions.html``). Only the run's creator and staff may cancel or resume it: others get
403 or 404 and see no button (issue 37, item 5)."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from benchmarks_app.models import EvaluationRun, RunStatus
from tests.factories.common import (
    ChecklistRunFactory,
    ProbeRunFactory,
    RunFactory,
    StaffFactory,
    UserFactory,
    join,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def queue_without_worker(monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    """A resumed run waits in django-q2's ORM queue (no worker here), as on a real site."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(Conf, "ORM", "default")
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": False}


def _audit(owner: Any) -> tuple[EvaluationRun, str]:
    run = RunFactory.create(created_by=owner, status=RunStatus.CANCELLED)
    return run, reverse("audit:run", args=[run.pk])


def _probes(owner: Any) -> tuple[EvaluationRun, str]:
    run = ProbeRunFactory.create(created_by=owner, status=RunStatus.CANCELLED)
    return run, reverse("probes:submission", args=[run.probe_submission_id])


def _checklist(owner: Any) -> tuple[EvaluationRun, str]:
    run = ChecklistRunFactory.create(created_by=owner, status=RunStatus.CANCELLED)
    assert run.checklist_submission is not None
    join(owner, run.checklist_submission.team)
    return run, reverse("checklist:submission-detail", args=[run.checklist_submission_id])


LANDINGS: dict[str, Callable[[Any], tuple[EvaluationRun, str]]] = {
    "audit": _audit,
    "probes": _probes,
    "checklist": _checklist,
}


def _page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return html.unescape(response.content.decode())


def _buttons(page: str) -> set[str]:
    return {role for role in ("cancel", "resume") if f'data-role="{role}"' in page}


@pytest.mark.parametrize("landing", sorted(LANDINGS))
def test_the_creator_resumes_and_cancels_their_run_from_the_page_it_lands_on(
    landing: str,
) -> None:
    owner = UserFactory.create()
    run, url = LANDINGS[landing](owner)
    client = Client()
    client.force_login(owner)

    page = _page(client, url)
    assert _buttons(page) == {"resume"}
    # The cost line, the bundle of the ended run and its /runs/N/ page are there too.
    assert f"Judge {run.judge_label} · judge calls: 0 new, 0 cached" in page
    assert f'href="/runs/{run.pk}/bundle/"' in page
    assert f'href="/runs/{run.pk}/"' in page

    # Resumed from here: queued again, and back on this page, which now offers the cancel.
    response = client.post(reverse("runs:resume", args=[run.pk]), {"next": url})
    assert response.status_code == 302 and response["Location"] == url
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED
    page = _page(client, url)
    assert _buttons(page) == {"cancel"}
    assert f'href="/runs/{run.pk}/bundle/"' not in page  # no bundle while it is judged
    assert "No worker has picked it up" in page  # and it says why it waits

    response = client.post(reverse("runs:cancel", args=[run.pk]), {"next": url})
    assert response.status_code == 302 and response["Location"] == url
    assert EvaluationRun.objects.get(pk=run.pk).status == RunStatus.CANCELLED


@pytest.mark.parametrize("landing", sorted(LANDINGS))
def test_nobody_else_sees_the_buttons_or_may_use_them(landing: str) -> None:
    owner, stranger = UserFactory.create(), UserFactory.create()
    run, url = LANDINGS[landing](owner)
    anonymous = Client()
    other = Client()
    other.force_login(stranger)

    for client in (anonymous, other):
        response = client.get(url)
        if response.status_code == 200:  # audit and probe entries are public
            assert _buttons(html.unescape(response.content.decode())) == set()
        else:  # a checklist entry is its team's
            assert response.status_code == 404
        for action in ("runs:resume", "runs:cancel", "api:run-resume", "api:run-cancel"):
            refused = client.post(reverse(action, args=[run.pk]), {"next": url})
            assert refused.status_code in (401, 403, 404), (action, refused.status_code)
    assert EvaluationRun.objects.get(pk=run.pk).status == RunStatus.CANCELLED

    # Staff may: through the API, which answers with the run and why it waits.
    staff = Client()
    staff.force_login(StaffFactory.create())
    resumed = staff.post(reverse("api:run-resume", args=[run.pk]))
    assert resumed.status_code == 200
    body = resumed.json()
    assert body["status"] == RunStatus.QUEUED
    assert body["waiting"]["kind"] == "worker"
    assert EvaluationRun.objects.get(pk=run.pk).status == RunStatus.QUEUED


def test_the_api_refuses_to_resume_a_run_that_is_under_way() -> None:
    owner = UserFactory.create()
    run = RunFactory.create(created_by=owner, status=RunStatus.SUCCEEDED)
    client = Client()
    client.force_login(owner)
    refused = client.post(reverse("api:run-resume", args=[run.pk]))
    assert refused.status_code == 409
    assert "only failed, cancelled, paused or stalled runs resume" in refused.json()["detail"]
    page = _page(client, reverse("runs:detail", args=[run.pk]))
    assert _buttons(page) == set()
