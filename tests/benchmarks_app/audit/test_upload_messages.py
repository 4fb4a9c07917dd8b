# mypy: disable-error-code="arg-type"
"""Upload mistakes are told in words that name the file and the field (issue 26, item 13):
one repo's results given to the dataset form, a PDF given as results, an empty file."""

from __future__ import annotations

import html
import json
from typing import Any, cast

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from benchmarks_app.models import Repo, ScanResult
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import RepoFactory, TruthFindingFactory
from tests.factories.checklist import MembershipFactory

pytestmark = pytest.mark.django_db

FINDING = {"title": "Reentrancy in withdraw", "description": "Vault.sol", "severity": "high"}
ONE_REPO = {
    "project": "code4rena_alpha_2025_01",
    "files_analyzed": 12,
    "files_skipped": 0,
    "findings": [FINDING],
    "token_usage": {"input": 1},
}
PDF = b"%PDF-1.7\n%\xbf\xf7\xa2\xfe\n1 0 obj\n<< /Type /Catalog >>\nendobj\n"


@pytest.fixture
def repos(db: Any) -> list[Repo]:
    made = []
    for name in ("alpha", "beta"):
        repo = cast(Repo, RepoFactory(project_id=f"code4rena_{name}_2025_01"))
        TruthFindingFactory(repo=repo, title="Reentrancy in withdraw")
        made.append(repo)
    publish_dataset(*made)
    return made


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _file_errors(page: str) -> str:
    start = page.find('id="errors-file"')
    assert start != -1, "no error under the file field"
    return html.unescape(page[start : page.find("</ul>", start)])


def test_dataset_form_recognises_one_repos_results_file(user: Any, repos: list[Repo]) -> None:
    upload = SimpleUploadedFile("alpha_results.json", json.dumps(ONE_REPO).encode())
    answer = _client(user).post(
        "/audit/submit/dataset/",
        {"dataset": "ds", "scanner": "tool", "judge": "offline", "file": upload},
    )
    assert answer.status_code == 400
    problem = _file_errors(answer.content.decode())
    assert "alpha_results.json" in problem and "results of one repo" in problem
    assert "files_analyzed" not in problem and "not in" not in problem
    # A bare findings list is one repo's file too.
    bare = SimpleUploadedFile("out.json", json.dumps([FINDING]).encode())
    answer = _client(user).post(
        "/audit/submit/dataset/",
        {"dataset": "ds", "scanner": "tool", "judge": "offline", "file": bare},
    )
    assert "results of one repo" in _file_errors(answer.content.decode())
    assert not ScanResult.objects.exists()


@pytest.mark.parametrize("url", ["/audit/submit/dataset/", "/audit/submit/"])
def test_a_pdf_sent_as_results_is_called_a_pdf(user: Any, repos: list[Repo], url: str) -> None:
    data = {"dataset": "ds", "repo": repos[0].project_id, "scanner": "tool", "judge": "offline"}
    answer = _client(user).post(url, {**data, "file": SimpleUploadedFile("report.pdf", PDF)})
    problem = _file_errors(answer.content.decode())
    assert "report.pdf" in problem and "PDF document" in problem
    assert "codec" not in problem and "0xbf" not in problem


def test_not_utf8_and_broken_json_are_told_without_python_internals(
    user: Any, repos: list[Repo]
) -> None:
    data = {"repo": repos[0].project_id, "scanner": "tool", "judge": "offline"}
    latin = SimpleUploadedFile("r.json", '[{"title": "caf\xe9"}]'.encode("latin-1"))
    problem = _file_errors(
        _client(user).post("/audit/submit/", {**data, "file": latin}).content.decode()
    )
    assert "not UTF-8" in problem and "codec" not in problem
    broken = SimpleUploadedFile("r.json", b'[{"title": "x",\n  "severity": }]')
    problem = _file_errors(
        _client(user).post("/audit/submit/", {**data, "file": broken}).content.decode()
    )
    assert "line 2, column" in problem and "char" not in problem


def test_an_empty_paper_names_the_file_and_the_field(client: Client) -> None:
    m = MembershipFactory()
    client.force_login(m.user)
    answer = client.post("/checklist/submit/", {"genuine": SimpleUploadedFile("paper.pdf", b"")})
    page = html.unescape(answer.content.decode())
    start = page.find('id="errors-genuine"')
    assert start != -1
    problem = page[start : page.find("</ul>", start)]
    assert "paper.pdf" in problem and "Genuine paper (G)" in problem and "empty" in problem
    assert "The submitted file is empty." not in page


def test_checklist_form_error_names_the_files_to_choose_again(client: Client) -> None:
    # A without T is refused; the browser empties every file input, so the page names the
    # files that were chosen (issue 26, item 14).
    m = MembershipFactory()
    client.force_login(m.user)
    tex = b"\\documentclass{article}\\begin{document}Hello\\end{document}"
    answer = client.post(
        "/checklist/submit/",
        {
            "genuine": SimpleUploadedFile("my-genuine.tex", tex),
            "adversarial": SimpleUploadedFile("my-adversarial.tex", tex),
        },
    )
    assert answer.status_code == 400
    page = html.unescape(answer.content.decode())
    start = page.find('id="choose-again"')
    assert start != -1
    box = page[start : page.find("</div>", start)]
    assert "Genuine paper (G): <code>my-genuine.tex</code>" in box
    assert "Adversarial paper (A): <code>my-adversarial.tex</code>" in box
    assert "Truth-adversarial" not in box
