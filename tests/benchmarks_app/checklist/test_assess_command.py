# mypy: disable-error-code="arg-type,attr-defined,misc"
"""``assess_checklist``: maintainers check a judge on a paper without a web upload."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from benchmarks_app.models import (
    ChecklistScore,
    ChecklistSubmission,
    EvaluationRun,
    JudgeCall,
    RunStatus,
    SubmissionStatus,
)
from benchmarks_app.selectors.checklist import checklist_leaderboard, checklist_quota
from benchmarks_app.services.checklist.maintainers import MAINTAINERS_TEAM
from tests.benchmarks_app.checklist.conftest import SAMPLE
from tests.factories.checklist import ChallengeFactory, MembershipFactory, TeamFactory
from tests.scoring.judges.fake_openai import FakeOpenAI, completion

pytestmark = pytest.mark.django_db

AUTOSURVEY = SAMPLE / "papers" / "AutoSurvey.pdf"
GENUINE_TEX = SAMPLE / "demo" / "genuine.tex"


def assess(*args: str) -> str:
    out = io.StringIO()
    call_command("assess_checklist", *args, stdout=out)
    return out.getvalue()


def test_offline_wait_prints_fifteen_verdicts_and_scores_a_staff_entry() -> None:
    challenge = ChallengeFactory(daily_limit=1)
    participant = MembershipFactory(team__challenge=challenge)

    out = assess(str(AUTOSURVEY), "--judge", "offline", "--wait")

    lines = out.splitlines()
    verdicts = [line for line in lines if line[:3].strip().rstrip(".").isdigit()]
    assert len(verdicts) == 15
    assert [int(line.split(".", 1)[0]) for line in verdicts] == list(range(1, 16))
    assert all((" correct " in line) != (" incorrect " in line) for line in verdicts), (
        "each question shows exactly one verdict"
    )
    run = EvaluationRun.objects.get()
    assert run.status == RunStatus.SUCCEEDED and run.is_complete and run.judge == "offline"
    assert (run.progress_done, run.progress_total) == (15, 15)
    score = ChecklistScore.objects.get(run=run)
    assert f"C_G = {score.c_g:.3f}" in out and 0 < score.c_g <= 1
    assert (score.c_a, score.c_t, score.r, score.s) == (0.0, 0.0, 1.0, 0.0)
    assert "Genuine-only paper" in out
    submission = run.checklist_submission
    assert submission is not None and submission.status == SubmissionStatus.SCORED
    assert submission.team.name == MAINTAINERS_TEAM and submission.challenge == challenge
    assert not submission.team.memberships.exists() and submission.submitted_by is None
    assert submission.papers.get().original_name == "AutoSurvey.pdf"
    # A second check on the same day goes through although the challenge allows one entry a
    # day, and the participants' team has spent nothing.
    assess(str(GENUINE_TEX), "--judge", "offline", "--wait")
    assert ChecklistSubmission.objects.filter(team=submission.team).count() == 2
    assert checklist_quota(team=participant.team).used_total == 0


def test_json_output_parses_with_one_verdict_per_question() -> None:
    challenge = ChallengeFactory()
    ChallengeFactory(slug="other")  # --challenge picks, not the default

    out = assess(
        str(GENUINE_TEX), "--judge", "offline", "--wait", "--format", "json",
        "--challenge", challenge.slug,
    )  # fmt: skip

    report = json.loads(out)
    run = EvaluationRun.objects.get()
    assert report["run"] == run.pk and report["status"] == "succeeded"
    assert report["challenge"] == challenge.slug and report["kind"] == "G"
    assert [v["number"] for v in report["verdicts"]] == list(range(1, 16))
    assert {v["verdict"] for v in report["verdicts"]} <= {"correct", "incorrect"}
    assert all(v["feedback"] for v in report["verdicts"])
    correct = sum(v["verdict"] == "correct" for v in report["verdicts"])
    assert report["scores"]["c_g"] == pytest.approx(correct / 15)
    assert report["scores"]["c_g"] == ChecklistScore.objects.get(run=run).c_g
    assert report["paper"]["file"] == "genuine.tex" and report["paper"]["body_words"] > 0


def test_without_wait_prints_the_queued_run_and_how_to_follow_it() -> None:
    ChallengeFactory()

    out = assess(str(GENUINE_TEX), "--judge", "offline")

    run = EvaluationRun.objects.get()
    # Inside the test transaction the queue never receives it: it is still waiting.
    assert run.status == RunStatus.QUEUED
    assert f"Queued run #{run.pk}" in out and f"/runs/{run.pk}/" in out and "--wait" in out
    assert not ChecklistScore.objects.exists()


def test_openai_judge_calls_the_server_and_records_the_model(settings: Any) -> None:
    ChallengeFactory()
    models: list[str] = []

    def handler(body: dict[str, Any]) -> dict[str, Any]:
        models.append(body.get("model", ""))
        return completion(json.dumps({"correct": True, "feedback": "Consistent with the paper."}))

    settings.JUDGE_MODELS = ["o4-mini", "judge-under-test"]
    with FakeOpenAI(handler) as server:
        settings.OPENAI_BASE_URL = server.base_url
        out = assess(str(GENUINE_TEX), "--judge", "openai:judge-under-test", "--wait")

    run = EvaluationRun.objects.get()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.judge == "openai:judge-under-test"
    # Every answer that is not TODO reached the server, with the chosen model.
    assert len(server.requests) >= 15
    assert set(models) == {"judge-under-test"}
    assert JudgeCall.objects.filter(run=run).exists()
    assert out.count("correct    Consistent with the paper.") == 15
    assert ChecklistScore.objects.get(run=run).c_g == 1.0


def test_openai_model_outside_judge_models_is_refused_before_anything_is_stored(
    settings: Any,
) -> None:
    ChallengeFactory()
    settings.JUDGE_MODELS = ["o4-mini"]

    with pytest.raises(CommandError, match="'gpt-x' is not one of the configured JUDGE_MODELS"):
        assess(str(GENUINE_TEX), "--judge", "openai:gpt-x")
    assert not ChecklistSubmission.objects.exists() and not EvaluationRun.objects.exists()


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        ("gpt-4", "Unknown judge 'gpt-4': use offline or openai"),
        ("recorded", "Unknown judge 'recorded'"),
        ("offline:x", "offline judge takes no model"),
    ],
)
def test_unknown_judge_is_a_command_error(judge: str, message: str) -> None:
    ChallengeFactory()
    with pytest.raises(CommandError, match=message):
        assess(str(GENUINE_TEX), "--judge", judge)
    assert not ChecklistSubmission.objects.exists()


def test_missing_file_is_a_command_error(tmp_path: Path) -> None:
    ChallengeFactory()
    missing = tmp_path / "nope.pdf"
    with pytest.raises(CommandError, match=re.escape(f"{missing}: no such file")):
        assess(str(missing), "--judge", "offline")
    with pytest.raises(CommandError, match="not a file"):
        assess(str(tmp_path), "--judge", "offline")


def test_unreadable_paper_is_a_command_error_that_stores_nothing(tmp_path: Path) -> None:
    ChallengeFactory()
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"not a pdf at all")
    with pytest.raises(CommandError, match=r"broken\.pdf: is not a PDF file"):
        assess(str(broken), "--judge", "offline")
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    with pytest.raises(CommandError, match="unsupported file type"):
        assess(str(notes), "--judge", "offline")
    assert not ChecklistSubmission.objects.exists()


def test_no_challenge_or_unknown_slug_is_a_command_error() -> None:
    with pytest.raises(CommandError, match="No challenge found"):
        assess(str(GENUINE_TEX), "--judge", "offline")
    ChallengeFactory()
    with pytest.raises(CommandError, match="No challenge with slug 'missing'"):
        assess(str(GENUINE_TEX), "--judge", "offline", "--challenge", "missing")


def test_a_participant_team_with_the_staff_name_is_never_used() -> None:
    team = TeamFactory(name=MAINTAINERS_TEAM.upper())
    MembershipFactory(team=team)
    with pytest.raises(CommandError, match="has participants"):
        assess(str(GENUINE_TEX), "--judge", "offline", "--challenge", team.challenge.slug)
    assert checklist_quota(team=team).used_total == 0


def test_a_judge_check_never_reaches_the_public_board() -> None:
    challenge = ChallengeFactory()
    assess(str(AUTOSURVEY), "--judge", "offline", "--wait", "--challenge", challenge.slug)
    assert ChecklistScore.objects.filter(submission__challenge=challenge).count() == 1
    assert checklist_leaderboard(challenge_slug=challenge.slug) == []
