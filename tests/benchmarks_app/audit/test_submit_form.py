"""The web form for a scanner's results: the API's service and messages, the scanner
ownership rule on both, nothing half-imported on failure."""

from __future__ import annotations

import html
import json
from typing import Any, cast

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import (
    AuditRepoResult,
    EvaluationRun,
    Repo,
    RunStatus,
    ScanFinding,
    Scanner,
    ScanResult,
)
from benchmarks_app.services.uploads import upload_too_large
from tests.factories.audit import RepoFactory, TruthFindingFactory, repo_with_scan

pytestmark = pytest.mark.django_db

SUBMIT = "/audit/submit/"
FINDINGS = [
    {
        "title": "Reentrancy in Vault.withdraw drains funds",
        "description": "withdraw() in Vault.sol sends ETH before updating balances.",
        "severity": "critical",
        "vulnerability_type": "reentrancy",
    },
    {"title": "Missing event on setFee", "description": "No event.", "severity": "info"},
]


@pytest.fixture
def other(db: Any) -> Any:
    return get_user_model().objects.create_user("rival", password="pw")


@pytest.fixture
def repo(db: Any) -> Repo:
    repo = cast(Repo, RepoFactory(project_id="code4rena_vault_2025_01", name="Vault"))
    TruthFindingFactory(repo=repo, finding_id="H-01", order=0, title="Reentrancy in Vault.withdraw")
    TruthFindingFactory(repo=repo, finding_id="M-01", order=1, title="Oracle price is stale")
    return repo


def login(client: Any, user: Any) -> Any:
    client.force_login(user)
    return client


def upload(content: Any, name: str = "results.json") -> SimpleUploadedFile:
    raw = content if isinstance(content, bytes) else json.dumps(content).encode()
    return SimpleUploadedFile(name, raw, content_type="application/json")


def counts() -> tuple[int, int, int, int]:
    return (
        Scanner.objects.count(),
        ScanResult.objects.count(),
        ScanFinding.objects.count(),
        EvaluationRun.objects.count(),
    )


def form_post(client: Any, target: Repo, content: Any, **fields: Any) -> Any:
    data = {"repo": target.project_id, "scanner": "mytool", "judge": "offline", **fields}
    if "file" not in fields:
        data["file"] = upload(content)
    return client.post(SUBMIT, data)


def page_errors(answer: Any, field: str) -> list[str]:
    """The messages shown under one field, read from the rendered page."""
    page = answer.content.decode()
    marker = f'id="errors-{field}"'
    if marker not in page:
        return []
    block = page[page.index(marker) : page.index("</ul>", page.index(marker))]
    return [html.unescape(li.split("</li>")[0]) for li in block.split("<li>")[1:]]


def api_answer(
    user: Any,
    repo: Repo,
    *,
    multipart: dict[str, Any] | None = None,
    body: Any = None,
    query: str = "?scanner=mytool",
) -> Any:
    api = APIClient()
    api.force_authenticate(user)
    url = reverse("api:audit-submit", args=[repo.project_id])
    if multipart is not None:
        return api.post(url, multipart, format="multipart")
    return api.post(url + query, json.dumps(body), content_type="application/json")


def api_reasons(answer: Any, field: str) -> list[str]:
    return [e["reason"] for e in answer.json()["errors"] if e["field"] == field]


# --- pages and access -----------------------------------------------------------------------


def test_route_and_links_from_the_leaderboard(client: Any, repo: Repo) -> None:
    assert reverse("audit:submit") == SUBMIT
    dataset_form = reverse("audit:submit-dataset")
    page = client.get(reverse("audit:leaderboard")).content.decode()
    empty = page[page.index('class="empty"') :]
    assert f'href="{dataset_form}"' in empty[: empty.index("</div>")]  # the empty state's action
    assert f'id="submit-scan" href="{dataset_form}"' in page
    assert f'href="{SUBMIT}"' in page  # one repo at a time stays one click away


def test_anonymous_is_sent_to_login_and_nothing_is_stored(client: Any, repo: Repo) -> None:
    answer = client.get(SUBMIT)
    assert answer.status_code == 302
    assert answer["Location"] == f"{reverse('login')}?next={SUBMIT}"
    posted = form_post(client, repo, FINDINGS)
    assert posted.status_code == 302 and posted["Location"].startswith(reverse("login"))
    assert counts() == (0, 0, 0, 0)


