"""Who may submit under a model name: a leaderboard row is one (suite, model name), so
writing under somebody else's name would replace their row.

The first submitter of a name on a suite owns it; a name first imported by the maintainers
(no owner: ``submit_responses``, the demo) is theirs. Only the owner and staff may submit
under a name, and the management command (no user) may always.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import EvaluationRun, ProbeSuite, Response, ResponseSubmission
from benchmarks_app.selectors.probe_boards import probe_leaderboard
from benchmarks_app.services.probes import (
    ProbeFormatError,
    ProbeOwnershipError,
    probe_submission_submit,
    probe_suite_import,
)
from tests.benchmarks_app.probes.conftest import BAD, GOOD, PROBES, jsonl, responses_jsonl

pytestmark = pytest.mark.django_db

CURATED = "is maintained by the site's curators; submit under a model name of your own"
TAKEN = "belongs to another user; submit under a model name of your own"


def _user(name: str, **extra: Any) -> Any:
    return get_user_model().objects.create_user(name, password="pw", **extra)


def counts() -> tuple[int, int, int]:
    return (
        ResponseSubmission.objects.count(),
        Response.objects.count(),
        EvaluationRun.objects.count(),
    )


def board_row(model: str) -> dict[str, Any]:
    [row] = [r for r in probe_leaderboard(suite_name="mini") if r["model"] == model]
    return row


def api_post(user: Any, model: str, outputs: dict[str, str]) -> Any:
    api = APIClient()
    api.force_authenticate(user)
    body = {
        "suite": "mini",
        "model": model,
        "responses": [{"probe_id": k, "output": v} for k, v in outputs.items()],
    }
    return api.post(reverse("api:probes-submit"), body, format="json")


@pytest.fixture
def curated(suite, submit):
    """'gpt-4' imported by the maintainers (no owner) and scored: it has a leaderboard row."""
    return submit(suite_name="mini", model_name="gpt-4", text=responses_jsonl(GOOD))


@pytest.fixture
def alice(db):
    return _user("alice")


@pytest.fixture
def eve(db):
    return _user("eve")


@pytest.fixture
def owned(suite, submit, alice):
    """'alice-model', first submitted by alice and scored."""
    return submit(
        suite_name="mini", model_name="alice-model", text=responses_jsonl(GOOD), owner=alice
    )


def test_service_refuses_another_user_on_a_curated_and_on_an_owned_name(curated, owned, eve):
    before = counts()
    with pytest.raises(ProbeOwnershipError) as info:
        probe_submission_submit(
            suite_name="mini", model_name=" gpt-4 ", text=responses_jsonl(BAD), owner=eve
        )
    assert str(info.value) == f"model: model 'gpt-4' on suite 'mini' {CURATED}"
    assert (info.value.field, info.value.errors) == (
        "model",
        [f"field 'model': model 'gpt-4' on suite 'mini' {CURATED}"],
    )
    # Both a ProbeFormatError (listed by field) and a PermissionError (a 403 to an API).
    assert isinstance(info.value, ProbeFormatError) and isinstance(info.value, PermissionError)
    with pytest.raises(ProbeOwnershipError, match=f"model 'alice-model' on suite 'mini' {TAKEN}"):
        probe_submission_submit(
            suite_name="mini", model_name="alice-model", text=responses_jsonl(BAD), owner=eve
        )
    assert counts() == before


def test_api_refuses_another_user_stores_nothing_and_keeps_the_row(curated, owned, eve):
    rows_before = {m: board_row(m) for m in ("gpt-4", "alice-model")}
    before = counts()
    for model, why in (("gpt-4", CURATED), ("alice-model", TAKEN)):
        answer = api_post(eve, model, BAD)
        assert answer.status_code in (400, 403), answer.content
        body = answer.json()
        # The project's error shape; the reason names the model field and the name.
        assert {"detail", "code", "errors"} <= set(body)
        assert [e["reason"] for e in body["errors"]] in (
            [f"field 'model': model {model!r} on suite 'mini' {why}"],  # mapped as a 400
            [f"model {model!r} on suite 'mini' {why}"],  # mapped as a 403 on "model"
        )
    assert counts() == before
    assert not ResponseSubmission.objects.filter(owner=eve).exists()
    assert {m: board_row(m) for m in rows_before} == rows_before


def test_api_answers_403_on_the_model_field(curated, eve):
    answer = api_post(eve, "gpt-4", BAD)
    assert answer.status_code == 403, answer.content
    assert answer.json()["errors"] == [
        {
            "field": "model",
            "reason": f"model 'gpt-4' on suite 'mini' {CURATED}",
            "code": "permission_denied",
        }
    ]


def test_form_shows_the_error_on_the_model_field_and_stores_nothing(client, curated, owned, eve):
    client.force_login(eve)
    rows_before = {m: board_row(m) for m in ("gpt-4", "alice-model")}
    before = counts()
    for model, why in (("gpt-4", CURATED), ("alice-model", TAKEN)):
        upload = SimpleUploadedFile("r.jsonl", responses_jsonl(BAD).encode())
        answer = client.post(
            reverse("probes:submit"), {"suite": "mini", "model": model, "file": upload}
        )
        assert answer.status_code == 400
        errors = answer.context["form"].errors
        assert errors["model"] == [f"field 'model': model {model!r} on suite 'mini' {why}"]
        assert "file" not in errors
    assert counts() == before
    assert {m: board_row(m) for m in rows_before} == rows_before


def test_the_owner_resubmits_and_the_row_follows(owned, alice, django_capture_on_commit_callbacks):
    first_row = board_row("alice-model")
    with django_capture_on_commit_callbacks(execute=True):
        answer = api_post(alice, "alice-model", BAD)
    assert answer.status_code == 201, answer.content
    row = board_row("alice-model")
    assert row["submission_id"] == answer.json()["submission_id"] != first_row["submission_id"]
    assert row["pass_rate"] < first_row["pass_rate"]  # BAD responses fail probes GOOD passes
    assert set(
        ResponseSubmission.objects.filter(model_name="alice-model").values_list(
            "owner__username", flat=True
        )
    ) == {"alice"}


def test_a_new_name_is_claimed_by_its_first_submitter(suite, submit, alice, eve):
    run = submit(suite_name="mini", model_name="fresh", text=responses_jsonl(GOOD), owner=eve)
    assert run.probe_submission.owner == eve
    with pytest.raises(ProbeOwnershipError, match=TAKEN):
        submit(suite_name="mini", model_name="fresh", text=responses_jsonl(GOOD), owner=alice)
    # Names are per suite: the same name on another suite is free.
    probe_suite_import(name="other", text=jsonl(PROBES), fmt="jsonl")
    run = submit(suite_name="other", model_name="fresh", text=responses_jsonl(GOOD), owner=alice)
    assert run.probe_submission.owner == alice


def test_staff_may_submit_to_a_curated_name_a_participant_may_not(
    client, curated, eve, django_capture_on_commit_callbacks
):
    staff = _user("curator", is_staff=True)
    row_before = board_row("gpt-4")
    assert api_post(eve, "gpt-4", BAD).status_code in (400, 403)
    assert board_row("gpt-4") == row_before

    client.force_login(staff)
    upload = SimpleUploadedFile("r.jsonl", responses_jsonl(BAD).encode())
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            reverse("probes:submit"), {"suite": "mini", "model": "gpt-4", "file": upload}
        )
    assert answer.status_code == 302
    submission = ResponseSubmission.objects.get(owner=staff)
    assert board_row("gpt-4")["submission_id"] == submission.pk
    # Staff writing under the name does not hand it over: the curators still own it.
    with pytest.raises(ProbeOwnershipError, match=CURATED):
        probe_submission_submit(
            suite_name="mini", model_name="gpt-4", text=responses_jsonl(GOOD), owner=eve
        )


def test_the_management_command_writes_to_any_name(owned, tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(responses_jsonl(BAD), encoding="utf-8")
    call_command("submit_responses", str(path), suite="mini", model="alice-model", wait=True)
    latest = ResponseSubmission.objects.filter(model_name="alice-model").latest("pk")
    assert latest.owner is None
    assert board_row("alice-model")["submission_id"] == latest.pk


def test_anonymous_owner_is_refused(curated):
    from django.contrib.auth.models import AnonymousUser

    with pytest.raises(ProbeOwnershipError, match="sign in"):
        probe_submission_submit(
            suite_name="mini", model_name="new", text=responses_jsonl(GOOD), owner=AnonymousUser()
        )
    assert not ResponseSubmission.objects.filter(model_name="new").exists()


def _wait_for_lock_waiters(n: int) -> None:
    with connection.cursor() as cursor:
        for _ in range(400):
            # pg_stat_activity is snapshotted once per transaction: refresh it each time.
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0] >= n:
                return
            time.sleep(0.05)
    pytest.fail(f"{n} sessions never waited for the suite lock")


@pytest.mark.django_db(transaction=True)
def test_two_users_claiming_a_new_name_at_once(suite) -> None:
    """Both pass the early check while the suite is locked; the lock makes the second see
    the first one's submission, so exactly one of them gets the name."""
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row-level locks (IMMEDIATE transactions serialize writers)")
    users = [_user("u1"), _user("u2")]
    outcomes: dict[str, str] = {}

    def worker(user: Any) -> None:
        try:
            probe_submission_submit(
                suite_name="mini",
                model_name="contested",
                text=responses_jsonl(GOOD),
                owner=user,
                enqueue=False,
            )
            outcomes[user.username] = "ok"
        except ProbeOwnershipError:
            outcomes[user.username] = "refused"
        except Exception as exc:  # pragma: no cover - reported by the assertion below
            outcomes[user.username] = f"error: {exc!r}"
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(u,)) for u in users]
    try:
        with transaction.atomic():
            # Hold the suite's lock until both requests wait for it, past their early check.
            ProbeSuite.objects.select_for_update().get(pk=suite.pk)
            for t in threads:
                t.start()
            _wait_for_lock_waiters(2)
    finally:
        for t in threads:
            t.join()
    assert sorted(outcomes.values()) == ["ok", "refused"], outcomes
    owners = set(
        ResponseSubmission.objects.filter(model_name="contested").values_list("owner", flat=True)
    )
    assert len(owners) == 1


@pytest.mark.parametrize(
    ("lookalike", "reason"),
    [
        ("GPT-4", f"model 'GPT-4' on suite 'mini' {CURATED}"),
        ("gpt\u20114", f"model 'gpt-4' on suite 'mini' {CURATED}"),  # non-breaking hyphen
        ("gpt-4\u200b", "field 'model': the name contains invisible or control characters"),
    ],
)
def test_lookalike_names_cannot_stand_beside_the_curated_row(curated, eve, lookalike, reason):
    before = counts()
    answer = api_post(eve, lookalike, BAD)
    assert answer.status_code in (400, 403), answer.content
    assert reason in [e["reason"] for e in answer.json()["errors"]]
    assert counts() == before
