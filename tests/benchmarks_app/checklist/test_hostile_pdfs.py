# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""Issue 23 rows 1-4 through the site: the extraction preview API answers 400 with JSON naming
the file and the limit, the submission form shows the error on its field, the management
command says the same, and nothing is stored."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from benchmarks_app.bench import hostile_files
from benchmarks_app.models import ChecklistSubmission, Paper
from tests.factories.checklist import MembershipFactory
from tests.factories.common import UserFactory, token_for

pytestmark = pytest.mark.django_db
URL = "/api/checklist/extract/"

HOSTILE: list[tuple[str, Callable[[], bytes], str]] = [
    ("tiny-operators", hostile_files.tiny_operators_pdf, "(the operator limit)"),
    ("shared-stream", hostile_files.shared_stream_pdf, "(the operator limit)"),
    ("content-bomb", hostile_files.content_bomb_pdf, "(the content size limit)"),
    ("many-pages", hostile_files.many_pages_pdf, "(the page limit)"),
    ("nested-tj", hostile_files.nested_array_pdf, "(the nesting limit)"),
]
IDS = [h[0] for h in HOSTILE]


def _client() -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(UserFactory())}")
    return client


@pytest.mark.parametrize(("name", "make", "limit"), HOSTILE, ids=IDS)
def test_preview_api_answers_400_json_naming_file_and_limit(
    name: str, make: Callable[[], bytes], limit: str
) -> None:
    response = _client().post(
        URL, {"file": SimpleUploadedFile(f"{name}.pdf", make())}, format="multipart"
    )
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["errors"][0]
    assert error["field"] == "file"
    assert f"'{name}.pdf'" in error["reason"] or f"{name}.pdf:" in error["reason"], error
    assert limit in error["reason"], error


@pytest.mark.parametrize(("name", "make", "limit"), HOSTILE, ids=IDS)
def test_submission_form_shows_the_limit_on_its_field(
    name: str, make: Callable[[], bytes], limit: str, client: Any, _media_root: Path
) -> None:
    member: Any = MembershipFactory()
    client.force_login(member.user)
    upload = io.BytesIO(make())
    upload.name = f"{name}.pdf"
    response = client.post(
        "/checklist/submit/", {"team": member.team.pk, "genuine": upload, "label": "x"}
    )
    assert response.status_code == 400
    errors = response.context["form"].errors["genuine"]
    assert any(limit in e and f"{name}.pdf" in e for e in errors), errors
    assert not ChecklistSubmission.objects.exists() and not Paper.objects.exists()


def test_the_api_submission_refuses_a_nested_array_with_json(_media_root: Path) -> None:
    member: Any = MembershipFactory()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(member.user)}")
    response = client.post(
        "/api/checklist/submissions/",
        {"genuine": SimpleUploadedFile("deep.pdf", hostile_files.nested_array_pdf())},
        format="multipart",
    )
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == "genuine" and "(the nesting limit)" in error["reason"]
    assert not ChecklistSubmission.objects.exists()


def test_limits_come_from_settings(settings: Any) -> None:
    settings.PDF_MAX_PAGES = 4
    data = hostile_files.many_pages_pdf(5)
    response = _client().post(
        URL, {"file": SimpleUploadedFile("five.pdf", data)}, format="multipart"
    )
    assert response.status_code == 400
    assert "the limit is 4 pages" in response.json()["errors"][0]["reason"]
    settings.PDF_MAX_PAGES = 5
    response = _client().post(
        URL, {"file": SimpleUploadedFile("five.pdf", data)}, format="multipart"
    )
    # Within the page limit the file is read, and refused for what it lacks instead.
    assert response.status_code == 400
    assert "NeurIPS Paper Checklist" in response.json()["errors"][0]["reason"]


def test_extract_command_names_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "deep.pdf"
    path.write_bytes(hostile_files.nested_array_pdf())
    with pytest.raises(CommandError, match=r"deep\.pdf: .*\(the nesting limit\)"):
        call_command("extract_checklist", str(path))
