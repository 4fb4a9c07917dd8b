"""The audit run page is bounded however large the run: repos are opened while their truth
findings fit the page, the others link to a page of their own, which pages its rows."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from benchmarks_app.models import Scanner
from benchmarks_app.selectors import audit as audit_selectors
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.runs import run_wait
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import repo_with_scan

pytestmark = pytest.mark.django_db


def _rows(html: str) -> int:
    return sum(
        len(re.findall(r"<tr>", body)) for body in re.findall(r"<tbody>(.*?)</tbody>", html, re.S)
    )


@pytest.fixture
def three_repos_run(monkeypatch: Any) -> Any:
    # Four truth findings a repo, a page of five rows: the first repo fits, the next does not.
    monkeypatch.setattr(audit_selectors, "RUN_PAGE_ROWS", 5)
    repos = []
    for _ in range(3):
        repo, _result = repo_with_scan(
            truths=[f"Issue {i} in the vault" for i in range(4)],
            findings=["Issue 0 in the vault"],
            scanner="bigtool",
        )
        repo.is_public = True
        repo.save()
        repos.append(repo)
    publish_dataset(*repos)
    run = run_wait(run=audit_run_create(scanner=Scanner.objects.get(name="bigtool")))
    assert run.status == "succeeded"
    return run, sorted(r.project_id for r in repos)


def test_the_run_page_holds_at_most_a_page_of_rows(three_repos_run: Any) -> None:
    run, names = three_repos_run
    html = Client().get(reverse("audit:run", args=[run.pk])).content.decode()
    assert _rows(html) == 4  # the first repo's four; the others would pass the bound of five
    closed = re.findall(r'data-role="closed"><a href="\?repo=([^"]+)"', html)
    assert closed == names[1:]
    # Every repo still shows its figures.
    assert all(f'data-repo="{name}"' in html for name in names)


def test_a_repo_of_its_own_pages_its_rows(three_repos_run: Any, monkeypatch: Any) -> None:
    run, names = three_repos_run
    monkeypatch.setattr(audit_selectors, "RUN_PAGE_ROWS", 3)
    url = reverse("audit:run", args=[run.pk])
    first = Client().get(url, {"repo": names[1]}).content.decode()
    assert _rows(first) == 3 and "page 1 of 2" in first
    assert f'data-repo="{names[0]}"' not in first
    second = Client().get(url, {"repo": names[1], "page": "2"}).content.decode()
    assert _rows(second) == 1 and "page 2 of 2" in second
    assert Client().get(url, {"repo": "no-such-repo"}).status_code == 404


def test_the_verdict_count_says_what_it_counts(three_repos_run: Any) -> None:
    # "Votes 12" read as a score; the column now says it counts the judge's verdicts, how
    # many a batch gives and that the outcome is their majority (issue 37 item 8).
    run, _names = three_repos_run
    html = Client().get(reverse("audit:run", args=[run.pk])).content.decode()
    assert ">Votes<" not in html
    header = re.search(r'<th class="num" title="([^"]+)">Verdicts</th>', html)
    assert header is not None and "one per vote" in header.group(1)
    note = re.search(r'data-role="verdicts-note">([^<]+)<', html)
    assert note is not None and "the outcome is their majority" in note.group(1)
