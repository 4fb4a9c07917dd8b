"""The "Done when" parity check: replaying the reference pipeline's recorded verdicts."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from benchmarks_app.models import AuditTruthResult, EvaluationRun, JudgeCall, MatchOutcome

pytestmark = pytest.mark.django_db

DATA = Path(__file__).resolve().parents[3] / "benchmarks_app" / "sample_data" / "audit"
RECORDED = DATA / "recorded"

# Reference overview (TP, partial, FP, FN) for the 8 recorded repos; lambowin's recorded
# partial at index -1 does not count (the reference counted it: 2/1/11/12).
REFERENCE = {
    "cantina_minimal-delegation_2025_04": (0, 0, 10, 17),
    "code4rena_bakerfi-invitational_2025_02": (5, 1, 64, 27),
    "code4rena_fenix-finance-invitational_2024_10": (0, 0, 4, 15),
    "code4rena_lambowin_2025_02": (2, 0, 11, 12),
    "code4rena_liquid-ron_2025_03": (2, 0, 6, 3),
    "code4rena_loopfi_2025_02": (1, 0, 51, 6),
    "code4rena_secondswap_2025_02": (1, 1, 13, 29),
    "code4rena_superposition_2025_01": (0, 0, 9, 11),
}


def _evaluate() -> EvaluationRun:
    args = ["--scanner", "baseline", "--judge", f"replay:{RECORDED}", "--wait"]
    for repo in REFERENCE:
        args += ["--repo", repo]
    call_command("evaluate_audit", *args, stdout=io.StringIO())
    return EvaluationRun.objects.latest("id")


def _report(run: EvaluationRun) -> dict:
    out = io.StringIO()
    call_command(
        "audit_report",
        "--scanner",
        "baseline",
        "--run",
        str(run.pk),
        "--format",
        "json",
        stdout=out,
    )
    return json.loads(out.getvalue())


def test_replay_reproduces_reference_and_second_run_is_free() -> None:
    out = io.StringIO()
    call_command("import_audit", str(DATA), stdout=out, stderr=io.StringIO())
    first = _evaluate()
    assert first.status == "succeeded" and first.is_complete
    report = _report(first)
    got = {r["repo"]: (r["tp"], r["partial"], r["fp"], r["fn"]) for r in report["repos"]}
    assert got == REFERENCE
    assert report["overall"]["tp"] == 11 and report["overall"]["partial"] == 2
    # Every truth finding has its stored votes and consensus.
    assert AuditTruthResult.objects.filter(run=first).count() == 131
    match = AuditTruthResult.objects.filter(run=first, outcome=MatchOutcome.MATCH).first()
    assert match is not None and match.scan_finding is not None and len(match.votes) >= 2
    assert JudgeCall.objects.filter(run=first, status="ok").exists()

    second = _evaluate()
    assert second.pk != first.pk and second.status == "succeeded"
    second_report = _report(second)
    assert second_report["repos"] == report["repos"]
    assert second_report["overall"] == report["overall"]
    calls = JudgeCall.objects.filter(run=second)
    assert calls.exists()
    assert not calls.exclude(status="cached").exists()


def test_replay_without_repos_evaluates_the_recorded_ones_and_refuses_others() -> None:
    call_command("import_audit", str(DATA), stdout=io.StringIO(), stderr=io.StringIO())
    call_command(
        "evaluate_audit",
        "--scanner",
        "baseline",
        "--judge",
        f"replay:{RECORDED}",
        "--wait",
        stdout=io.StringIO(),
    )
    run = EvaluationRun.objects.latest("id")
    assert sorted(run.repos.values_list("project_id", flat=True)) == sorted(REFERENCE)
    assert run.status == "succeeded" and run.is_complete
    with pytest.raises(CommandError, match="no recorded results for code4rena_iq-ai_2025_03"):
        call_command(
            "evaluate_audit",
            "--scanner",
            "baseline",
            "--judge",
            f"replay:{RECORDED}",
            "--repo",
            "code4rena_iq-ai_2025_03",
            stdout=io.StringIO(),
        )
