"""The site in a real browser: log in and out, live run progress."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from benchmarks_app.models import RunPiece, RunStatus
from benchmarks_app.services.leases import piece_claim
from benchmarks_app.services.runs import (
    run_advance,
    run_finish,
    run_set_total,
    run_start,
)
from tests.factories.common import PASSWORD, RunFactory, UserFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def test_log_in_and_out(page, login, screenshot):
    user = UserFactory.create(username="ada")
    page.goto("/")
    expect(page.locator("h1")).to_have_text("Leaderboards")
    expect(page.locator("#board-checklist .empty")).to_contain_text("No team has been scored")
    screenshot("home-anonymous")
    login(user, PASSWORD)
    expect(page.locator(".account")).to_contain_text("ada")
    page.click("text=My submissions")
    expect(page.locator(".empty")).to_contain_text("You have not submitted anything yet")
    page.click("text=Log out")
    expect(page.locator(".account")).to_contain_text("Log in")


def test_wrong_password_is_refused_with_a_message(page):
    UserFactory.create(username="grace")
    page.goto("/accounts/login/")
    page.fill("#id_username", "grace")
    page.fill("#id_password", "not-it")
    page.click("form.form button[type=submit]")
    expect(page.locator("form.form")).to_contain_text("correct username and password")


def test_run_page_follows_progress_live(page, screenshot):
    run = RunFactory.create(status=RunStatus.QUEUED)
    page.goto(f"/runs/{run.pk}/")
    status = page.locator("#run-status [data-role=status]")
    expect(status).to_have_text("Queued")
    expect(page.locator("[data-role=live]")).to_be_visible()

    # A worker takes the run's (only) piece and starts it, as piece_process does.
    piece = piece_claim(piece_id=RunPiece.objects.create(run=run).pk)
    assert piece is not None and run_start(run.pk)
    claimed = run
    run_set_total(run=claimed, total=4)
    run_advance(run=claimed, by=2)
    expect(status).to_have_text("Running")
    expect(page.locator("[data-role=done]")).to_have_text("2")
    expect(page.locator("[data-role=total]")).to_have_text("4")
    expect(page.locator("[data-role=bar]")).to_have_attribute("style", re.compile("width: 50%"))
    screenshot("running")

    run_advance(run=claimed, by=2)
    run_finish(run=claimed)
    expect(status).to_have_text("Succeeded")
    expect(status).to_have_class(re.compile("succeeded"))
    expect(page.locator("[data-role=live]")).to_be_hidden()
    expect(page.locator("[data-role=percent]")).to_have_text("100")
    screenshot("finished")
