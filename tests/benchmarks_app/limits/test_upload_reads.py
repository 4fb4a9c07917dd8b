# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""Issue 35: result files (probe responses, audit results; a file or a JSON body) cannot crowd
out the site. A large one is parsed holding a slot of the site's upload reader pool; past
the cap it is refused at once, 503 with Retry-After, nothing stored, on the API and the web
forms alike; small files, and the papers' pool, are not affected."""

from __future__ import annotations

import json
from contextlib import ExitStack
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import EvaluationRun, ResponseSubmission, ScanFinding
from benchmarks_app.services.audit import submissions as audit_submissions
from benchmarks_app.services.probes import probe_suite_import
from benchmarks_app.services.reader_slots import (
    PAPERS,
    UPLOADS,
    reader_slot_hold,
    reader_slots_held,
)
from tests.benchmarks_app.probes.conftest import GOOD, PROBES, jsonl
from tests.factories.audit import RepoFactory, TruthFindingFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def caps(settings: Any) -> None:
    # One upload slot; files of 8 KB and more take it.
    settings.UPLOAD_READERS_MAX = 1
    settings.UPLOAD_READ_SLOT_MIN_KB = 8
    settings.PAPER_READERS_MAX = 1


@pytest.fixture
def user(db: Any) -> Any:
    return get_user_model().objects.create_user("participant", password="pw")


@pytest.fixture
def api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _responses(pad: int) -> bytes:
    """A genuine responses file to the suite, each output padded to ``pad`` characters."""
    rows = [{"probe_id": pid, "output": text.ljust(pad)} for pid, text in GOOD.items()]
    return jsonl(rows).encode()


def _post_responses(api: APIClient, model: str, data: bytes) -> Any:
    return api.post(
        reverse("api:probes-submit"),
        {"suite": "mini", "model": model, "file": SimpleUploadedFile("r.jsonl", data)},
        format="multipart",
    )


def _findings(pad: int) -> list[dict[str, str]]:
    return [{"title": "Reentrancy in Vault.withdraw", "severity": "high", "description": "D" * pad}]


def test_a_large_responses_file_past_the_cap_is_refused_with_503_and_retry_after(
    caps: None, api: APIClient
) -> None:
    probe_suite_import(name="mini", text=jsonl(PROBES), fmt="jsonl")
    large, small = _responses(3000), _responses(100)
    assert len(large) >= 8 * 1024 > len(small)
    with ExitStack() as held:
        held.enter_context(reader_slot_hold(pool=UPLOADS))
        busy = _post_responses(api, "m-large", large)
        assert busy.status_code == 503
        body = busy.json()
        assert body["code"] == "readers_busy"
        assert int(busy["Retry-After"]) == body["retry_after_s"] == 2
        assert "reading 1 large uploaded file already" in body["detail"]
        assert "nothing was stored" in body["detail"]
        assert not ResponseSubmission.objects.exists()
        # A small file parses in the time a page takes: it takes no slot, and goes through.
        assert _post_responses(api, "m-small", small).status_code == 201
    # The papers' pool is another: all its slots taken, a large file is still read.
    with reader_slot_hold(pool=PAPERS):
        accepted = _post_responses(api, "m-large", large)
    assert accepted.status_code == 201, accepted.content[:300]
    assert ResponseSubmission.objects.filter(model_name="m-large").count() == 1
    assert reader_slots_held(UPLOADS) == 0  # given back after the request


def test_a_large_json_body_is_parsed_holding_a_slot(
    caps: None, api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = RepoFactory(project_id="code4rena_vault_2025_01", name="Vault")
    TruthFindingFactory(repo=repo, finding_id="H-01", order=0, title="Reentrancy in withdraw")
    url = reverse("api:audit-submit", args=[repo.project_id]) + "?scanner=mytool&judge=offline"
    held_while_parsing: list[int] = []
    parse_scan = audit_submissions.parse_scan

    def watched(*args: Any, **kwargs: Any) -> Any:
        held_while_parsing.append(reader_slots_held(UPLOADS))
        return parse_scan(*args, **kwargs)

    monkeypatch.setattr(audit_submissions, "parse_scan", watched)
    body = json.dumps({"findings": _findings(9000)})
    with reader_slot_hold(pool=UPLOADS):
        busy = api.post(url, body, content_type="application/json")
    assert busy.status_code == 503 and int(busy["Retry-After"]) == 2
    assert busy.json()["code"] == "readers_busy"
    assert held_while_parsing == []  # refused before anything was parsed
    assert not EvaluationRun.objects.exists()
    accepted = api.post(url, body, content_type="application/json")
    assert accepted.status_code == 202, accepted.content[:300]
    assert held_while_parsing == [1]  # its own slot, held while the findings were checked
    assert reader_slots_held(UPLOADS) == 0
    # A small body takes no slot.
    small = json.dumps({"findings": _findings(10)})
    answer = api.post(url.replace("mytool", "other"), small, content_type="application/json")
    assert answer.status_code == 202, answer.content[:300]
    assert held_while_parsing == [1, 0]


def test_the_web_form_answers_the_busy_page_and_stores_nothing(
    caps: None, client: Any, user: Any
) -> None:
    repo = RepoFactory(project_id="code4rena_vault_2025_01", name="Vault")
    client.force_login(user)
    data = json.dumps({"findings": _findings(9000)}).encode()
    fields = {"repo": repo.project_id, "scanner": "mytool", "judge": "offline"}
    with reader_slot_hold(pool=UPLOADS):
        busy = client.post(
            "/audit/submit/", {**fields, "file": SimpleUploadedFile("results.json", data)}
        )
    assert busy.status_code == 503
    assert int(busy["Retry-After"]) == 2
    assert b"The site is busy" in busy.content and b"nothing was stored" in busy.content
    assert not ScanFinding.objects.exists() and not EvaluationRun.objects.exists()
    done = client.post(
        "/audit/submit/", {**fields, "file": SimpleUploadedFile("results.json", data)}
    )
    assert done.status_code == 302 and EvaluationRun.objects.count() == 1


def test_the_api_schema_documents_the_busy_answer_where_files_are_read(client: Any) -> None:
    paths = client.get("/api/schema/?format=json").json()["paths"]
    reading = [
        paths["/api/probes/submissions/"]["post"],
        paths["/api/audit/repos/{project_id}/results/"]["post"],
        paths["/api/checklist/submissions/"]["post"],
        paths["/api/checklist/extract/"]["post"],
    ]
    for operation in reading:
        assert "readers_busy" in operation["responses"]["503"]["description"]
    # Reading no file, or reading nothing at all: no 503 to document.
    assert "503" not in paths["/api/checklist/submissions/"]["get"]["responses"]
    assert "503" not in paths["/api/runs/"]["get"]["responses"]
