"""One board per (release, judge): reports and pages never mix judges, and the official board
comes first with the others one click away."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from benchmarks_app.demo import SAMPLE_DATA
from benchmarks_app.models import EvaluationRun
from benchmarks_app.models.audit import AuditDataset

pytestmark = pytest.mark.django_db

AUDIT = SAMPLE_DATA / "audit"
REPLAY = f"replay:{AUDIT / 'recorded'}"


def command(name: str, *args: str) -> str:
    out = io.StringIO()
    call_command(name, *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def two_judges(db: Any) -> None:
    command("import_audit", str(AUDIT), "--dataset", "mix")
    command("evaluate_audit", "--scanner", "baseline", "--judge", "offline", "--wait")
    command("evaluate_audit", "--scanner", "baseline", "--judge", REPLAY, "--wait")


def test_each_judge_has_its_own_board(two_judges: None) -> None:
    offline = json.loads(command("audit_leaderboard", "--format", "json"))
    assert (offline["dataset"], offline["release"], offline["judge"]) == ("mix", 1, "offline")
    [row] = offline["rows"]
    assert row["complete"] and row["rank"] == 1 and row["repos_evaluated"] == 11
    replay = json.loads(command("audit_leaderboard", "--judge", "replay", "--format", "json"))
    assert replay["judge"] == REPLAY
    [other] = replay["rows"]
    assert (other["complete"], other["rank"], other["repos_evaluated"]) == (False, None, 8)
    with pytest.raises(CommandError, match="judge: no board of mix@1 for judge 'openai'"):
        command("audit_leaderboard", "--judge", "openai")
    with pytest.raises(CommandError, match="release: mix has no published release 2"):
        command("audit_leaderboard", "--release", "2")


def test_audit_report_names_its_release_and_judge_and_never_mixes(two_judges: None) -> None:
    offline_run, replay_run = EvaluationRun.objects.order_by("pk").values_list("pk", flat=True)
    text = command("audit_report", "--scanner", "baseline")
    assert "Release: mix@1 · judge: offline" in text
    assert f"Evaluation run(s): #{offline_run}\n" in text and f"#{replay_run}" not in text
    assert "Board: rank 1 (could be 1-1), 11/11 repos" in text
    replayed = json.loads(
        command("audit_report", "--scanner", "baseline", "--judge", REPLAY, "--format", "json")
    )
    assert (replayed["judge"], replayed["run"], len(replayed["repos"])) == (REPLAY, replay_run, 8)
    assert replayed["board"]["rank"] is None and replayed["board"]["repos_total"] == 11
    one_run = json.loads(
        command(
            "audit_report", "--scanner", "baseline", "--run", str(replay_run), "--format", "json"
        )
    )
    assert (one_run["release"], one_run["judge"], one_run["run"]) == ("mix@1", REPLAY, replay_run)
    # No official judge board for the scanner, and two others: the report asks which.
    AuditDataset.objects.filter(slug="mix").update(official_judge="openai:o4-mini")
    with pytest.raises(CommandError, match="several judges"):
        command("audit_report", "--scanner", "baseline")


def test_site_shows_the_official_board_with_the_other_judge_one_click_away(
    two_judges: None,
) -> None:
    html = Client().get("/audit/").content.decode()
    assert "release <strong>mix@1</strong>" in html and "the official board" in html
    assert "judge offline (official)" in html and "judge replay:" in html
    other = Client().get("/audit/", {"judge": REPLAY}).content.decode()
    assert 'id="incomplete"' in other and "8/11" in other
    assert Client().get("/audit/", {"judge": "nope"}).status_code == 404
    api = Client().get("/api/audit/leaderboard/", {"judge": "nope"})
    assert api.status_code == 404 and api.json()["errors"][0]["field"] == "judge"
    boards = Client().get("/api/audit/boards/").json()["results"]
    assert [(b["judge"], b["official"]) for b in boards] == [("offline", True), (REPLAY, False)]


def test_a_releases_judges_are_listed_from_its_boards_only(two_judges: None) -> None:
    """``release_judges`` steps down the board's index judge by judge: every judge with a
    board of the release, sorted, none of another release's."""
    from benchmarks_app.models import DatasetRelease
    from benchmarks_app.models.audit import AuditBoardRow
    from benchmarks_app.selectors.audit_boards import release_judges

    release = DatasetRelease.objects.get(dataset__slug="mix", number=1)
    assert release_judges(release) == sorted(["offline", REPLAY])
    # A third judge's row, sorting before the others: listed too.
    row = AuditBoardRow.objects.filter(release=release).first()
    assert row is not None
    row.pk, row.judge = None, "a-first-judge"
    row.save()
    assert release_judges(release) == sorted(["a-first-judge", "offline", REPLAY])
    other = DatasetRelease.objects.create(dataset=release.dataset, number=2)
    assert release_judges(other) == []
