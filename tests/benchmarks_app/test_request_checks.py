"""Issue 36 item 7: a NUL in the path or a query parameter is a 400 naming it (JSON on the
API, a page on the site) before any view reads it; PostgreSQL cannot store a NUL, and such a
request was an HTML 500 on 18 endpoints."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_api_names_the_parameter_with_a_nul() -> None:
    answer = Client().get("/api/runs/", {"status": "queued\x00", "page": "1"})
    assert answer.status_code == 400
    assert answer["Content-Type"].startswith("application/json")
    body = answer.json()
    assert [e["field"] for e in body["errors"]] == ["status"]
    assert body["detail"].startswith("status: contains a NUL")


def test_the_site_answers_a_page_for_a_nul_in_the_path() -> None:
    answer = Client().get("/audit/scanners/a%00b/")
    assert answer.status_code == 400
    assert answer["Content-Type"].startswith("text/html")
    assert "<code>path</code>" in answer.content.decode()


def test_a_clean_request_passes() -> None:
    assert Client().get("/api/runs/", {"status": "queued"}).status_code == 200