def test_form_lists_repos_and_offers_openai_only_when_configured(
    client: Any, user: Any, repo: Repo, settings: Any
) -> None:
    login(client, user)
    page = client.get(SUBMIT, {"repo": repo.project_id}).content.decode()
    assert f'<option value="{repo.project_id}" selected>' in page
    assert 'enctype="multipart/form-data"' in page
    assert '<option value="offline" selected>' in page and 'value="openai"' not in page
    settings.OPENAI_API_KEY = "sk-test"
    # A key alone is not enough: participants may spend it only where the site opts in.
    assert 'value="openai"' not in client.get(SUBMIT).content.decode()
    settings.AUDIT_PARTICIPANT_OPENAI = True
    assert 'value="openai"' in client.get(SUBMIT).content.decode()


def test_form_without_repos_says_what_to_do(client: Any, user: Any) -> None:
    page = login(client, user).get(SUBMIT).content.decode()
    assert 'id="no-repos"' in page and "import_audit" in page
    assert 'id="audit-submit-form"' not in page


# --- a good upload --------------------------------------------------------------------------


def test_valid_upload_is_stored_evaluated_and_redirects_to_the_run(
    client: Any, user: Any, repo: Repo, django_capture_on_commit_callbacks: Any
) -> None:
    login(client, user)
    body = {"project": repo.project_id, "findings": FINDINGS, "token_usage": {"total": 1234}}
    with django_capture_on_commit_callbacks(execute=True):
        answer = form_post(client, repo, body, scanner="  mytool ")
    run = EvaluationRun.objects.get()
    assert answer.status_code == 302
    assert answer["Location"] == reverse("audit:run", args=[run.pk]) == f"/audit/runs/{run.pk}/"

    result = ScanResult.objects.get()
    assert (result.scanner.name, result.scanner.owner, result.repo) == ("mytool", user, repo)
    assert (result.source_name, result.raw_metadata["token_usage"]) == (
        "results.json",
        {"total": 1234},
    )
    assert list(result.findings.order_by("index").values_list("severity", flat=True)) == [
        "High",
        "Info",
    ]
    run.refresh_from_db()
    assert (run.status, run.judge, run.created_by, run.scanner) == (
        RunStatus.SUCCEEDED,
        "offline",
        user,
        result.scanner,
    )
    assert list(run.repos.all()) == [repo]
    assert run.progress_done == run.progress_total == 2
    metrics = AuditRepoResult.objects.get(run=run).metrics
    assert (metrics["truth"], metrics["scan"], metrics["qa"]) == (2, 2, 1)

    page = client.get(answer["Location"]).content.decode()
    assert f"evaluation run #{run.pk} is queued" in page
    assert "Reentrancy in Vault.withdraw" in page and 'class="badge succeeded"' in page


def test_the_owner_can_replace_results_and_earlier_runs_stay(
    client: Any, user: Any, repo: Repo
) -> None:
    login(client, user)
    assert form_post(client, repo, FINDINGS).status_code == 302
    assert form_post(client, repo, FINDINGS[:1]).status_code == 302
    assert EvaluationRun.objects.count() == 2
    # The replacement is the current version; the first stays for the run that judged it.
    assert ScanResult.objects.current().get().findings.count() == 1
    assert ScanResult.objects.get(is_current=False).findings.count() == 2


def test_api_accepts_the_same_file_as_multipart(user: Any, repo: Repo) -> None:
    answer = api_answer(
        user, repo, multipart={"scanner": "mytool", "judge": "offline", "file": upload(FINDINGS)}
    )
    assert answer.status_code == 202, answer.content
    assert answer.json()["findings"] == 2 and answer.json()["scanner"] == "mytool"
    assert EvaluationRun.objects.get().pk == answer.json()["run"]


# --- bad files: named problem, same words as the API, nothing stored ------------------------

