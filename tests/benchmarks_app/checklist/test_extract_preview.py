# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""The extraction preview: ``POST /api/checklist/extract/``, ``extract_checklist``, and how
a paper with a missing question is treated at submission (refused, the question named)."""

from __future__ import annotations

import contextlib
import functools
import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import ChecklistSubmission, Paper
from tests.factories.checklist import MembershipFactory
from tests.factories.common import UserFactory, token_for
from tests.scoring.checklist.pdf_fixtures import (
    SAMPLE_PAPERS,
    Layout,
    checklist_lines,
    drop_questions,
    review_pdf,
    typeset,
)

pytestmark = pytest.mark.django_db
URL = "/api/checklist/extract/"


def _review_pdf() -> bytes:
    """The bundled paper as a review-mode submission: line numbers glued to line ends."""
    return review_pdf("AutoSurvey.pdf")


@functools.cache
def _pdf_without_q9() -> bytes:
    lines = checklist_lines(SAMPLE_PAPERS / "AutoSurvey.pdf", 90, answers={})
    return typeset(drop_questions(lines, {9}), Layout(numbers="end"))


def _client(user=None) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user or UserFactory())}")
    return client


def _post(client: APIClient, name: str, data: bytes):
    return client.post(URL, {"file": SimpleUploadedFile(name, data)}, format="multipart")


def _command_json(tmp_path: Path, name: str, data: bytes) -> dict:
    path = tmp_path / name
    path.write_bytes(data)
    out = io.StringIO()
    with contextlib.suppress(CommandError):  # incomplete checklists exit 1 after printing
        call_command("extract_checklist", str(path), "--format", "json", stdout=out)
    return json.loads(out.getvalue())


def test_api_preview_of_a_review_mode_pdf_is_the_command_json_and_costs_nothing(
    tmp_path,
) -> None:
    # A member whose team has no submissions left: the preview spends no quota.
    member = MembershipFactory(team__challenge__daily_limit=0, team__challenge__total_limit=0)
    client = _client(member.user)
    response = _post(client, "review.pdf", _review_pdf())
    assert response.status_code == 200, response.content
    body = response.json()
    assert body == _command_json(tmp_path, "review.pdf", _review_pdf())
    assert body["complete"] is True and body["found"] == 15 and body["missing"] == []
    assert [q["status"] for q in body["questions"]] == ["found"] * 15
    assert body["questions"][1]["answer"] == "No" and body["questions"][0]["page"] == 5
    assert body["questions"][0]["justification"].endswith("scope of the paper")
    assert body["notes"][0].startswith("review-mode line numbers removed")
    assert not ChecklistSubmission.objects.exists() and not Paper.objects.exists()
    refused = client.post(
        "/api/checklist/submissions/",
        {"genuine": SimpleUploadedFile("review.pdf", _review_pdf())},
        format="multipart",
    )
    assert refused.status_code == 429  # while a submission would be over the quota


def test_api_preview_reports_a_missing_question_and_submission_refuses_it(tmp_path) -> None:
    member = MembershipFactory()
    client = _client(member.user)
    response = _post(client, "draft.pdf", _pdf_without_q9())
    assert response.status_code == 200
    body = response.json()
    assert body == _command_json(tmp_path, "draft.pdf", _pdf_without_q9())
    assert body["complete"] is False and body["found"] == 14
    assert body["missing"] == [{"number": 9, "title": "Code of Ethics"}]
    q9 = body["questions"][8]
    assert (q9["status"], q9["found"], q9["answer"], q9["page"]) == ("missing", False, None, None)
    assert body["questions"][9]["answer"] == "No"
    submitted = client.post(
        "/api/checklist/submissions/",
        {"genuine": SimpleUploadedFile("draft.pdf", _pdf_without_q9())},
        format="multipart",
    )
    assert submitted.status_code == 400
    error = submitted.json()["errors"][0]
    assert error["field"] == "genuine"
    assert "Question 9 (Code of Ethics): not found in the checklist" in error["reason"]
    assert not ChecklistSubmission.objects.exists()


def test_api_preview_errors_name_the_file_field() -> None:
    anonymous = APIClient().post(URL, {"file": SimpleUploadedFile("a.pdf", _review_pdf())})
    assert anonymous.status_code in (401, 403)
    client = _client()
    missing = client.post(URL, {}, format="multipart")
    assert missing.status_code == 400 and missing.json()["errors"][0]["field"] == "file"
    for name, data, reason in [
        ("fake.pdf", b"hello", "not a PDF"),
        ("paper.docx", b"PK..", "unsupported file type"),
        ("empty.tex", b"", "empty"),
    ]:
        response = _post(client, name, data)
        assert response.status_code == 400, name
        error = response.json()["errors"][0]
        assert error["field"] == "file" and reason in error["reason"], error


def test_api_schema_documents_the_preview() -> None:
    schema = APIClient().get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/checklist/extract/"]["post"]
    assert operation["operationId"] == "checklist_extract"
    form = operation["requestBody"]["content"]["multipart/form-data"]["schema"]["$ref"]
    assert form.rsplit("/", 1)[-1] in schema["components"]["schemas"]
    ok = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    fields = schema["components"]["schemas"][ok.rsplit("/", 1)[-1]]["properties"]
    assert {"answers", "questions", "complete", "missing", "notes"} <= set(fields)


def test_command_text_reports_pages_and_missing_questions_and_exits_1(tmp_path) -> None:
    path = tmp_path / "draft.pdf"
    path.write_bytes(_pdf_without_q9())
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"Question 9 \(Code of Ethics\): not found"):
        call_command("extract_checklist", str(path), stdout=out)
    text = out.getvalue()
    assert " 9. Code of Ethics: MISSING - not found in the checklist" in text
    assert " 2. Limitations: No (page " in text
    assert "note: review-mode line numbers removed" in text


def test_web_form_refuses_a_paper_with_a_missing_question_naming_it() -> None:
    member = MembershipFactory()
    client = APIClient()
    client.force_login(member.user)
    response = client.post(
        reverse("checklist:submit"),
        {"genuine": SimpleUploadedFile("draft.pdf", _pdf_without_q9())},
    )
    assert response.status_code == 400
    assert b"Question 9 (Code of Ethics): not found in the checklist" in response.content
    assert not ChecklistSubmission.objects.exists()
