"""Issue 10's audit boards on the bundled data: a dataset release, one judge per board,
identical inputs giving identical rows at no judge cost, incomplete scanners listed unranked."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from rest_framework.test import APIClient

from benchmarks_app.demo import SAMPLE_DATA
from benchmarks_app.models import EvaluationRun, JudgeCall
from benchmarks_app.models.audit import AuditBoardRow, AuditDataset
from benchmarks_app.selectors.audit import run_judge_calls
from benchmarks_app.selectors.board_marks import AUDIT_SHAPE, attach_marks
from benchmarks_app.services.audit import audit_board_refresh_for_run
from benchmarks_app.services.runs import run_wait

pytestmark = pytest.mark.django_db

AUDIT = SAMPLE_DATA / "audit"
BASELINE = AUDIT / "baseline"
SLUG = "auditagent-2025-08"


def baseline_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(BASELINE.glob("*_results.json")):
            archive.write(path, f"baseline/{path.name}")
    return buffer.getvalue()


def finish(run_id: int) -> EvaluationRun:
    run = run_wait(run=EvaluationRun.objects.get(pk=run_id))
    # The run life cycle refreshes the board when a run ends; doing it again changes nothing.
    audit_board_refresh_for_run(run=run)
    return run


def submit_dataset(api: APIClient, scanner: str) -> EvaluationRun:
    upload = SimpleUploadedFile("results.zip", baseline_zip(), content_type="application/zip")
    answer = api.post(
        f"/api/audit/datasets/{SLUG}/results/",
        {"scanner": scanner, "judge": "offline", "file": upload},
        format="multipart",
    )
    assert answer.status_code == 202, answer.json()
    body = answer.json()
    assert body["release"] == f"{SLUG}@1" and len(body["repos"]) == 11
    return finish(body["run"])


def leaderboard_json(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("audit_leaderboard", "--dataset", SLUG, *args, "--format", "json", stdout=out)
    return json.loads(out.getvalue())


def test_two_names_same_files_same_numbers_and_rank_and_no_new_calls(user: Any) -> None:
    out = io.StringIO()
    call_command("import_audit", str(AUDIT), "--dataset", SLUG, stdout=out)
    assert f"release {SLUG}@1 published (official)" in out.getvalue()
    dataset = AuditDataset.objects.get(slug=SLUG)
    assert dataset.official_release is not None and dataset.official_release.number == 1
    assert dataset.official_release.repos.count() == 11

    api = APIClient()
    api.force_authenticate(user)
    first = submit_dataset(api, "tool-a")
    second = submit_dataset(api, "tool-b")
    assert first.status == second.status == "succeeded"
    assert first.release_id == second.release_id == dataset.official_release_id

    new, cached = run_judge_calls(run=first)
    assert new > 0
    new, cached = run_judge_calls(run=second)
    assert (new, cached > 0) == (0, True)
    assert JudgeCall.objects.filter(run=second).exclude(status="cached").count() == 0

    # A third scanner evaluated on one repo only: listed, not ranked.
    one = json.loads((BASELINE / "code4rena_loopfi_2025_02_results.json").read_text())
    answer = api.post(
        "/api/audit/repos/code4rena_loopfi_2025_02/results/?scanner=partial-tool&judge=offline",
        one,
        format="json",
    )
    assert answer.status_code == 202, answer.json()
    finish(answer.json()["run"])

    board = leaderboard_json()
    assert (board["dataset"], board["release"], board["judge"]) == (SLUG, 1, "offline")
    rows = {r["scanner"]: r for r in board["rows"]}
    assert [r["scanner"] for r in board["rows"]] == ["tool-a", "tool-b", "partial-tool"]
    a, b, partial = rows["tool-a"], rows["tool-b"], rows["partial-tool"]
    assert {k: v for k, v in a.items() if k != "scanner"} == {
        k: v for k, v in b.items() if k != "scanner"
    }
    assert a["rank"] == b["rank"] == 1 and a["complete"] and a["repos_evaluated"] == 11
    assert (a["rank_low"], a["rank_high"]) == (b["rank_low"], b["rank_high"]) == (1, 2)
    low, high = a["f1_with_partial_ci"]
    assert low <= a["f1_with_partial"] <= high and low < high
    assert partial["complete"] is False and partial["rank"] is None
    assert (partial["repos_evaluated"], partial["repos_total"]) == (1, 11)
    assert partial["rank_low"] is None and partial["rank_high"] is None
    assert list(a) == [
        "scanner",
        "rank",
        "rank_low",
        "rank_high",
        "complete",
        "repos_evaluated",
        "repos_total",
        "tp",
        "partial",
        "fp",
        "fn",
        "precision",
        "recall",
        "f1",
        "f1_with_partial",
        "f1_with_partial_ci",
        "paired_rank_low",
        "paired_rank_high",
        "paired_tied",
    ]

    # The API serves the same rows, paginated.
    api_rows = APIClient().get(
        "/api/audit/leaderboard/", {"dataset": SLUG, "release": "1", "judge": "offline"}
    )
    assert api_rows.status_code == 200
    # ... with the baseline badge and the entry's method besides.
    extra = {"is_baseline", "method_name", "method_description", "method_url"}
    # ... and the keys probe rows have: the tie mark, the phase and the standing run.
    extra |= {"tied", "phase", "run_id"}
    # ... and the row id and board key the paired compare endpoint takes.
    extra |= {"id", "board"}
    results = api_rows.json()["results"]
    assert [{k: v for k, v in r.items() if k not in extra} for r in results] == board["rows"]
    assert all(set(r) == set(a) | extra and r["is_baseline"] is False for r in results)
    default = APIClient().get("/api/audit/leaderboard/").json()["results"]
    assert default == results


def test_evaluate_audit_wait_prints_judge_calls_and_is_idempotent_on_the_board() -> None:
    call_command("import_audit", str(AUDIT), stdout=io.StringIO())
    assert AuditDataset.objects.filter(slug="audit").exists()
    outputs = []
    for _ in range(2):
        out = io.StringIO()
        call_command(
            "evaluate_audit",
            "--scanner",
            "baseline",
            "--judge",
            "offline",
            "--repo",
            "code4rena_lambowin_2025_02",
            "--wait",
            stdout=out,
        )
        outputs.append(out.getvalue().strip().splitlines())
    first, second = (lines[-1] for lines in outputs)
    assert first.startswith("judge calls: ") and not first.startswith("judge calls: 0 new")
    assert second.startswith("judge calls: 0 new, ") and not second.endswith(" 0 cached")
    assert "on audit@1" in outputs[0][0]
    row = AuditBoardRow.objects.get(scanner__name="baseline")
    assert row.judge == "offline" and row.repos_evaluated == 1 and not row.is_complete


def test_identical_numbers_keep_their_interval_across_refreshes(tmp_path: Path) -> None:
    call_command("import_audit", str(AUDIT), "--dataset", SLUG, stdout=io.StringIO())
    call_command(
        "evaluate_audit",
        "--scanner",
        "baseline",
        "--judge",
        "offline",
        "--wait",
        stdout=io.StringIO(),
    )
    row = AuditBoardRow.objects.get(scanner__name="baseline")
    before = (row.ci_low, row.ci_high, row.ci_seed, row.ci_resamples)
    run = EvaluationRun.objects.get()
    audit_board_refresh_for_run(run=run)
    again = AuditBoardRow.objects.get(scanner__name="baseline")
    assert (again.ci_low, again.ci_high, again.ci_seed, again.ci_resamples) == before
    attach_marks(AUDIT_SHAPE, [again])
    assert (before[3] or 0) >= 1000 and again.rank == 1 and again.is_complete