BAD_FILES = [
    pytest.param(b'{"findings": [', "not valid JSON: ", id="malformed"),
    pytest.param(b"", "empty file", id="empty"),
    pytest.param(
        {"project": "x"}, "findings: missing; expected a list of findings", id="no-findings"
    ),
    pytest.param(
        {"findings": "x"}, "findings: expected a list of findings, got a string", id="findings-str"
    ),
    pytest.param("just text", "expected a list of findings or {project, findings", id="string"),
    pytest.param([{"title": "x", "severity": "urgent"}], "finding 1.severity: unknown", id="sev"),
    pytest.param([FINDINGS[0], 7], "finding 2: expected an object", id="not-object"),
    pytest.param(
        {"project": "code4rena_other_2025_02", "findings": FINDINGS},
        "the results are for project 'code4rena_other_2025_02', not for the chosen repo "
        "'code4rena_vault_2025_01'",
        id="other-repo",
    ),
]


@pytest.mark.parametrize(("content", "problem"), BAD_FILES)
def test_bad_file_names_file_and_problem_like_the_api_and_stores_nothing(
    client: Any, user: Any, repo: Repo, content: Any, problem: str
) -> None:
    login(client, user)
    answer = form_post(client, repo, content)

    assert answer.status_code == 400
    assert counts() == (0, 0, 0, 0)
    errors = page_errors(answer, "file")
    assert len(errors) == 1 and errors[0].startswith(f"results.json: {problem}"), errors
    assert "Nothing was stored" in answer.content.decode()
    assert not page_errors(answer, "scanner") and not page_errors(answer, "repo")

    api = api_answer(user, repo, multipart={"scanner": "mytool", "file": upload(content)})
    assert api.status_code == 400 and api_reasons(api, "file") == errors
    if isinstance(content, bytes):
        return
    # Sent as a JSON body instead of a file, the API names the same problem (under the
    # field "findings", which the message then does not repeat).
    body = api_answer(user, repo, body=content)
    assert body.status_code == 400
    assert [f"results.json: findings: {r}" for r in api_reasons(body, "findings")] == [
        e if e.startswith("results.json: findings: ") else e.replace(": ", ": findings: ", 1)
        for e in errors
    ]
    assert counts() == (0, 0, 0, 0)


def test_oversized_file_is_refused_with_the_shared_message(
    client: Any, user: Any, repo: Repo, settings: Any
) -> None:
    settings.UPLOAD_MAX_MB = 1
    big = json.dumps(FINDINGS).encode() + b" " * (1024 * 1024)
    answer = form_post(login(client, user), repo, None, file=upload(big))
    expected = upload_too_large(len(big), "results.json")
    assert expected and page_errors(answer, "file") == [expected]
    api = api_answer(user, repo, multipart={"scanner": "mytool", "file": upload(big)})
    assert api_reasons(api, "file") == [expected]
    assert counts() == (0, 0, 0, 0)


def test_required_fields_and_stale_choices(
    client: Any, user: Any, repo: Repo, settings: Any
) -> None:
    login(client, user)
    answer = client.post(SUBMIT, {"repo": repo.project_id})
    assert answer.status_code == 400
    assert set(answer.context["form"].errors) == {"scanner", "file"}

    gone = form_post(client, repo, FINDINGS, repo="code4rena_gone_2024_01")
    assert page_errors(gone, "repo") == ["no repo with project id 'code4rena_gone_2024_01'"]

    # openai offered on a page rendered before the key was removed: the service's words.
    stale = form_post(client, repo, FINDINGS, judge="openai")
    message = "openai needs OPENAI_API_KEY (or OPENAI_BASE_URL) to be set"
    assert page_errors(stale, "judge") == [message]
    api = api_answer(user, repo, body=FINDINGS, query="?scanner=mytool&judge=openai")
    assert api.status_code == 400 and api_reasons(api, "judge") == [message]
    assert counts() == (0, 0, 0, 0)


