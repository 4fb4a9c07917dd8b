"""Small frictions of issue 37 item 8 on the probe pages and API, each read as a visitor or an
API client meets it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from benchmarks_app.models import ResponseSubmission
from tests.benchmarks_app.probes import test_phase_pages, test_submit_form
from tests.benchmarks_app.probes.test_submit_form import api_reasons

# The fixtures of the probe pages' tests, shared rather than copied.
phased = test_phase_pages.phased
user = test_submit_form.user
logged_in = test_submit_form.logged_in

pytestmark = pytest.mark.django_db

PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n"


def _text(html: str) -> str:
    """What a reader (or a screen reader, or a copy) gets: tags removed, blanks collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


def test_phase_tabs_and_suite_chips_read_as_separate_words(client: Any, phased: Any) -> None:
    page = client.get("/probes/", {"suite": "mini"}).content.decode()
    tabs = re.search(r'<nav class="tabs" id="phase-tabs".*?</nav>', page, re.S)
    assert tabs is not None and _text(tabs.group(0)) == "All entries Final round"
    chips = re.search(r'<nav class="chips" aria-label="Suites">.*?</nav>', page, re.S)
    assert chips is not None
    labels = re.findall(r"<a [^>]*>(.*?)</a>", chips.group(0))
    assert len(labels) >= 2 and _text(chips.group(0)) == " ".join(_text(x) for x in labels)


def test_a_pdf_on_the_probe_form_is_named_a_pdf_not_bad_text(
    logged_in: Any,
    user: Any,
    suite: Any,
) -> None:
    def pdf() -> SimpleUploadedFile:
        return SimpleUploadedFile("paper.pdf", PDF, content_type="application/pdf")

    answer = logged_in.post("/probes/submit/", {"suite": "mini", "model": "m", "file": pdf()})
    errors = answer.context["form"].errors["file"]
    assert len(errors) == 1 and errors[0].startswith("paper.pdf is a PDF, not a responses file")
    assert "JSON Lines" in errors[0] and "checklist challenge" in errors[0]
    # The API answers the same for the same file; nothing is stored.
    assert api_reasons(user, {"suite": "mini", "model": "m", "file": pdf()}, "file") == errors
    assert not ResponseSubmission.objects.exists()


def test_the_apis_empty_file_message_names_the_file_and_the_field(
    user: Any,
    suite: Any,
) -> None:
    empty = SimpleUploadedFile("answers.jsonl", b"")
    reasons = api_reasons(user, {"suite": "mini", "model": "m", "file": empty}, "file")
    assert reasons == ["answers.jsonl: the file is empty (0 bytes); send the file for 'file' again"]
