# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""Issue 35: a paper stored under its team's lock and a run's end writing that team's board
row under the challenge's lock must not wait on each other (the rush found PostgreSQL
aborting one of them as deadlocked: a participant's submission answered 500)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from benchmarks_app.models import ChecklistSubmission
from benchmarks_app.models.boards import ChecklistBoardRow
from benchmarks_app.services.checklist import PaperUpload, checklist_submission_create
from benchmarks_app.services.checklist import submissions as submissions_module
from benchmarks_app.services.checklist.boards import checklist_board_update
from tests.benchmarks_app.checklist.test_board_incremental import score, submit
from tests.factories.checklist import MembershipFactory

RUN_END_WAIT_S = 10


@pytest.mark.django_db(transaction=True)
def test_a_run_end_writes_the_teams_row_while_the_team_stores_a_paper(
    genuine_tex: PaperUpload, monkeypatch: pytest.MonkeyPatch
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks: PostgreSQL (SQLite writes one at a time)")
    member = MembershipFactory(team__challenge__daily_limit=5, team__challenge__total_limit=10)
    team, challenge = member.team, member.team.challenge
    score(submit(team, kind="GAT", seconds=60), 0.6, 0.5, None)
    assert not ChecklistBoardRow.objects.filter(challenge=challenge, team=team).exists()

    stored = threading.Event()
    go_on = threading.Event()
    real_paper_create = submissions_module._paper_create

    def paper_create_then_pause(**kwargs: Any) -> Any:
        paper = real_paper_create(**kwargs)
        stored.set()  # inside the submission's transaction, the team locked
        assert go_on.wait(30)
        return paper

    monkeypatch.setattr(submissions_module, "_paper_create", paper_create_then_pause)
    outcome: dict[str, Any] = {}

    def submitting() -> None:
        try:
            outcome["submission"] = checklist_submission_create(
                team=team, user=member.user, files={"G": genuine_tex}
            )
        except Exception as exc:  # the assertion below names it
            outcome["error"] = exc
        finally:
            connection.close()

    ended: dict[str, Any] = {}

    def run_end() -> None:
        try:
            ended["rows"] = checklist_board_update(challenge=challenge, phase=None, team_id=team.pk)
        except Exception as exc:
            ended["error"] = exc
        finally:
            connection.close()

    submitter = threading.Thread(target=submitting)
    submitter.start()
    try:
        assert stored.wait(30), "the submission never reached its insert"
        ender = threading.Thread(target=run_end)
        ender.start()
        ender.join(RUN_END_WAIT_S)
        ended_while_the_team_was_locked = not ender.is_alive()
    finally:
        go_on.set()
        submitter.join(60)
    ender.join(60)

    assert ended_while_the_team_was_locked, "the run's end waited for the team's submission"
    assert "error" not in ended, ended.get("error")
    assert ended["rows"] >= 1
    assert "error" not in outcome, outcome.get("error")
    assert ChecklistSubmission.objects.filter(team=team).count() == 2
    assert ChecklistBoardRow.objects.filter(challenge=challenge, team=team).exists()
