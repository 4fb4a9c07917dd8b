"""Under the Content-Security-Policy (issue 23 row 14), the site's pages, the admin and the API
docs work: the browser reports no violation, and the scripts that the pages need still run."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from playwright.sync_api import expect

from benchmarks_app.bench.api import seed_leaderboards
from benchmarks_app.models import ResponseSubmission
from benchmarks_app.services.probes import probe_submission_submit, probe_suite_import
from benchmarks_app.services.runs import run_wait
from tests.benchmarks_app.probes.conftest import BAD, PROBES, jsonl, responses_jsonl
from tests.factories.common import PASSWORD, ChallengeFactory, StaffFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def _violations(page: Any) -> list[str]:
    """Console lines in which chromium reports a refused script, style, image or frame."""
    found: list[str] = []
    page.on(
        "console",
        lambda message: (
            found.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    return found


def _scored_probe_submission() -> int:
    """A probe submission scored for real (its report page draws every chart)."""

    def score() -> int:
        from django.db import connections

        try:
            probe_suite_import(name="mini", text=jsonl(PROBES), fmt="jsonl")
            run = probe_submission_submit(
                suite_name="mini", model_name="csp-model", text=responses_jsonl(BAD)
            )
            run_wait(run=run)
            return int(ResponseSubmission.objects.get(model_name="csp-model").pk)
        finally:
            connections.close_all()

    # In a thread of its own, like a worker: this one runs Playwright's event loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(score).result(timeout=120)


def test_pages_admin_and_api_docs_raise_no_violation(page: Any) -> None:
    seed_leaderboards(3)
    ChallengeFactory.create(slug="second", name="Second challenge")
    staff = StaffFactory.create(username="curator", is_superuser=True)
    violations = _violations(page)
    report = _scored_probe_submission()
    paths = ["/", "/audit/", "/probes/", "/accounts/login/", "/accounts/signup/"]
    paths.append(f"/probes/submissions/{report}/")  # its report: charts, bars, swatches
    for path in paths:
        answer = page.goto(path)
        assert answer is not None and answer.status == 200, path
        assert "script-src 'self'" in answer.headers["content-security-policy"]
    # The challenge picker submits itself on change: its script is a file now, not onchange=.
    page.goto("/checklist/?challenge=bench")
    page.select_option("select#challenge", "second")
    page.wait_for_url("**/checklist/?challenge=second")
    # Swagger UI starts from a script file (?script) and draws the operations.
    page.goto("/api/docs/")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
    expect(page.locator(".topbar .brand")).to_be_visible()
    # The admin, logged in through its own form.
    page.goto("/admin/login/")
    page.fill("#id_username", staff.username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()
    admin_pages = ["/admin/benchmarks_app/", "/admin/benchmarks_app/repo/"]
    admin_pages += ["/admin/benchmarks_app/repo/add/", "/admin/auth/user/"]
    for path in admin_pages:
        answer = page.goto(path)
        assert answer is not None and answer.status == 200, path
    assert violations == []
