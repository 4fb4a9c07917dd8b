"""Whole-dataset submissions: one upload, one run, one submission; repos without findings
are refused by name unless declared empty; the archive is checked; nothing half-stored."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any, cast

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from benchmarks_app.models import EvaluationRun, Repo, ScanResult
from benchmarks_app.selectors.audit_submission_quota import audit_submission_quota
from benchmarks_app.services.runs import run_wait
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import RepoFactory, TruthFindingFactory

pytestmark = pytest.mark.django_db

URL = "/api/audit/datasets/ds/results/"
FINDING = {"title": "Reentrancy in withdraw", "description": "Vault.sol", "severity": "high"}


@pytest.fixture
def repos(db: Any) -> list[Repo]:
    made = []
    for name in ("alpha", "beta", "gamma"):
        repo = cast(Repo, RepoFactory(project_id=f"code4rena_{name}_2025_01"))
        TruthFindingFactory(repo=repo, title="Reentrancy in withdraw")
        made.append(repo)
    publish_dataset(*made)
    return made


def client_for(user: Any) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def zipped(files: dict[str, Any], *, raw: dict[str, bytes] | None = None) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, json.dumps(content))
        for name, data in (raw or {}).items():
            archive.writestr(name, data)
    return SimpleUploadedFile("results.zip", buffer.getvalue(), content_type="application/zip")


def errors(answer: Any) -> dict[str, str]:
    return {e["field"]: e["reason"] for e in answer.json()["errors"]}


def stored() -> tuple[int, int]:
    return EvaluationRun.objects.count(), ScanResult.objects.count()


def test_one_json_body_makes_one_run_and_counts_once(user: Any, repos: list[Repo]) -> None:
    body = {r.project_id: [FINDING] for r in repos}
    answer = client_for(user).post(f"{URL}?scanner=mine", body, format="json")
    assert answer.status_code == 202, answer.json()
    assert answer.json()["release"] == "ds@1"
    run = EvaluationRun.objects.get()
    assert sorted(run.repos.values_list("project_id", flat=True)) == sorted(body)
    assert audit_submission_quota(user=user).used_today == 1
    assert run_wait(run=run).status == "succeeded"


def test_a_repo_without_findings_is_named_unless_declared_empty(
    user: Any, repos: list[Repo]
) -> None:
    api = client_for(user)
    alpha, beta, gamma = (r.project_id for r in repos)
    missing = api.post(f"{URL}?scanner=mine", {alpha: [FINDING]}, format="json")
    assert missing.status_code == 400
    reason = errors(missing)["results"]
    assert beta in reason and gamma in reason and "declare" in reason
    empty = api.post(
        f"{URL}?scanner=mine", {alpha: [FINDING], beta: [], gamma: [FINDING]}, format="json"
    )
    assert empty.status_code == 400 and beta in errors(empty)["results"]
    assert stored() == (0, 0)

    declared = api.post(
        f"{URL}?scanner=mine&declared_empty={beta}",
        {alpha: [FINDING], gamma: [FINDING]},
        format="json",
    )
    assert declared.status_code == 202, declared.json()
    beta_result = ScanResult.objects.get(repo__project_id=beta)
    assert beta_result.declared_empty and beta_result.findings.count() == 0
    assert not ScanResult.objects.get(repo__project_id=alpha).declared_empty
    contradiction = api.post(
        f"{URL}?scanner=mine&declared_empty={alpha}",
        {r.project_id: [FINDING] for r in repos},
        format="json",
    )
    assert contradiction.status_code == 400 and alpha in errors(contradiction)["declared_empty"]


def test_a_zip_of_results_files(user: Any, repos: list[Repo]) -> None:
    files = {f"out/{r.project_id}_results.json": {"findings": [FINDING]} for r in repos}
    answer = client_for(user).post(
        URL, {"scanner": "zipped", "judge": "offline", "file": zipped(files)}, format="multipart"
    )
    assert answer.status_code == 202, answer.json()
    assert ScanResult.objects.filter(scanner__name="zipped").count() == 3


@pytest.mark.parametrize(
    ("files", "raw", "expected"),
    [
        ({"notes.json": {}}, None, "not a results file"),
        (
            {"a/code4rena_alpha_2025_01_results.json": [FINDING]},
            {"b/code4rena_alpha_2025_01_results.json": b"[]"},
            "a second results file",
        ),
        ({}, {"code4rena_alpha_2025_01_results.json": b"{"}, "not valid JSON"),
        ({"code4rena_other_2025_01_results.json": [FINDING]}, None, "not in ds@1"),
    ],
)
def test_bad_archives_are_refused_by_member(
    user: Any, repos: list[Repo], files: dict[str, Any], raw: Any, expected: str
) -> None:
    answer = client_for(user).post(
        URL, {"scanner": "zipped", "file": zipped(files, raw=raw)}, format="multipart"
    )
    assert answer.status_code == 400
    assert expected in errors(answer)["file"]
    assert stored() == (0, 0)


def test_zip_bomb_and_size_limits(user: Any, repos: list[Repo], settings: Any) -> None:
    settings.UPLOAD_MAX_MB = 1
    bomb = {f"{repos[0].project_id}_results.json": b" " * (6 * 2**20) + b"[]"}
    answer = client_for(user).post(
        URL, {"scanner": "zipped", "file": zipped({}, raw=bomb)}, format="multipart"
    )
    assert answer.status_code == 400 and "unpacks to more than" in errors(answer)["file"]
    assert stored() == (0, 0)


def test_the_web_form_submits_a_dataset(user: Any, repos: list[Repo]) -> None:
    client = Client()
    client.force_login(user)
    page = client.get("/audit/submit/dataset/")
    assert page.status_code == 200 and "ds (release 1, 3 repos)" in page.content.decode()
    files = {f"{r.project_id}_results.json": [FINDING] for r in repos[:2]}
    refused = client.post(
        "/audit/submit/dataset/",
        {"dataset": "ds", "scanner": "formtool", "judge": "offline", "file": zipped(files)},
    )
    assert refused.status_code == 400 and repos[2].project_id in refused.content.decode()
    accepted = client.post(
        "/audit/submit/dataset/",
        {
            "dataset": "ds",
            "scanner": "formtool",
            "judge": "offline",
            "declared_empty": repos[2].project_id,
            "file": zipped(files),
        },
    )
    assert accepted.status_code == 302
    run = EvaluationRun.objects.get()
    assert accepted["Location"] == f"/audit/runs/{run.pk}/"
    assert run.repos.count() == 3 and run.release is not None


def test_the_daily_limit_counts_a_dataset_once(user: Any, repos: list[Repo], settings: Any) -> None:
    settings.AUDIT_DAILY_SUBMISSIONS = 1
    api = client_for(user)
    body = {r.project_id: [FINDING] for r in repos}
    assert api.post(f"{URL}?scanner=mine", body, format="json").status_code == 202
    # Other findings (the same ones again would be "unchanged", which costs nothing).
    changed = {r.project_id: [{**FINDING, "title": "Reentrancy"}] for r in repos}
    again = api.post(f"{URL}?scanner=mine", changed, format="json")
    assert again.status_code == 429 and EvaluationRun.objects.count() == 1
