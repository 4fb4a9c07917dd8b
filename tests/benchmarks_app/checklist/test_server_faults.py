# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""A checklist run against a server that answers 200 with something that is not a chat
completion ends failed with the server's fault as its cause (base URL, first bytes): no
traceback, no ledger row left pending, and the run page shows what the calls cost."""

from __future__ import annotations

import pytest
from django.test import override_settings

from benchmarks_app.models import JudgeCall, RunStatus
from benchmarks_app.selectors.runs import run_failure_causes
from benchmarks_app.services.checklist import checklist_submission_assess
from scoring.judges import failures
from tests.factories.checklist import MembershipFactory, PaperFactory, add_answers
from tests.scoring.judges.fake_openai import FakeOpenAI
from tests.scoring.judges.test_server_faults import MODES

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("mode", list(MODES))
def test_a_checklist_run_names_the_server_and_its_first_bytes(
    mode: str, client, django_capture_on_commit_callbacks
) -> None:
    body, first_bytes = MODES[mode]
    m = MembershipFactory()
    paper = PaperFactory(submission__team=m.team)
    add_answers(paper, {n: "Yes" for n in range(1, 16)})
    with (
        FakeOpenAI(lambda _: body) as server,
        override_settings(OPENAI_BASE_URL=server.base_url, JUDGE_PROBE=True),
        django_capture_on_commit_callbacks(execute=True),
    ):
        run = checklist_submission_assess(submission=paper.submission, judge="openai:m1")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.failed_items == 15
    causes = run_failure_causes(run=run)
    assert [(c.kind, c.count, c.resumable) for c in causes] == [(failures.SERVER, 15, False)]
    assert server.base_url in causes[0].message and first_bytes in causes[0].message
    assert "Traceback" not in run.error and "object has no attribute" not in run.error
    # One cause, said once: the run's error stays one short paragraph.
    assert len(run.error) < 1000 and "and 12 more: server: the server at" in run.error
    calls = JudgeCall.objects.filter(run=run)
    assert calls.count() >= 15
    assert not calls.filter(status="pending").exists()
    assert set(calls.values_list("status", flat=True)) == {"error"}
    assert server.base_url in run.judge_config["request"]["probe"]["fault"]

    client.force_login(m.user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert f"{calls.count()} new, 0 cached" in page
