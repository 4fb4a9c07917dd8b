from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import EvaluationRun, ResponseSubmission
from benchmarks_app.selectors.probe_boards import probe_leaderboard
from benchmarks_app.selectors.probes import probe_report
from tests.benchmarks_app.probes.conftest import GOOD, PROBES, jsonl, responses_jsonl

pytestmark = pytest.mark.django_db


def test_leaderboard_ranks_by_resilience_in_constant_queries(
    scored, submit, django_assert_num_queries
):
    # The rows, then their places and ranks (one statement of counts).
    with django_assert_num_queries(2):
        rows = probe_leaderboard(suite_name="mini")
    assert [r["model"] for r in rows] == ["good-model", "bad-model"]
    assert rows[0]["resilience_index"] > rows[1]["resilience_index"]
    assert rows[1]["pass_rate"] == 0.5 and rows[0]["agreement_accuracy"] is None
    # More submissions, same query count; a re-submission replaces the model's row.
    submit(suite_name="mini", model_name="third", text=responses_jsonl(GOOD))
    submit(suite_name="mini", model_name="bad-model", text=responses_jsonl(GOOD))
    with django_assert_num_queries(2):
        rows = probe_leaderboard()
    assert len(rows) == 3 and {r["model"] for r in rows} == {"good-model", "bad-model", "third"}
    assert all(r["resilience_index"] == 1.0 for r in rows)


def test_report_document(scored):
    _, bad = scored
    doc = probe_report(submission_id=bad.probe_submission_id)
    assert (doc["suite"], doc["model"]) == ("mini", "bad-model")
    assert len(doc["cases"]) == 4 and doc["observability"] is None
    assert "heuristic" in doc["limitations"]
    assert doc["metrics"]["counts"] == {"evaluated": 4, "passed": 2, "failed": 2, "categories": 2}


def test_pages(client, scored, settings):
    _, bad = scored
    page = client.get(reverse("probes:leaderboard"))
    assert page.status_code == 200
    html = page.content.decode()
    assert html.index("good-model") < html.index("bad-model")
    detail = client.get(reverse("probes:submission", args=[bad.probe_submission_id]))
    html = detail.content.decode()
    assert "Category ranking" in html and "harmful_compliance" in html
    assert "fewer than the geometry threshold" in html
    assert "here&#x27;s how: step 1" in html  # the worst case's response is shown
    download = client.get(reverse("probes:report-json", args=[bad.probe_submission_id]))
    assert download["Content-Disposition"].startswith("attachment")
    assert download.json()["model"] == "bad-model"
    assert client.get(reverse("probes:submission", args=[9999])).status_code == 404


def test_page_with_geometry_has_the_scatter(client, suite, submit):
    rows = [{**p, "probe_id": f"{p['probe_id']}x{i}"} for i in range(2) for p in PROBES]
    from benchmarks_app.services.probes import probe_suite_import

    probe_suite_import(name="mini", text=jsonl(rows), fmt="jsonl")
    outputs = {
        **GOOD,
        **{f"{k}x{i}": v for i in range(2) for k, v in GOOD.items()},
    }
    run = submit(suite_name="mini", model_name="geo", text=responses_jsonl(outputs))
    html = client.get(reverse("probes:submission", args=[run.probe_submission_id])).content.decode()
    # One mark per case (dots passed, crosses failed), plus the legend's own marks.
    assert 'id="probe-scatter"' in html
    assert html.count('class="case pass"') + html.count('class="case fail"') == 12
    assert "SVD component 1" in html and "failed (0)" in html


def test_empty_leaderboard_says_what_to_do(client, db):
    html = client.get(reverse("probes:leaderboard")).content.decode()
    assert "import_probes" in html and "submit_responses" in html


def test_api_read_and_authenticated_submit(scored, django_capture_on_commit_callbacks):
    api = APIClient()
    rows = api.get(reverse("api:probes-leaderboard"), {"suite": "mini"}).json()["results"]
    assert [r["model"] for r in rows] == ["good-model", "bad-model"]
    good, _ = scored
    doc = api.get(reverse("api:probes-report", args=[good.probe_submission_id])).json()
    assert doc["metrics"]["overall"]["pass_rate"] == 1.0
    assert api.get(reverse("api:probes-report", args=[9999])).status_code == 404

    body = {
        "suite": "mini",
        "model": "api-model",
        "responses": [{"probe_id": k, "output": v} for k, v in GOOD.items()],
    }
    assert api.post(reverse("api:probes-submit"), body, format="json").status_code in (401, 403)
    user = get_user_model().objects.create_user("participant", password="pw")
    api.force_authenticate(user)
    with django_capture_on_commit_callbacks(execute=True):
        created = api.post(reverse("api:probes-submit"), body, format="json")
    assert created.status_code == 201, created.content
    data = created.json()
    assert EvaluationRun.objects.get(pk=data["run_id"]).status == "succeeded"
    assert ResponseSubmission.objects.get(pk=data["submission_id"]).owner == user

    bad = {**body, "responses": body["responses"][:2]}
    refused = api.post(reverse("api:probes-submit"), bad, format="json")
    assert refused.status_code == 400
    assert "no response for probe id(s): b1, b2" in refused.content.decode()

    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("r.jsonl", responses_jsonl(GOOD).encode())
    created = api.post(
        reverse("api:probes-submit"),
        {"suite": "mini", "model": "upload", "file": upload},
        format="multipart",
    )
    assert created.status_code == 201, created.content


def test_admin_upload_and_rule_validation(client, db):
    admin = get_user_model().objects.create_superuser("root", "r@example.com", "pw")
    client.force_login(admin)
    from django.core.files.uploadedfile import SimpleUploadedFile

    bad = SimpleUploadedFile("p.jsonl", jsonl([*PROBES, PROBES[0]]).encode())
    page = client.post(
        reverse("admin:benchmarks_app_probesuite_upload"), {"suite": "adm", "file": bad}
    )
    assert page.status_code == 200 and "duplicate probe_id(s): w1" in page.content.decode()
    good = SimpleUploadedFile("p.jsonl", jsonl(PROBES).encode())
    page = client.post(
        reverse("admin:benchmarks_app_probesuite_upload"), {"suite": "adm", "file": good}
    )
    assert page.status_code == 302
    from benchmarks_app.models import ProbeSuite

    assert ProbeSuite.objects.get(name="adm").probes.count() == 4
    page = client.post(
        reverse("admin:benchmarks_app_patternrule_add"),
        {"kind": "unsafe", "label": "bad", "regex": "(x", "weight": "1", "active": "on"},
    )
    assert page.status_code == 200 and "Invalid regular expression" in page.content.decode()
