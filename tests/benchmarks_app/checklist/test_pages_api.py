# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore,return-value"
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import ChecklistScore, ChecklistSubmission, EvaluationRun
from benchmarks_app.selectors.checklist import checklist_leaderboard
from benchmarks_app.services.checklist import checklist_board_refresh
from tests.factories.checklist import (
    ChallengeFactory,
    ChecklistSubmissionFactory,
    MembershipFactory,
    TeamFactory,
)

pytestmark = pytest.mark.django_db
SAMPLE = Path(__file__).resolve().parents[3] / "benchmarks_app" / "sample_data" / "checklist"


def _file(name: str, folder: str = "demo") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, (SAMPLE / folder / name).read_bytes())


def test_form_preview_then_assess(django_capture_on_commit_callbacks) -> None:
    m = MembershipFactory()
    client = APIClient()
    client.force_login(m.user)
    form = client.get(reverse("checklist:submit"))
    for name in ('name="genuine"', 'name="adversarial"', 'name="truth"', "Remaining today"):
        assert name.encode() in form.content
    response = client.post(
        reverse("checklist:submit"),
        {
            "genuine": _file("genuine.tex"),
            "adversarial": _file("adversarial.tex"),
            "truth": _file("truth.tex"),
        },
    )
    sub = ChecklistSubmission.objects.get(team=m.team)
    assert response.status_code == 302
    assert response["Location"] == reverse("checklist:submission-detail", args=[sub.pk])
    preview = client.get(response["Location"])
    # The extraction is shown before anything is assessed.
    assert b"Limitations are discussed in detail in Section 6." in preview.content
    assert b"Start assessment" in preview.content
    assert not EvaluationRun.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("checklist:submission-assess", args=[sub.pk]))
    sub.refresh_from_db()
    assert sub.status == "scored"
    page = client.get(reverse("checklist:submission-detail", args=[sub.pk]))
    assert b"c = 0" in page.content and b"c = 1" in page.content
    mine = client.get(reverse("checklist:mine"))
    assert f"{sub.scores.get().s:.2f}".encode() in mine.content


def test_form_refuses_a_without_t_and_oversize(settings) -> None:
    m = MembershipFactory()
    client = APIClient()
    client.force_login(m.user)
    response = client.post(
        reverse("checklist:submit"),
        {"genuine": _file("genuine.tex"), "adversarial": _file("adversarial.tex")},
    )
    assert response.status_code == 400
    assert b"A needs its T paper" in response.content
    settings.UPLOAD_MAX_MB = 1
    big = SimpleUploadedFile("big.pdf", b"%PDF" + b"0" * (1024 * 1024 + 10))
    response = client.post(reverse("checklist:submit"), {"genuine": big})
    assert response.status_code == 400
    assert b"larger than the 1 MB limit" in response.content
    assert not ChecklistSubmission.objects.exists()


def test_api_submission_errors_and_quota(django_capture_on_commit_callbacks) -> None:
    m = MembershipFactory(team__challenge__daily_limit=1)
    client = APIClient()
    url = reverse("api:checklist-submission-list")
    anonymous = client.post(url, {"genuine": _file("genuine.tex")}, format="multipart")
    assert anonymous.status_code in (401, 403)
    client.force_login(m.user)
    only_t = client.post(
        url, {"genuine": _file("genuine.tex"), "truth": _file("truth.tex")}, format="multipart"
    )
    assert only_t.status_code == 400
    assert "adversarial" in json.dumps(only_t.json()) and "T needs its A" in json.dumps(
        only_t.json()
    )
    with django_capture_on_commit_callbacks(execute=True):
        ok = client.post(
            url, {"genuine": _file("genuine.tex"), "assess": "true"}, format="multipart"
        )
    assert ok.status_code == 201, ok.content
    body = ok.json()
    assert len(body["papers"][0]["answers"]) == 15
    assert body["quota"]["remaining_today"] == 0
    detail = client.get(body["url"]).json()
    assert detail["status"] == "scored" and detail["score"]["s"] == 0.0
    over = client.post(url, {"genuine": _file("genuine.tex")}, format="multipart")
    assert over.status_code == 429
    assert "resets at" in json.dumps(over.json())
    quota = client.get(reverse("api:checklist-quota")).json()
    assert quota["remaining"] == 0 and quota["used_today"] == 1


def _score(team, s: float, c_g: float, minutes: int = 0) -> ChecklistSubmission:  # type: ignore[no-untyped-def]
    from datetime import timedelta

    from django.utils import timezone

    sub = ChecklistSubmissionFactory(team=team, status="scored")
    ChecklistSubmission.objects.filter(pk=sub.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes)
    )
    run = EvaluationRun.objects.create(benchmark="checklist", checklist_submission=sub)
    ChecklistScore.objects.create(run=run, submission=sub, c_g=c_g, c_a=1, c_t=1, r=1 - s, s=s)
    # As when the run ends: the board's rows are rewritten from the scores.
    checklist_board_refresh(challenge=team.challenge, phase=None)
    return sub


