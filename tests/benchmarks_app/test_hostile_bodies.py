"""Hostile request bodies (issue 11, items 3 to 6): deep JSON, NUL characters, bodies over the
upload limit and too many findings are a 4xx naming the field, and store nothing."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import EvaluationRun, Repo, ResponseSubmission, ScanFinding
from benchmarks_app.services.probes import probe_suite_import
from tests.benchmarks_app.probes.conftest import PROBES, jsonl
from tests.factories.audit import RepoFactory, TruthFindingFactory

pytestmark = pytest.mark.django_db

DEEP = "[" * 50000 + "]" * 50000
FINDING = {"title": "Reentrancy in Vault.withdraw", "description": "Drains.", "severity": "high"}


@pytest.fixture
def user(db: Any) -> Any:
    return get_user_model().objects.create_user("participant", password="pw")


@pytest.fixture
def api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def repo(db: Any) -> Repo:
    repo = cast(Repo, RepoFactory(project_id="code4rena_vault_2025_01", name="Vault"))
    TruthFindingFactory(repo=repo, finding_id="H-01", order=0, title="Reentrancy in withdraw")
    return repo


@pytest.fixture
def suite(db: Any) -> Any:
    return probe_suite_import(name="mini", text=jsonl(PROBES), fmt="jsonl").suite


def _audit_url(repo: Repo, query: str = "?scanner=mytool") -> str:
    return reverse("api:audit-submit", args=[repo.project_id]) + query


def _reasons(answer: Any, field: str) -> list[str]:
    body = answer.json()
    assert set(body) >= {"detail", "code", "errors"}, body
    return [e["reason"] for e in body["errors"] if e["field"] == field]


def _nothing_stored() -> bool:
    return not (
        EvaluationRun.objects.exists()
        or ScanFinding.objects.exists()
        or ResponseSubmission.objects.exists()
    )


# --- item 3: JSON nested too deeply ----------------------------------------------------------


def test_deep_json_body_on_the_audit_api(api: APIClient, repo: Repo) -> None:
    answer = api.post(_audit_url(repo), DEEP, content_type="application/json")
    assert answer.status_code == 400
    assert any("nested too deeply" in r for r in _reasons(answer, "body"))
    assert _nothing_stored()


def test_deep_json_file_on_the_audit_api_and_form(
    api: APIClient, client: Any, user: Any, repo: Repo
) -> None:
    upload = SimpleUploadedFile("results.json", DEEP.encode())
    answer = api.post(
        reverse("api:audit-submit", args=[repo.project_id]),
        {"scanner": "mytool", "file": upload},
        format="multipart",
    )
    assert answer.status_code == 400
    assert any("nested too deeply" in r for r in _reasons(answer, "file"))
    client.force_login(user)
    page = client.post(
        "/audit/submit/",
        {
            "repo": repo.project_id,
            "scanner": "mytool",
            "judge": "offline",
            "file": SimpleUploadedFile("results.json", DEEP.encode()),
        },
    )
    assert page.status_code == 400 and "nested too deeply" in page.content.decode()
    assert _nothing_stored()


def test_deep_json_on_the_probe_api_and_form(
    api: APIClient, client: Any, user: Any, suite: Any
) -> None:
    answer = api.post(reverse("api:probes-submit"), DEEP, content_type="application/json")
    assert answer.status_code == 400
    assert any("nested too deeply" in r for r in _reasons(answer, "body"))
    upload = SimpleUploadedFile("responses.jsonl", DEEP.encode())
    answer = api.post(
        reverse("api:probes-submit"),
        {"suite": "mini", "model": "m", "file": upload},
        format="multipart",
    )
    assert answer.status_code == 400
    assert any("nested too deeply" in r for r in _reasons(answer, "file"))
    client.force_login(user)
    page = client.post(
        "/probes/submit/",
        {"suite": "mini", "model": "m", "file": SimpleUploadedFile("r.jsonl", DEEP.encode())},
    )
    assert page.status_code == 400 and "nested too deeply" in page.content.decode()
    assert _nothing_stored()


# --- issue 23 row 14: an integer over Python's digit limit ----------------------------------

HUGE = "9" * 100_000


def _no_python(text: str) -> None:
    assert "sys." not in text and "int_max_str_digits" not in text, text[:500]
    assert "Exceeds the limit" not in text


def test_a_huge_integer_in_a_json_body_is_a_400_saying_it_is_too_large(
    api: APIClient, repo: Repo, suite: Any
) -> None:
    body = '{"suite": "mini", "model": "m", "responses": [{"probe_id": "w1", "output": %s}]}'
    for url in (reverse("api:probes-submit"), _audit_url(repo), "/api/auth/token/"):
        answer = api.post(url, body % HUGE, content_type="application/json")
        assert answer.status_code == 400, url
        _no_python(answer.content.decode())
        [reason] = _reasons(answer, "body")
        assert "too large" in reason and "line 1" in reason
    assert _nothing_stored()


def test_a_huge_integer_in_a_file_or_query_is_a_clear_error(
    api: APIClient, client: Any, user: Any, repo: Repo, suite: Any
) -> None:
    line = '{"probe_id": "w1", "output": "x", "n": ' + HUGE + "}\n"
    answer = api.post(
        reverse("api:probes-submit"),
        {"suite": "mini", "model": "m", "file": SimpleUploadedFile("r.jsonl", line.encode())},
        format="multipart",
    )
    assert answer.status_code == 400
    _no_python(answer.content.decode())
    assert any("line 1" in r and "too large" in r for r in _reasons(answer, "file"))
    findings = ('[{"title": "t", "severity": "high", "confidence": ' + HUGE + "}]").encode()
    answer = api.post(
        _audit_url(repo, ""),
        {"scanner": "mytool", "file": SimpleUploadedFile("results.json", findings)},
        format="multipart",
    )
    assert answer.status_code == 400
    _no_python(answer.content.decode())
    assert any("too large" in r for r in _reasons(answer, "file"))
    # Query parameters: a 400 naming the parameter (a 500 before), or the default page.
    answer = api.get("/api/runs/", {"page_size": HUGE})
    assert answer.status_code == 400 and _reasons(answer, "page_size")
    answer = api.get(reverse("api:audit-report", args=["mytool"]), {"run": HUGE})
    assert answer.status_code == 400 and _reasons(answer, "run")
    answer = api.get("/api/audit/leaderboard/", {"release": HUGE})
    assert answer.status_code == 400 and _reasons(answer, "release")
    client.force_login(user)
    for page in ("/audit/scanners/mytool/", "/audit/", "/probes/"):
        shown = client.get(page, {"run": HUGE, "page": HUGE, "release": HUGE})
        assert shown.status_code in (200, 404), page
        _no_python(shown.content.decode())
    assert _nothing_stored()


# --- item 4: NUL characters ------------------------------------------------------------------


@pytest.mark.parametrize("key", ["title", "description"])
def test_nul_in_a_finding_is_a_400_naming_it(api: APIClient, repo: Repo, key: str) -> None:
    finding = {**FINDING, key: "Reentrancy\u0000 here"}
    answer = api.post(
        _audit_url(repo), json.dumps([FINDING, finding]), content_type="application/json"
    )
    assert answer.status_code == 400, answer.content
    assert any(f"finding 2.{key}" in r and "NUL" in r for r in _reasons(answer, "findings"))
    assert _nothing_stored()


def test_nul_in_a_probe_response_is_a_400(api: APIClient, suite: Any) -> None:
    text = jsonl([{"probe_id": p["probe_id"], "output": "ok\u0000"} for p in PROBES])
    answer = api.post(
        reverse("api:probes-submit"),
        {"suite": "mini", "model": "m", "file": SimpleUploadedFile("r.jsonl", text.encode())},
        format="multipart",
    )
    assert answer.status_code == 400
    assert any("NUL" in r and "'output'" in r for r in _reasons(answer, "file"))
    assert _nothing_stored()


# --- item 5: bodies over UPLOAD_MAX_MB -------------------------------------------------------


def test_a_body_over_the_upload_limit_is_json(
    api: APIClient, repo: Repo, settings: Any, user: Any
) -> None:
    settings.UPLOAD_MAX_MB = 1
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2**20
    big = {"scanner": "mytool", "notes": "x" * (2 * 2**20)}
    for answer in (
        api.post(_audit_url(repo), {"scanner": "mytool", "notes": "x" * (2 * 2**20)}),
        api.post(reverse("api:probes-submit"), big, format="multipart"),
    ):
        assert answer.status_code == 413, answer.content[:200]
        assert answer["Content-Type"].startswith("application/json")
        assert _reasons(answer, "body") == ["the request is over 1 MB"]
        assert answer.json()["code"] == "too_large"
    assert _nothing_stored()


# --- item 6: findings per submission ---------------------------------------------------------


def test_findings_per_submission_are_capped(
    api: APIClient, client: Any, user: Any, repo: Repo, settings: Any
) -> None:
    settings.AUDIT_MAX_FINDINGS = 5
    many = [{**FINDING, "title": f"Finding {i}"} for i in range(6)]
    answer = api.post(_audit_url(repo), json.dumps(many), content_type="application/json")
    assert answer.status_code == 400
    assert _reasons(answer, "findings") == ["6 findings; at most 5 are accepted at once"]
    client.force_login(user)
    page = client.post(
        "/audit/submit/",
        {
            "repo": repo.project_id,
            "scanner": "mytool",
            "judge": "offline",
            "file": SimpleUploadedFile("results.json", json.dumps(many).encode()),
        },
    )
    assert page.status_code == 400 and "at most 5 are accepted" in page.content.decode()
    assert _nothing_stored()
    answer = api.post(_audit_url(repo), json.dumps(many[:5]), content_type="application/json")
    assert answer.status_code == 202, answer.content
