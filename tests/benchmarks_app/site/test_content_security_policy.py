"""The Content-Security-Policy (issue 23 row 14): on the pages, the admin and the API docs,
and no template that needs more than it allows (the browser test loads the pages)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from tests.factories.common import StaffFactory

pytestmark = pytest.mark.django_db

TEMPLATES = Path(settings.BASE_DIR) / "templates"


def _policy(answer) -> dict[str, list[str]]:
    header = answer["Content-Security-Policy"]
    return {
        name: values
        for name, *values in (part.split() for part in header.split(";") if part.strip())
    }


@pytest.mark.parametrize(
    "path", ["/", "/audit/", "/accounts/login/", "/api/docs/", "/api/docs/?script", "/api/runs/"]
)
def test_every_answer_carries_the_policy(path: str) -> None:
    answer = Client().get(path)
    assert answer.status_code == 200
    policy = _policy(answer)
    assert policy["script-src"] == ["'self'"]  # no inline script, no eval
    assert policy["style-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]


def test_the_admin_carries_the_policy() -> None:
    client = Client()
    client.force_login(StaffFactory.create(is_superuser=True))
    for path in ("/admin/", "/admin/benchmarks_app/repo/", "/admin/login/"):
        answer = client.get(path)
        assert answer.status_code in (200, 302), path
        assert _policy(answer)["script-src"] == ["'self'"], path


def test_the_api_docs_start_swagger_from_a_file() -> None:
    page = Client().get("/api/docs/").content.decode()
    assert "<style" not in page
    assert re.search(r'<script src="[^"]*\?script=?"', page), page
    assert "<script>" not in page


def test_no_template_holds_inline_script_style_or_handlers() -> None:
    offenders = []
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        # A <script> without src, a <style> element, an on...= handler or a javascript: URL.
        if (
            re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text)
            or "<style" in text
            or re.search(r"\son[a-z]+\s*=", text)
            or "javascript:" in text
        ):
            offenders.append(str(path.relative_to(TEMPLATES)))
    assert offenders == []
