"""The web form for probe responses: same service, same messages as the API, nothing
half-imported on failure."""

from __future__ import annotations

import html

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import EvaluationRun, Response, ResponseSubmission, RunStatus
from tests.benchmarks_app.probes.conftest import GOOD, responses_jsonl

pytestmark = pytest.mark.django_db

SUBMIT = "/probes/submit/"


@pytest.fixture
def user(db):
    return get_user_model().objects.create_user("participant", password="pw")


@pytest.fixture
def logged_in(client, user):
    client.force_login(user)
    return client


def upload(text: str, name: str = "responses.jsonl") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode())


def counts() -> tuple[int, int, int]:
    return (
        ResponseSubmission.objects.count(),
        Response.objects.count(),
        EvaluationRun.objects.count(),
    )


def api_reasons(user, data: dict, field: str) -> list[str]:
    """What the API answers for the same upload, for one field."""
    api = APIClient()
    api.force_authenticate(user)
    answer = api.post(reverse("api:probes-submit"), data, format="multipart")
    assert answer.status_code == 400, answer.content
    return [e["reason"] for e in answer.json()["errors"] if e["field"] == field]


def test_route_and_links(client, suite):
    assert reverse("probes:submit") == SUBMIT
    page = client.get(reverse("probes:leaderboard")).content.decode()
    assert f'href="{SUBMIT}"' in page  # the empty leaderboard links to the form


def test_anonymous_is_sent_to_login(client, suite):
    answer = client.get(SUBMIT)
    assert answer.status_code == 302
    assert answer["Location"] == f"{reverse('login')}?next={SUBMIT}"
    before = counts()
    posted = client.post(
        SUBMIT, {"suite": "mini", "model": "m", "file": upload(responses_jsonl(GOOD))}
    )
    assert posted.status_code == 302 and posted["Location"].startswith(reverse("login"))
    assert counts() == before


def test_form_lists_suites_with_probes_and_preselects(logged_in, suite):
    page = logged_in.get(SUBMIT, {"suite": "mini"}).content.decode()
    assert '<option value="mini" selected>mini (4 probes)</option>' in page
    assert 'enctype="multipart/form-data"' in page


def test_form_without_suites_says_what_to_do(logged_in):
    page = logged_in.get(SUBMIT).content.decode()
    assert 'id="no-suites"' in page and "import_probes" in page
    assert 'id="probe-submit-form"' not in page


def test_valid_upload_is_stored_scored_and_redirects(
    logged_in, user, suite, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        answer = logged_in.post(
            SUBMIT,
            {
                "suite": "mini",
                "model": "  form-model ",
                "format": "",
                "file": upload(responses_jsonl(GOOD)),
            },
        )
    submission = ResponseSubmission.objects.get()
    assert answer.status_code == 302
    assert answer["Location"] == reverse("probes:submission", args=[submission.pk])
    assert (submission.model_name, submission.owner, submission.source_name) == (
        "form-model",
        user,
        "responses.jsonl",
    )
    assert dict(submission.responses.values_list("probe__probe_id", "output")) == GOOD
    run = EvaluationRun.objects.get(probe_submission=submission)
    assert run.status == RunStatus.SUCCEEDED and run.created_by == user
    assert run.progress_done == run.progress_total == 4

    # The submission page now shows the report, and the leaderboard the user's own entry.
    report = logged_in.get(answer["Location"]).content.decode()
    assert "received; scoring run #" in report and "Download JSON report" in report
    board = logged_in.get(reverse("probes:leaderboard")).content.decode()
    mine = board[board.index('id="my-probe-submissions"') :]
    assert "form-model on mini" in mine and 'class="badge succeeded"' in mine


def test_invalid_upload_names_the_ids_matches_the_api_and_stores_nothing(logged_in, user, suite):
    # One unknown id and one duplicate, every probe answered otherwise.
    rows = {**GOOD, "zz-unknown": "Some answer."}
    text = responses_jsonl(rows) + responses_jsonl({"w1": GOOD["w1"]})
    before = counts()

    answer = logged_in.post(SUBMIT, {"suite": "mini", "model": "m", "file": upload(text)})

    assert answer.status_code == 400
    assert counts() == before
    errors = answer.context["form"].errors
    assert errors["file"] == [
        "unknown probe id(s): zz-unknown",
        "duplicate response(s) for probe id(s): w1",
    ]
    page = html.unescape(answer.content.decode())
    assert "unknown probe id(s): zz-unknown" in page and "Nothing was stored" in page
    assert errors["file"] == api_reasons(
        user, {"suite": "mini", "model": "m", "file": upload(text)}, "file"
    )
    assert counts() == before


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        ({k: v for k, v in GOOD.items() if k != "b2"}, "no response for probe id(s): b2"),
        ({**GOOD, "b1": "   "}, "empty output for probe id(s): b1"),
    ],
)
def test_missing_and_empty_are_reported_by_id_like_the_api(
    logged_in, user, suite, outputs, message
):
    text = responses_jsonl(outputs)
    answer = logged_in.post(SUBMIT, {"suite": "mini", "model": "m", "file": upload(text)})
    assert answer.context["form"].errors["file"] == [message]
    assert api_reasons(user, {"suite": "mini", "model": "m", "file": upload(text)}, "file") == [
        message
    ]
    assert counts() == (0, 0, 0)