def test_leaderboard_ranking_best_entry_and_constant_queries() -> None:
    challenge = ChallengeFactory()
    a, b, c = (TeamFactory(name=n, challenge=challenge) for n in ("alpha", "beta", "gamma"))
    _score(a, 0.5, 0.6)
    best_a = _score(a, 0.7, 0.6)
    _score(b, 0.7, 0.9)  # same S as alpha, higher C_G: ranks first
    early = _score(c, 0.7, 0.6, minutes=30)  # same S and C_G as alpha, earlier: before alpha
    rows = checklist_leaderboard()
    assert [r["team"] for r in rows] == ["beta", "gamma", "alpha"]
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert rows[2]["submission"] == best_a.pk and rows[1]["submission"] == early.pk
    with CaptureQueriesContext(connection) as few:
        checklist_leaderboard()
    for n in range(6):
        _score(TeamFactory(challenge=challenge), 0.1 * n, 0.5)
    with CaptureQueriesContext(connection) as many:
        assert len(checklist_leaderboard()) == 9
    # The challenge, its phases, the board's rows, then their places and ranks (one
    # statement of counts): whatever the number of teams.
    assert len(few) == len(many) == 4


def test_commands_extract_and_leaderboard_json(
    demo_triplet, django_capture_on_commit_callbacks
) -> None:
    out = io.StringIO()
    call_command(
        "extract_checklist",
        str(SAMPLE / "papers" / "AutoSurvey.pdf"),
        "--format",
        "json",
        stdout=out,
    )
    data = json.loads(out.getvalue())
    assert len(data["answers"]) == 15
    assert set(data["answers"][0]) == {"number", "title", "answer", "justification"}
    assert data["answers"][1]["answer"] == "No" and data["body_words"] > 1000
    _score(TeamFactory(name="zeta"), 0.123456, 0.5)
    out = io.StringIO()
    call_command("checklist_leaderboard", "--format", "json", stdout=out)
    rows = json.loads(out.getvalue())["rows"]
    assert rows[0]["team"] == "zeta" and rows[0]["s"] == 0.123456
    assert list(rows[0]) == [
        "rank",
        "team",
        "submission",
        "c_g",
        "c_a",
        "c_t",
        "r",
        "s",
        "s_ci",
        "rank_low",
        "rank_high",
        "tied",
        "paired_rank_low",
        "paired_rank_high",
        "paired_tied",
    ]


def test_import_assessed_csv_command(tmp_path, django_capture_on_commit_callbacks) -> None:
    team = TeamFactory(name="recorders")
    header = "Question,Question_Title,Answer,Justification,Guidelines,Review,Correctness_Score\n"

    def write(name: str, answers: list[str], scores: list[int]) -> Path:
        path = tmp_path / name
        body = "".join(
            f'{n},Q{n},{a},"j {n}",g,"review {n}",{c}\n'
            for n, (a, c) in enumerate(zip(answers, scores, strict=True), start=1)
        )
        path.write_text(header + body)
        return path

    g = write("G.csv", ["Yes"] * 15, [1] * 12 + [0] * 3)
    a = write("A.csv", ["Yes"] * 14 + ["N/A"], [1] * 15)
    t = write("T.csv", ["No"] * 10 + ["Yes"] * 4 + ["NA"], [1] * 15)
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command(
            "import_checklist_assessed", "--team", "recorders", "--challenge",
            team.challenge.slug, "--genuine", str(g), "--adversarial", str(a), "--truth", str(t),
            stdout=out,
        )  # fmt: skip
    score = ChecklistScore.objects.get(submission__team=team)
    # g_i: Q1-10 A Yes vs T No -> 0; Q11-14 equal -> 1; Q15 N/A == NA -> 1. c(A) = 1 everywhere,
    # so c == g on Q11-15: R = 5/15. S = 12/15 * 1 * (1 - 1/3) * 1.
    assert (score.c_g, score.c_a, score.c_t) == (0.8, 1.0, 1.0)
    assert score.r == pytest.approx(1 / 3)
    assert score.s == pytest.approx(0.8 * (2 / 3))
    assert "S=0.53" in out.getvalue()


def test_questions_have_one_name_on_pages_api_and_commands(
    django_capture_on_commit_callbacks,
) -> None:
    """The checklist's printed names everywhere a question is shown (the judge is still asked
    with the assistant's short titles, so its prompts and cache keys do not change)."""
    from scoring.checklist.questions import QUESTION_TITLES

    m = MembershipFactory()
    client = APIClient()
    client.force_login(m.user)
    client.post(reverse("checklist:submit"), {"genuine": _file("genuine.tex")})
    sub = ChecklistSubmission.objects.get(team=m.team)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("checklist:submission-assess", args=[sub.pk]))
    page = client.get(reverse("checklist:submission-detail", args=[sub.pk])).content.decode()
    out = io.StringIO()
    call_command("extract_checklist", str(SAMPLE / "demo" / "genuine.tex"), stdout=out)
    printed = out.getvalue()
    for number in (3, 4, 9, 15):
        name = QUESTION_TITLES[number]
        assert f"<td>{name}</td>" in page, name
        assert f"{number:>2}. {name}:" in printed, name
    assert "Theoretical assumptions and proofs" not in page
