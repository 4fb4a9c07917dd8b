"""A challenge's hidden final phase, end to end in a real browser (issue 13's done-when).

A participant opts in to the run-end e-mail and registers a webhook on the settings page,
submits in the development phase and sees the public board; submits in the hidden final phase
and sees only their own score (an anonymous visitor sees nothing); the maintainer reveals the
phase in the admin and the board appears. The participant's e-mail arrives (locmem backend) and
a local receiver gets the webhook, checking its HMAC signature with the secret the page showed.
"""

from __future__ import annotations

import importlib
import json
import re
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from benchmarks_app.models import EvaluationRun, PaperKind, Phase, RunStatus
from benchmarks_app.services.checklist import checklist_submission_assess
from benchmarks_app.services.checklist.papers import PaperUpload
from benchmarks_app.services.checklist.submissions import checklist_submission_create
from scoring.webhooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify_signature
from tests.factories.common import (
    PASSWORD,
    ChallengeFactory,
    StaffFactory,
    TeamFactory,
    UserFactory,
    join,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

DEMO = Path(__file__).resolve().parents[2] / "benchmarks_app" / "sample_data" / "checklist" / "demo"
NOTIFICATION_TASKS = "benchmarks_app.tasks.notifications."


class _Receiver:
    def __init__(self) -> None:
        self.secret = ""
        self.received: list[tuple[dict[str, Any], bool]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                ok = verify_signature(
                    receiver.secret,
                    self.headers.get(TIMESTAMP_HEADER, ""),
                    body,
                    self.headers.get(SIGNATURE_HEADER, ""),
                )
                receiver.received.append((json.loads(body), ok))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/eval"


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    state = _Receiver()
    thread = threading.Thread(target=state.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.server.shutdown()
        state.server.server_close()
        thread.join(timeout=5)


def _run_notification_tasks() -> int:
    """Play the worker for the notification tasks waiting in django-q2's ORM queue."""
    from django_q.models import OrmQ

    ran = 0
    for _ in range(10):  # a dispatch task enqueues the e-mail and delivery tasks
        pending = [(q, q.task) for q in OrmQ.objects.all()]
        todo = [(q, t) for q, t in pending if str(t["func"]).startswith(NOTIFICATION_TASKS)]
        if not todo:
            return ran
        for q, task in todo:
            module, name = str(task["func"]).rsplit(".", 1)
            getattr(importlib.import_module(module), name)(*task["args"], **task["kwargs"])
            q.delete()
            ran += 1
    return ran


def _rival_entry(team: Any, user: Any) -> EvaluationRun:
    submission = checklist_submission_create(
        team=team,
        user=user,
        files={PaperKind.GENUINE: PaperUpload("genuine.tex", (DEMO / "genuine.tex").read_bytes())},
        label="rival entry",
    )
    return checklist_submission_assess(submission=submission, user=user)


def _submit_triplet(page: Any, label: str) -> None:
    page.goto("/checklist/submit/")
    page.set_input_files("input[name=genuine]", str(DEMO / "genuine.tex"))
    page.set_input_files("input[name=adversarial]", str(DEMO / "adversarial.tex"))
    page.set_input_files("input[name=truth]", str(DEMO / "truth.tex"))
    page.fill("input[name=label]", label)
    page.fill("input[name=method_name]", "Lovelace checker")
    page.locator("form:has(input[name=genuine]) button[type=submit]").click()
    page.wait_for_url(re.compile(r"/checklist/submissions/\d+/$"))
    page.click("#start-assessment")


def test_hidden_final_phase_from_submission_to_reveal_with_email_and_webhook(
    page, browser, live_server, login, screenshot, queued_tasks, receiver, mailoutbox
):
    now = timezone.now()
    challenge = ChallengeFactory.create(slug="phased", name="Phased challenge")
    ada = UserFactory.create(username="ada", email="ada@example.org")
    mine = TeamFactory.create(challenge=challenge, name="Team Lovelace")
    join(ada, mine)
    bob = UserFactory.create(username="bob", email="bob@example.org")
    rival = TeamFactory.create(challenge=challenge, name="Team Babbage")
    join(bob, rival)
    dev = Phase.objects.create(
        benchmark="checklist",
        challenge=challenge,
        name="Development",
        slug="dev",
        starts_at=now - timedelta(days=2),
    )
    board = "/checklist/?challenge=phased"
    rows = page.locator("table tbody tr")

    # Opt in to the e-mail and register a webhook; the secret is shown once.
    login(ada, PASSWORD)
    page.goto("/accounts/settings/")
    page.check("#notification-form input[type=checkbox]")
    page.locator("#notification-form button[type=submit]").click()
    page.fill("#webhook-form input[name=url]", receiver.url)
    page.locator("#webhook-form button[type=submit]").click()
    receiver.secret = page.locator("#webhook-secret-value").inner_text().strip()
    assert receiver.secret
    screenshot("1-settings")

    # Development: both teams' entries are on the public board.
    _submit_triplet(page, "dev entry")
    _rival_entry(rival, bob)
    assert len(queued_tasks()) == 2
    page.goto(f"{board}&phase=dev")
    expect(rows.filter(has_text="Team Lovelace")).to_have_count(1)
    expect(rows.filter(has_text="Team Babbage")).to_have_count(1)
    expect(page.locator("#board-hidden")).to_have_count(0)
    screenshot("2-dev-board")

    # The hidden final phase opens as development ends.
    Phase.objects.filter(pk=dev.pk).update(ends_at=now - timedelta(minutes=1))
    final = Phase.objects.create(
        benchmark="checklist",
        challenge=challenge,
        name="Final",
        slug="final",
        starts_at=now - timedelta(minutes=1),
        is_hidden=True,
    )
    _submit_triplet(page, "final entry")
    _rival_entry(rival, bob)
    final_runs = queued_tasks()
    assert len(final_runs) == 2
    assert set(EvaluationRun.objects.filter(pk__in=final_runs).values_list("phase", flat=True)) == {
        final.pk
    }

    # The participant sees only their own score on the final board, without a rank.
    page.goto(f"{board}&phase=final")
    expect(page.locator("#board-hidden")).to_be_visible()
    expect(rows.filter(has_text="Team Lovelace")).to_have_count(1)
    expect(rows.filter(has_text="Team Babbage")).to_have_count(0)
    screenshot("3-final-own-score")

    # An anonymous visitor sees no row at all.
    visitor = browser.new_context(base_url=live_server.url)
    anonymous = visitor.new_page()
    anonymous.goto(f"{board}&phase=final")
    expect(anonymous.locator("#board-hidden")).to_be_visible()
    expect(anonymous.locator("table tbody tr", has_text="Team")).to_have_count(0)

    # The maintainer reveals the final board in the admin.
    maintainer = StaffFactory.create(username="maintainer", is_superuser=True)
    staff_context = browser.new_context(base_url=live_server.url)
    admin = staff_context.new_page()
    admin.goto("/admin/login/")
    admin.fill("#id_username", maintainer.username)
    admin.fill("#id_password", PASSWORD)
    admin.click("input[type=submit]")
    admin.goto("/admin/benchmarks_app/phase/")
    admin.locator(f"input[name=_selected_action][value='{final.pk}']").check()
    admin.select_option("select[name=action]", "reveal_board")
    admin.click("button[name=index]")
    expect(admin.locator(".messagelist")).to_contain_text("Revealed")
    final.refresh_from_db()
    assert final.revealed_at is not None
    staff_context.close()

    anonymous.goto(f"{board}&phase=final")
    expect(anonymous.locator("#board-hidden")).to_have_count(0)
    public_rows = anonymous.locator("table tbody tr")
    expect(public_rows.filter(has_text="Team Lovelace")).to_have_count(1)
    expect(public_rows.filter(has_text="Team Babbage")).to_have_count(1)
    expect(public_rows.filter(has_text="Lovelace checker")).to_have_count(1)
    visitor.close()
    page.goto(f"{board}&phase=final")
    expect(rows.filter(has_text="Team Babbage")).to_have_count(1)
    screenshot("4-final-revealed")

    # Ada's two runs ended: one e-mail each, and one signed webhook delivery each.
    assert _run_notification_tasks() >= 4
    own_runs = EvaluationRun.objects.filter(created_by=ada).order_by("pk")
    assert [r.status for r in own_runs] == [RunStatus.SUCCEEDED, RunStatus.SUCCEEDED]
    to_ada = [m for m in mailoutbox if m.to == ["ada@example.org"]]
    assert sorted(m.subject for m in to_ada) == sorted(
        next(m.subject for m in to_ada if f"#{r.pk}" in m.subject) for r in own_runs
    )
    assert len(to_ada) == 2
    assert not [m for m in mailoutbox if m.to == ["bob@example.org"]]  # bob did not opt in
    assert sorted(p["run"]["id"] for p, _ in receiver.received) == [r.pk for r in own_runs]
    assert all(ok for _, ok in receiver.received), "a delivery's signature did not verify"
    assert {p["event"] for p, _ in receiver.received} == {"run.finished"}