def test_unknown_suite_is_reported_on_the_suite_field_like_the_api(logged_in, user, suite):
    data = {"suite": "gone", "model": "m", "file": upload(responses_jsonl(GOOD))}
    answer = logged_in.post(SUBMIT, data)
    assert answer.status_code == 400
    errors = answer.context["form"].errors
    assert errors["suite"] == ["field 'suite': no probe suite named 'gone'"]
    assert "file" not in errors
    data["file"] = upload(responses_jsonl(GOOD))
    assert api_reasons(user, data, "suite") == errors["suite"]
    assert counts() == (0, 0, 0)


def test_the_chosen_format_is_used(logged_in, user, suite):
    # A JSONL file declared as an XSTest CSV is refused on its header, as by the API.
    data = {"suite": "mini", "model": "m", "format": "xstest"}
    answer = logged_in.post(SUBMIT, {**data, "file": upload(responses_jsonl(GOOD))})
    errors = answer.context["form"].errors["file"]
    assert len(errors) == 1 and errors[0].startswith("header: missing column(s) id, completion")
    assert api_reasons(user, {**data, "file": upload(responses_jsonl(GOOD))}, "file") == errors
    assert counts() == (0, 0, 0)


def test_required_fields_and_undecodable_file(logged_in, user, suite):
    answer = logged_in.post(SUBMIT, {"suite": "mini"})
    errors = answer.context["form"].errors
    assert answer.status_code == 400 and set(errors) == {"model", "file"}

    binary = SimpleUploadedFile("r.jsonl", b"\xff\xfe\x00garbage")
    answer = logged_in.post(SUBMIT, {"suite": "mini", "model": "m", "file": binary})
    assert answer.context["form"].errors["file"] == ["r.jsonl: not UTF-8 text"]
    binary.seek(0)
    assert api_reasons(user, {"suite": "mini", "model": "m", "file": binary}, "file") == [
        "r.jsonl: not UTF-8 text"
    ]
    assert counts() == (0, 0, 0)


def test_oversized_file_is_refused_before_reading(logged_in, suite, settings):
    settings.UPLOAD_MAX_MB = 1
    padded = responses_jsonl(GOOD) + "\n" * (1024 * 1024 + 1)
    answer = logged_in.post(SUBMIT, {"suite": "mini", "model": "m", "file": upload(padded)})
    [message] = answer.context["form"].errors["file"]
    assert "larger than the 1 MB limit" in message
    assert counts() == (0, 0, 0)


def test_own_submissions_are_shown_only_to_their_owner(
    client, user, suite, submit, django_capture_on_commit_callbacks
):
    submit(suite_name="mini", model_name="mine-model", text=responses_jsonl(GOOD), owner=user)
    other = get_user_model().objects.create_user("other", password="pw")
    client.force_login(other)
    page = client.get(reverse("probes:leaderboard")).content.decode()
    assert 'id="my-probe-submissions"' not in page and "mine-model" in page  # on the board
    client.force_login(user)
    page = client.get(reverse("probes:leaderboard")).content.decode()
    assert 'id="my-probe-submissions"' in page
    assert f'href="{SUBMIT}?suite=mini"' in page


def test_redirect_while_queued_points_to_live_progress(logged_in, suite):
    # No on_commit execution here: the run stays queued, as with a real worker not yet done.
    answer = logged_in.post(
        SUBMIT, {"suite": "mini", "model": "slow", "file": upload(responses_jsonl(GOOD))}
    )
    run = EvaluationRun.objects.get()
    assert answer.status_code == 302 and run.status == RunStatus.QUEUED
    page = logged_in.get(answer["Location"]).content.decode()
    assert "has no scored run yet" in page
    # The page follows the run itself (run_progress.js polls its status) and links its page.
    assert f'data-status-url="{reverse("runs:status", args=[run.pk])}"' in page
    assert f'href="{reverse("runs:detail", args=[run.pk])}">Run #{run.pk}' in page
    assert "reload" not in page.lower()