def test_replay_judge_and_bad_scanner_names_are_refused_by_form_and_api(
    client: Any, user: Any, repo: Repo, tmp_path: Any, settings: Any
) -> None:
    # Six refusals in a row from one participant: past UPLOAD_REFUSALS_PER_10_MIN the sixth
    # would be a 429 for the burst, not the field's message this test compares.
    settings.UPLOAD_REFUSALS_PER_10_MIN = 100
    login(client, user)
    # A replay judge reads a folder on the server: not for participants.
    replay = form_post(client, repo, FINDINGS, judge=f"replay:{tmp_path}")
    assert page_errors(replay, "judge") == [f"'replay:{tmp_path}' is not one of offline, openai"]
    api = api_answer(user, repo, body=FINDINGS, query=f"?scanner=mytool&judge=replay:{tmp_path}")
    assert api_reasons(api, "judge") == page_errors(replay, "judge")

    slashed = form_post(client, repo, FINDINGS, scanner="a/b")
    (message,) = page_errors(slashed, "scanner")
    assert message.startswith("'a/b' may only hold letters, digits")
    api = api_answer(user, repo, body=FINDINGS, query="?scanner=a/b")
    assert api.status_code == 400 and api_reasons(api, "scanner") == [message]

    long_name = "x" * 101
    too_long = form_post(client, repo, FINDINGS, scanner=long_name)
    assert page_errors(too_long, "scanner") == ["at most 100 characters, got 101"]
    api = api_answer(user, repo, body=FINDINGS, query=f"?scanner={long_name}")
    assert api_reasons(api, "scanner") == ["at most 100 characters, got 101"]
    assert counts() == (0, 0, 0, 0)


# --- scanner ownership ----------------------------------------------------------------------


def test_nobody_overwrites_another_users_scanner_by_form_or_api(
    client: Any, user: Any, other: Any, repo: Repo
) -> None:
    assert form_post(login(client, user), repo, FINDINGS).status_code == 302
    before = counts()
    titles = list(ScanFinding.objects.values_list("title", flat=True))

    rival = form_post(login(client, other), repo, FINDINGS[:1])
    message = "'mytool' is not available; submit under a name of your own"
    assert rival.status_code == 400 and page_errors(rival, "scanner") == [message]
    assert not page_errors(rival, "file")

    for answer in (
        api_answer(other, repo, body=FINDINGS[:1]),
        api_answer(other, repo, multipart={"scanner": "mytool", "file": upload(FINDINGS[:1])}),
    ):
        assert answer.status_code == 403
        assert api_reasons(answer, "scanner") == [message]

    assert counts() == before
    assert list(ScanFinding.objects.values_list("title", flat=True)) == titles
    assert Scanner.objects.get(name="mytool").owner == user


def test_curated_scanners_are_written_by_staff_only(
    client: Any, user: Any, staff: Any, repo: Repo
) -> None:
    # Imported by the maintainers: no owner. A participant must not claim or replace it.
    _, curated = repo_with_scan(truths=["t"], findings=["f0", "f1", "f2"], scanner="baseline")
    curated_repo = curated.repo
    before = counts()
    refused = form_post(login(client, user), curated_repo, FINDINGS, scanner="baseline")
    message = (
        "'baseline' holds results imported by the site's curators; submit under a name of your own"
    )
    assert page_errors(refused, "scanner") == [message]
    api = api_answer(user, curated_repo, body=FINDINGS, query="?scanner=baseline")
    assert api.status_code == 403 and api_reasons(api, "scanner") == [message]
    assert counts() == before
    assert Scanner.objects.get(name="baseline").owner is None

    # Staff may update it; it stays a curated scanner.
    done = form_post(login(client, staff), curated_repo, FINDINGS, scanner="baseline")
    assert done.status_code == 302
    assert ScanResult.objects.current().get(scanner__name="baseline").findings.count() == 2
    assert Scanner.objects.get(name="baseline").owner is None


def test_a_curated_baseline_is_refused_as_the_baseline_its_badge_shows(
    client: Any, user: Any, repo: Repo
) -> None:
    # The refusal says what the boards show: a baseline badge, or the curators' import.
    _, curated = repo_with_scan(truths=["t"], findings=["f0"], scanner="baseline")
    Scanner.objects.filter(name="baseline").update(is_baseline=True)
    refused = form_post(login(client, user), curated.repo, FINDINGS, scanner="baseline")
    message = (
        "'baseline' is a baseline kept by the site's curators; submit under a name of your own"
    )
    assert page_errors(refused, "scanner") == [message]
    page = client.get(reverse("audit:scanner", args=["baseline"])).content.decode()
    assert 'id="baseline-badge"' in page
