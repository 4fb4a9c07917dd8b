"""No page or API response shows a hidden repo's truth titles or descriptions to anonymous
users or participants: every URL pattern of the site is requested with real ids."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any, cast

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from benchmarks_app.models import EvaluationRun, Repo, Scanner, TruthFinding
from benchmarks_app.services.audit import audit_board_refresh_for_run, audit_run_create
from benchmarks_app.services.runs import run_wait
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import (
    RepoFactory,
    ScanFindingFactory,
    ScannerFactory,
    ScanResultFactory,
    TruthFindingFactory,
)

pytestmark = pytest.mark.django_db

HIDDEN = ["Hidden drain through flashLoan callback QZX", "HIDDEN-DESCRIPTION-QZX gives it away"]
PUBLIC_TITLE = "Public oracle staleness PLK"
_CONVERTER = re.compile(r"<(?:(?P<kind>\w+):)?(?P<name>\w+)>")


def patterns(resolvers: list[Any], prefix: str = "") -> Iterator[str]:
    for item in resolvers:
        if isinstance(item, URLResolver):
            yield from patterns(item.url_patterns, prefix + str(item.pattern))
        elif isinstance(item, URLPattern):
            yield prefix + str(item.pattern)


@pytest.fixture
def site(db: Any) -> dict[str, Any]:
    hidden = cast(Repo, RepoFactory(project_id="code4rena_hidden_2025_01", is_public=False))
    public = cast(Repo, RepoFactory(project_id="code4rena_open_2025_01", is_public=True))
    truth = cast(
        TruthFinding,
        TruthFindingFactory(repo=hidden, title=HIDDEN[0], description=HIDDEN[1], order=0),
    )
    TruthFindingFactory(repo=hidden, title="Second hidden issue QZX", order=1, description="")
    TruthFindingFactory(repo=public, title=PUBLIC_TITLE, order=0)
    scanner = cast(Scanner, ScannerFactory(name="walker"))
    for repo in (hidden, public):
        result = ScanResultFactory(scanner=scanner, repo=repo)
        ScanFindingFactory(scan_result=result, index=0, title="Drain via flash loan callback")
    publish_dataset(hidden, public, slug="walk")
    run = run_wait(run=audit_run_create(scanner=scanner, judge="offline"))
    audit_board_refresh_for_run(run=run)
    assert run.status == "succeeded"
    return {"run": run, "repo": hidden, "truth": truth, "scanner": scanner}


def urls(site: dict[str, Any]) -> list[str]:
    run: EvaluationRun = site["run"]
    ints = [run.pk, site["repo"].pk, site["truth"].pk, site["scanner"].pk]
    texts = [site["scanner"].name, site["repo"].project_id, "walk", str(site["truth"].pk)]
    out = set()
    for pattern in patterns(get_resolver().url_patterns):
        if pattern.startswith("^") or "(?P" in pattern:
            continue  # regex patterns (the admin's app index, static files): no ids to fill
        names = _CONVERTER.findall(pattern)
        pools = [ints if kind in ("int",) else texts for kind, _ in names]
        for values in itertools.islice(itertools.product(*pools), 16):
            url = pattern
            for value in values:
                url = _CONVERTER.sub(str(value), url, count=1)
            out.add("/" + url)
    extra = [
        "/audit/?dataset=walk&release=1&judge=offline",
        "/audit/?format=json",
        "/audit/?format=csv",
        f"/audit/scanners/walker/?run={run.pk}",
        f"/audit/scanners/walker/?run={run.pk}&format=json",
        f"/audit/scanners/walker/?run={run.pk}&format=md",
        "/audit/scanners/walker/?format=md",
        f"/api/audit/reports/walker/?run={run.pk}",
        "/api/audit/leaderboard/?dataset=walk",
        f"/runs/{run.pk}/status/",
        f"/api/runs/{run.pk}/",
    ]
    return sorted(out | set(extra))


def leaks(body: str) -> list[str]:
    return [text for text in (*HIDDEN, "Second hidden issue QZX") if text in body]


def test_every_url_hides_hidden_truth_from_anonymous_and_participants(
    site: dict[str, Any],
) -> None:
    participant = get_user_model().objects.create_user("plain", password="pw")
    clients = {"anonymous": Client(), "participant": Client()}
    clients["participant"].force_login(participant)
    walked = urls(site)
    assert len(walked) > 200
    seen_public = False
    for who, client in clients.items():
        for url in walked:
            response = client.get(url)
            body = (
                b"".join(response).decode("utf-8", errors="replace")
                if getattr(response, "streaming", False)
                else response.content.decode("utf-8", errors="replace")
            )
            assert response.status_code < 500, (who, url, response.status_code)
            assert not leaks(body), (who, url, leaks(body))
            seen_public = seen_public or PUBLIC_TITLE in body
    # The walk did reach pages that show truth: public repos' titles are there.
    assert seen_public


def test_staff_see_hidden_truth(site: dict[str, Any]) -> None:
    staff = get_user_model().objects.create_user("boss", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    repo = client.get(f"/api/audit/repos/{site['repo'].pk}/").json()
    assert {f["title"] for f in repo["truth_findings"]} >= {HIDDEN[0]}
    assert HIDDEN[1] in {f["description"] for f in repo["truth_findings"]}
    assert HIDDEN[0] in client.get(f"/audit/runs/{site['run'].pk}/").content.decode()


def test_participants_see_names_sizes_and_severity_counts(site: dict[str, Any]) -> None:
    repo = Client().get(f"/api/audit/repos/{site['repo'].pk}/").json()
    assert repo["project_id"] == "code4rena_hidden_2025_01" and repo["truth_count"] == 2
    assert repo["truth_severity_counts"]["high"] == 2
    assert [(f["title"], f["description"]) for f in repo["truth_findings"]] == [(None, None)] * 2
