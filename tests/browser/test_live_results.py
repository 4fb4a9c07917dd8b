"""A run's page, where a form lands, follows the run to its results without a reload.

The audit upload lands on the audit run page and the probe upload on the probe submission
page; both show the run waiting in the queue, then, once a worker has scored it, the
results drawn by the server, in the same document (a marker set on ``window`` survives).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from benchmarks_app.models import EvaluationRun, RunStatus
from tests.factories.audit import RepoFactory, TruthFindingFactory
from tests.factories.common import PASSWORD, UserFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

FINDINGS = [
    {
        "title": "Reentrancy in Vault.withdraw drains funds",
        "description": "withdraw() sends ETH before updating balances, so it can be re-entered.",
        "severity": "high",
    },
    {"title": "Missing event on setFee", "description": "No event is emitted.", "severity": "low"},
]


def _mark_document(page: Any) -> None:
    page.evaluate("window.__sameDocument = true")


def _still_same_document(page: Any) -> bool:
    return bool(page.evaluate("window.__sameDocument === true"))


def test_audit_upload_page_follows_its_run_to_the_results(
    page: Any, login: Any, queued_tasks: Any, tmp_path: Any, screenshot: Any
) -> None:
    user = UserFactory.create(username="scanner-author")
    repo = RepoFactory.create(project_id="code4rena_vault_2025_01", name="Vault")
    TruthFindingFactory.create(
        repo=repo, finding_id="H-01", order=0, title="Reentrancy in Vault.withdraw"
    )
    TruthFindingFactory.create(repo=repo, finding_id="M-01", order=1, title="Stale oracle price")
    results = tmp_path / "results.json"
    results.write_text(json.dumps(FINDINGS))

    login(user, PASSWORD)
    page.goto("/audit/submit/")
    page.select_option("select[name=repo]", repo.project_id)
    page.fill("input[name=scanner]", "livetool")
    page.set_input_files("input[name=file]", str(results))
    page.click("#audit-submit-form button[type=submit]")
    page.wait_for_url(re.compile(r"/audit/runs/\d+/$"))
    run = EvaluationRun.objects.get(scanner__name="livetool")
    assert run.status == RunStatus.QUEUED
    status = page.locator("#run-status [data-role=status]")
    expect(status).to_have_text("Queued")
    expect(page.get_by_text("Not judged yet")).to_be_visible()
    flash = page.locator("main > ul.messages")
    expect(flash).to_contain_text("is queued")
    _mark_document(page)

    assert queued_tasks() == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.progress_total == 2

    # The badge, the counts and every repo's results follow, in the same document.
    expect(page.locator("#run-status [data-role=status]")).to_have_text("Succeeded", timeout=20_000)
    expect(page.locator("#run-status")).to_contain_text("2 / 2 truth findings judged")
    expect(page.get_by_text("Not judged yet")).to_have_count(0)
    rows = page.locator("#run-results table tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.filter(has_text="H-01")).to_have_count(1)
    expect(page.locator("#run-results dl.facts")).to_contain_text("Recall")
    expect(page.locator("[data-role=live]")).to_be_hidden()
    # "… is queued" no longer holds once the run has ended: the stale flash went with it.
    expect(page.get_by_text("is queued")).to_have_count(0)
    assert _still_same_document(page)
    screenshot("audit-results")


def test_probe_upload_page_follows_its_run_to_the_report(
    page: Any, login: Any, queued_tasks: Any, tmp_path: Any, screenshot: Any
) -> None:
    from benchmarks_app.services.probes import probe_suite_import
    from tests.browser.test_scenario import OUTPUTS, PROBES

    user = UserFactory.create(username="model-author")
    probe_suite_import(
        name="live-suite",
        text="\n".join(json.dumps(p) for p in PROBES),
        fmt="jsonl",
        source_name="live-suite.jsonl",
    )
    responses = tmp_path / "responses.jsonl"
    responses.write_text(
        "\n".join(json.dumps({"probe_id": k, "output": v}) for k, v in OUTPUTS.items())
    )

    login(user, PASSWORD)
    page.goto("/probes/submit/")
    page.select_option("select[name=suite]", "live-suite")
    page.fill("input[name=model]", "live-model")
    page.set_input_files("input[name=file]", str(responses))
    page.click("#probe-submit-form button[type=submit]")
    page.wait_for_url(re.compile(r"/probes/submissions/\d+/$"))
    run = EvaluationRun.objects.get(probe_submission__model_name="live-model")
    assert run.status == RunStatus.QUEUED
    expect(page.locator("#run-status [data-role=status]")).to_have_text("Queued")
    expect(page.get_by_text("reload", exact=False)).to_have_count(0)
    _mark_document(page)

    assert queued_tasks() == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED

    # The report replaces the notice: its scatter with one mark per case, and its downloads.
    scatter = page.locator("svg#probe-scatter")
    expect(scatter).to_be_visible(timeout=20_000)
    expect(scatter.locator(".case")).to_have_count(len(PROBES))
    expect(page.get_by_text("Download JSON report")).to_be_visible()
    expect(page.get_by_text("no scored run yet")).to_have_count(0)
    assert _still_same_document(page)
    screenshot("probe-report")


def test_checklist_submission_page_follows_its_assessment_to_the_scores(
    page: Any, login: Any, queued_tasks: Any, screenshot: Any
) -> None:
    from tests.browser.test_scenario import DEMO
    from tests.factories.common import ChallengeFactory, TeamFactory, join

    user = UserFactory.create(username="assessor")
    team = TeamFactory.create(challenge=ChallengeFactory.create(), name="Team Live")
    join(user, team)
    login(user, PASSWORD)
    page.goto("/checklist/submit/")
    page.set_input_files("input[name=genuine]", str(DEMO / "genuine.tex"))
    page.set_input_files("input[name=adversarial]", str(DEMO / "adversarial.tex"))
    page.set_input_files("input[name=truth]", str(DEMO / "truth.tex"))
    page.locator("form:has(input[name=genuine]) button[type=submit]").click()
    page.wait_for_url(re.compile(r"/checklist/submissions/\d+/$"))
    page.click("#start-assessment")
    page.wait_for_url(re.compile(r"/checklist/submissions/\d+/$"))
    run = EvaluationRun.objects.get(checklist_submission__team=team)
    expect(page.locator("#run-status [data-role=status]")).to_have_text("Queued")
    expect(page.locator("#follow-run")).to_be_visible()
    expect(page.get_by_text("Not scored yet.")).to_be_visible()
    _mark_document(page)

    assert queued_tasks() == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    expect(page.locator("#run-status [data-role=status]")).to_have_text("Succeeded", timeout=20_000)
    expect(page.locator("h1 .badge")).to_have_text("Scored")
    # The scores drawn by the server, where "Not scored yet." was.
    expect(page.locator("table.kv")).to_contain_text("C")
    expect(page.get_by_text("Not scored yet.")).to_have_count(0)
    expect(page.locator("#follow-run")).to_have_count(0)
    expect(page.locator("#run-status")).to_contain_text(
        f"{run.progress_total}/{run.progress_total} answers"
    )
    assert _still_same_document(page)
    screenshot("checklist-scores")
