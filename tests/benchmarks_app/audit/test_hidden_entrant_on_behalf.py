"""A hidden phase's entrant stays hidden whoever acts on it (issue 36): runs made on its
behalf (``evaluate_audit``, the admin's evaluation) stay in a hidden phase or are refused, and
its owner's forms answer everybody else as a name that never existed does."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from benchmarks_app.models import EvaluationRun, Phase, Scanner
from tests.benchmarks_app.audit.test_release_reevaluation import (
    _hidden_entrant_on_release_one,
    _new_official_release,
)

pytestmark = pytest.mark.django_db

PUBLIC_PAGES = ("/audit/", "/api/audit/scanners/", "/api/audit/leaderboard/", "/runs/")


def _hidden_nowhere(client: Client) -> None:
    for url in PUBLIC_PAGES:
        assert "hidden-scan" not in client.get(url).content.decode(), url
    assert client.get(reverse("audit:scanner", args=["hidden-scan"])).status_code == 404


def test_evaluate_audit_keeps_a_hidden_entrant_s_run_in_its_hidden_phase(
    django_capture_on_commit_callbacks: Any,
) -> None:
    first, _ = _hidden_entrant_on_release_one()
    hidden = Phase.objects.get(release=first, slug="final")
    slug = first.dataset.slug
    # On the release whose hidden phase is open: the run goes into that phase.
    with django_capture_on_commit_callbacks(execute=True):
        call_command("evaluate_audit", "--scanner", "hidden-scan", stdout=io.StringIO())
    newest = EvaluationRun.objects.filter(scanner__name="hidden-scan").latest("pk")
    assert (newest.release_id, newest.phase_id) == (first.pk, hidden.pk)
    _hidden_nowhere(Client())
    # On a new official release with no hidden phase open, a run outside every phase would
    # make the entrant public: refused, saying why, and nothing is created.
    second = _new_official_release(first)
    before = EvaluationRun.objects.count()
    with pytest.raises(CommandError, match="hidden phase not yet revealed"):
        call_command(
            "evaluate_audit", "--scanner", "hidden-scan", "--dataset", slug, stdout=io.StringIO()
        )
    assert EvaluationRun.objects.count() == before
    _hidden_nowhere(Client())
    # A public entrant is evaluated as before, outside any phase.
    call_command("evaluate_audit", "--scanner", "alpha", "--dataset", slug, stdout=io.StringIO())
    alpha = EvaluationRun.objects.filter(scanner__name="alpha").latest("pk")
    assert (alpha.release_id, alpha.phase_id) == (second.pk, None)


def test_a_hidden_entrant_s_forms_answer_others_as_a_free_name_does() -> None:
    _, owner = _hidden_entrant_on_release_one()
    run = EvaluationRun.objects.filter(scanner__name="hidden-scan").get()
    participant = Client()
    participant.force_login(get_user_model().objects.create_user("rival", password="pw"))
    free_pk = EvaluationRun.objects.order_by("-pk").first().pk + 1000  # type: ignore[union-attr]
    # The description form and the run's "stands for the scanner" button: a hidden entrant's
    # name or run answers as one that never existed (it said "not yours" before).
    for hidden_url, free_url in (
        (
            reverse("audit:scanner-describe", args=["hidden-scan"]),
            reverse("audit:scanner-describe", args=["nosuch-scan"]),
        ),
        (reverse("audit:run-choose", args=[run.pk]), reverse("audit:run-choose", args=[free_pk])),
    ):
        hidden = participant.post(hidden_url, {"description": "x", "chosen": "1"})
        free = participant.post(free_url, {"description": "x", "chosen": "1"})
        assert (hidden.status_code, free.status_code) == (404, 404), hidden_url
    # Its owner still reaches both.
    mine = Client()
    mine.force_login(owner)
    described = mine.post(
        reverse("audit:scanner-describe", args=["hidden-scan"]), {"description": "Mine."}
    )
    assert described.status_code == 302
    assert Scanner.objects.get(name="hidden-scan").description == "Mine."
    assert mine.post(reverse("audit:run-choose", args=[run.pk])).status_code == 302
