"""Issue 36 item 3: a hidden phase's entrants cannot be confirmed by submitting under their
names. A bad upload answers the same under a hidden entrant's name as under a free one (the
name is judged only once the upload is good, which spends an entry), and the look-alike
check never names a scanner the submitter may not see."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from benchmarks_app.models import Repo, Scanner
from benchmarks_app.models.audit import DatasetRelease
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.phases import phase_create
from benchmarks_app.services.runs import run_wait
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import ScanFindingFactory, ScannerFactory, ScanResultFactory
from tests.factories.audit import repo_with_scan as _repo_with_scan
from tests.factories.common import UserFactory

pytestmark = pytest.mark.django_db


def _hidden_phase(target: Any) -> Any:
    now = timezone.now()
    return phase_create(
        target=target,
        name="Final",
        slug="final",
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=5),
        is_hidden=True,
    )


@pytest.fixture
def hidden_scanner(db: Any) -> Repo:
    repo, _ = _repo_with_scan(truths=["Reentrancy"], findings=["Reentrancy"], scanner="public-one")
    publish_dataset(repo)
    release = DatasetRelease.objects.get(number=1)
    phase = _hidden_phase(release)
    result = ScanResultFactory(
        repo=repo, scanner=ScannerFactory(name="hidden-scan", owner=UserFactory.create())
    )
    ScanFindingFactory(scan_result=result, index=0, title="Reentrancy")
    run_wait(
        run=audit_run_create(
            scanner=cast(Scanner, result.scanner), judge="offline", release=release, phase=phase
        )
    )
    return cast(Repo, repo)


def _post(user: Any, repo: Repo, scanner: str, body: Any) -> Any:
    api = APIClient()
    api.force_authenticate(user)
    return api.post(
        f"/api/audit/repos/{repo.project_id}/results/?scanner={scanner}", body, format="json"
    )


def _answer(response: Any, name: str) -> tuple[int, str]:
    return response.status_code, response.content.decode().replace(name, "NAME")


@pytest.mark.parametrize(
    "bad_body",
    [{"findings": "not a list"}, [{"severity": "high"}], []],
    ids=["shape", "untitled", "empty"],
)
def test_a_bad_upload_answers_the_same_under_a_hidden_name_and_a_free_one(
    hidden_scanner: Repo, bad_body: Any
) -> None:
    prober = UserFactory.create()
    hidden = _answer(_post(prober, hidden_scanner, "hidden-scan", bad_body), "hidden-scan")
    free = _answer(_post(prober, hidden_scanner, "hidden-sca9", bad_body), "hidden-sca9")
    assert hidden == free and hidden[0] == 400


def test_the_look_alike_check_names_only_scanners_the_submitter_may_see(
    hidden_scanner: Repo,
) -> None:
    prober = UserFactory.create()
    body = [{"title": "Reentrancy", "severity": "high"}]
    hidden = _post(prober, hidden_scanner, "Hidden-Scan", body)
    assert hidden.status_code == 400
    assert "hidden-scan" not in hidden.content.decode()
    # A scanner everybody may see is still named, to help the honest typo.
    public = _post(prober, hidden_scanner, "Public-One", body)
    assert "'public-one'" in public.content.decode()


def test_a_good_upload_under_a_hidden_name_is_refused_without_saying_whose(
    hidden_scanner: Repo,
) -> None:
    answer = _post(
        UserFactory.create(), hidden_scanner, "hidden-scan", [{"title": "X", "severity": "high"}]
    )
    assert answer.status_code == 403
    text = answer.content.decode()
    assert "not available" in text and "another user" not in text
