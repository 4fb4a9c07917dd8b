"""Run bundles: a run of the bundled sample data re-scores offline from its bundle alone, an
edited verdict fails, hidden truth never leaves, and a bundle replays as a judge."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, cast

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from benchmarks_app.models import (
    AuditTruthResult,
    Challenge,
    EvaluationRun,
    JudgeCall,
    JudgeRecord,
    Repo,
    RunStatus,
    TruthFinding,
)
from benchmarks_app.selectors.run_bundles import run_bundle
from benchmarks_app.services.checklist import (
    PaperUpload,
    checklist_membership_add,
    checklist_submission_create,
    checklist_team_create,
)
from benchmarks_app.services.probes import probe_submission_submit, probe_suite_import
from benchmarks_app.services.runs import run_wait
from scoring import bundles
from tests.factories.checklist import ChallengeFactory

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "benchmarks_app" / "sample_data"
# Two repos of the bundled data where the offline judge finds matches (and misses).
REPOS = ["code4rena_liquid-ron_2025_03", "code4rena_lambowin_2025_02"]


def _offline_audit_run(*, judge: str = "offline") -> EvaluationRun:
    if not Repo.objects.exists():
        call_command(
            "import_audit", str(SAMPLE / "audit"), stdout=io.StringIO(), stderr=io.StringIO()
        )
    args = ["--scanner", "baseline", "--judge", judge, "--wait"]
    for repo in REPOS:
        args += ["--repo", repo]
    call_command("evaluate_audit", *args, stdout=io.StringIO())
    run = EvaluationRun.objects.latest("id")
    assert run.status == RunStatus.SUCCEEDED and run.is_complete
    return run


@pytest.fixture
def public_audit_run() -> EvaluationRun:
    run = _offline_audit_run()
    Repo.objects.filter(project_id__in=REPOS).update(is_public=True)
    return run


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _rewrite(data: bytes, name: str, edit: Any, *, fix_checksum: bool = True) -> bytes:
    """``data`` with member ``name`` edited (``edit`` takes and returns its JSON); with
    ``fix_checksum`` the manifest is made to match, as a careful forger would."""
    members = _members(data)
    value = edit(json.loads(members[name]))
    members[name] = json.dumps(value).encode()
    if fix_checksum:
        manifest = json.loads(members[bundles.MANIFEST])
        for member in manifest["members"]:
            if member["name"] == name:
                member["sha256"] = hashlib.sha256(members[name]).hexdigest()
                member["bytes"] = len(members[name])
        members[bundles.MANIFEST] = json.dumps(manifest).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for member_name, raw in members.items():
            archive.writestr(member_name, raw)
    return out.getvalue()


def _verify_offline(path: Path) -> subprocess.CompletedProcess[str]:
    """``python -m scoring.bundles`` in a fresh interpreter with no Django settings and no
    database: it must not even import Django."""
    code = (
        "import sys\n"
        "from scoring.bundles import main\n"
        "rc = main([sys.argv[1], '-v'])\n"
        "loaded = [m for m in sys.modules if m == 'django' or m.startswith('django.')]\n"
        "print('django modules:', len(loaded))\n"
        "sys.exit(rc if not loaded else 3)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "DATABASE", "REDIS"))}
    env["DATABASE_URL"] = "postgres://nobody@127.0.0.1:1/none"  # would fail if ever used
    return subprocess.run(
        [sys.executable, "-c", code, str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _first_match(verdicts: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in verdicts["truth_results"] if r["outcome"] == "match")


# --- Audit: the bundled sample data, offline judge ------------------------------------------


def test_audit_bundle_verifies_offline_without_django(
    public_audit_run: EvaluationRun, tmp_path: Path
) -> None:
    data = run_bundle(run=public_audit_run)
    path = tmp_path / "run.zip"
    path.write_bytes(data)
    done = _verify_offline(path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "django modules: 0" in done.stdout
    assert "MISMATCH" not in done.stdout
    # Every repo's F1 and the run's overall figures were recomputed, not just read.
    for repo in REPOS:
        assert f"ok       {repo} f1_with_partial" in done.stdout
    assert "ok       overall tp = " in done.stdout

    members = _members(data)
    manifest = json.loads(members[bundles.MANIFEST])
    assert manifest["version"] == bundles.VERSION and manifest["truth_withheld"] is False
    for member in manifest["members"]:
        assert hashlib.sha256(members[member["name"]]).hexdigest() == member["sha256"]
    # Public truth travels with its text; the judge record names no key.
    truth = json.loads(members[bundles.TRUTH])
    title = TruthFinding.objects.filter(repo__project_id=REPOS[0]).first().title  # type: ignore[union-attr]
    assert title in {t["title"] for t in truth[REPOS[0]]}
    record = json.loads(members[bundles.RUN])["judge_record"]
    # By name, model and server only: not even the name of the key's variable.
    assert record["name"] == "offline" and "api_key_env" not in record
    calls = json.loads(members[bundles.CALLS])
    assert len(calls) == JudgeCall.objects.filter(run=public_audit_run).count() > 0
    # The same run always gives the same bytes, so a bundle's hash can be compared.
    assert run_bundle(run=public_audit_run) == data


def test_altering_one_verdict_fails_verification(
    public_audit_run: EvaluationRun, tmp_path: Path
) -> None:
    data = run_bundle(run=public_audit_run)
    assert any(c.ok for c in bundles.verify(bundles.read_bundle(data)))

    def unmatch(verdicts: dict[str, Any]) -> dict[str, Any]:
        row = _first_match(verdicts)
        row["outcome"], row["scan_index"] = "none", None
        return verdicts

    # The checksum rewritten to match: the verdict no longer follows from its votes, and the
    # repo's counts no longer follow from its verdicts.
    forged = bundles.read_bundle(_rewrite(data, bundles.VERDICTS, unmatch))
    failed = [c.name for c in bundles.verify(forged) if not c.ok]
    assert any(name.endswith(" verdict") for name in failed)
    assert any(name.endswith(" tp") for name in failed) and "overall tp" in failed

    # The checksum left alone: the member is caught as tampered.
    path = tmp_path / "tampered.zip"
    path.write_bytes(_rewrite(data, bundles.VERDICTS, unmatch, fix_checksum=False))
    done = _verify_offline(path)
    assert done.returncode == 1
    assert f"member {bundles.VERDICTS} checksum" in done.stdout

    # verify_run says so and exits non-zero.
    path.write_bytes(_rewrite(data, bundles.VERDICTS, unmatch))
    out = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("verify_run", str(path), stdout=out)
    assert exited.value.code == 1
    assert "MISMATCH" in out.getvalue() and "overall tp" in out.getvalue()


def test_editing_votes_and_verdict_together_still_fails_on_the_metrics(
    public_audit_run: EvaluationRun,
) -> None:
    data = run_bundle(run=public_audit_run)

    def unmatch_everywhere(verdicts: dict[str, Any]) -> dict[str, Any]:
        row = _first_match(verdicts)
        row["outcome"], row["scan_index"], row["votes"] = "none", None, []
        return verdicts

    forged = bundles.read_bundle(_rewrite(data, bundles.VERDICTS, unmatch_everywhere))
    failed = {c.name for c in bundles.verify(forged) if not c.ok}
    assert "overall tp" in failed and "overall f1" in failed


def test_verify_run_command_reports_every_check(
    public_audit_run: EvaluationRun, tmp_path: Path
) -> None:
    path = tmp_path / "run.zip"
    path.write_bytes(run_bundle(run=public_audit_run))
    out = io.StringIO()
    call_command("verify_run", str(path), verbosity=2, stdout=out)
    text = out.getvalue()
    assert f"audit run #{public_audit_run.pk}" in text
    assert "MISMATCH" not in text and "checks match" in text


def test_hidden_release_bundle_holds_no_hidden_truth_text(tmp_path: Path) -> None:
    run = _offline_audit_run()
    hidden = list(TruthFinding.objects.filter(repo__project_id__in=REPOS, repo__is_public=False))
    assert hidden and all(t.title and t.description for t in hidden)
    data = run_bundle(run=run)
    members = _members(data)
    assert json.loads(members[bundles.MANIFEST])["truth_withheld"] is True
    assert bundles.TRUTH not in members
    everything = b"\n".join(members.values()).decode("utf-8")
    leaks = [
        t.finding_id
        for t in hidden
        for text in (t.title, t.description)
        if text in everything or json.dumps(text)[1:-1] in everything
    ]
    assert leaks == []
    # Still re-scores: the metrics need the truth's severities and order, not its text.
    path = tmp_path / "hidden.zip"
    path.write_bytes(data)
    done = _verify_offline(path)
    assert done.returncode == 0, done.stdout + done.stderr


# --- Replay ---------------------------------------------------------------------------------


def test_bundle_imports_as_replay_judge_that_reproduces_the_entry(
    public_audit_run: EvaluationRun, tmp_path: Path
) -> None:
    path = tmp_path / "run.zip"
    path.write_bytes(run_bundle(run=public_audit_run))
    out = io.StringIO()
    call_command("judge_add", "third-party", "--from-bundle", str(path), stdout=out)
    record = JudgeRecord.objects.get(name="third-party")
    assert record.kind == "replay" and Path(record.base_url).is_dir()
    assert "2 repo(s)" in out.getvalue()

    replayed = _offline_audit_run(judge="third-party")
    assert replayed.pk != public_audit_run.pk and replayed.judge_record == record

    def verdicts(run: EvaluationRun) -> list[tuple[int, str, int | None]]:
        rows = AuditTruthResult.objects.filter(run=run).select_related("scan_finding")
        return sorted(
            (r.truth_finding_id, r.outcome, r.scan_finding.index if r.scan_finding else None)
            for r in rows
        )

    original = verdicts(public_audit_run)
    assert any(outcome == "match" for _, outcome, _ in original)
    assert verdicts(replayed) == original
    # No model was asked: the replay judge answers from the recording.
    assert not JudgeCall.objects.filter(run=replayed).exclude(model="replay").exists()
    # Its own bundle verifies too, with the same figures.
    again = bundles.read_bundle(run_bundle(run=replayed))
    assert all(c.ok for c in bundles.verify(again))
    assert (
        again.get(bundles.METRICS)["overall"]
        == bundles.read_bundle(run_bundle(run=public_audit_run)).get(bundles.METRICS)["overall"]
    )


def test_judge_add_refuses_a_forged_bundle(public_audit_run: EvaluationRun, tmp_path: Path) -> None:
    def unmatch(verdicts: dict[str, Any]) -> dict[str, Any]:
        row = _first_match(verdicts)
        row["outcome"], row["scan_index"] = "none", None
        return verdicts

    path = tmp_path / "forged.zip"
    path.write_bytes(_rewrite(run_bundle(run=public_audit_run), bundles.VERDICTS, unmatch))
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="bundle: does not verify"):
        call_command("judge_add", "forged", "--from-bundle", str(path), stdout=io.StringIO())
    assert not JudgeRecord.objects.filter(name="forged").exists()
    # A name is checked before it becomes a folder under MEDIA_ROOT.
    good = tmp_path / "good.zip"
    good.write_bytes(run_bundle(run=public_audit_run))
    with pytest.raises(CommandError, match="name: letters"):
        call_command("judge_add", "../escape", "--from-bundle", str(good), stdout=io.StringIO())
    assert not (tmp_path / "media" / "escape").exists()


# --- Probes and checklist -------------------------------------------------------------------


def _xstest_run() -> EvaluationRun:
    from benchmarks_app.services.probes.rules import pattern_rules_install_defaults

    pattern_rules_install_defaults()
    xstest = SAMPLE / "probes" / "xstest"
    probe_suite_import(
        name="xstest",
        text=(xstest / "xstest_prompts.csv").read_text(encoding="utf-8"),
        fmt="xstest",
    )
    run = probe_submission_submit(
        suite_name="xstest",
        model_name="gpt-4",
        text=(xstest / "completions_gpt4.csv").read_text(encoding="utf-8"),
        fmt="xstest",
    )
    run = run_wait(run=run)
    assert run.status == RunStatus.SUCCEEDED
    return run


def test_probe_bundle_verifies_and_an_edited_case_fails() -> None:
    data = run_bundle(run=_xstest_run())
    checks = bundles.verify(bundles.read_bundle(data))
    names = {c.name for c in checks}
    assert all(c.ok for c in checks) and "resilience_index interval" in names
    assert "indices.resilience_index" in names and "agreement.kappa" in names

    def flip(verdicts: dict[str, Any]) -> dict[str, Any]:
        case = next(r for r in verdicts["cases"] if r["case"]["passed"])
        case["case"]["passed"] = False
        return verdicts

    forged = bundles.read_bundle(_rewrite(data, bundles.VERDICTS, flip))
    failed = {c.name for c in bundles.verify(forged) if not c.ok}
    assert any(name.startswith("case ") for name in failed)
    assert any("pass_rate" in name for name in failed)

    # The refusal signal of one case, against XSTest's human labels: the agreement moves.
    def unrefuse(verdicts: dict[str, Any]) -> dict[str, Any]:
        case = next(r for r in verdicts["cases"] if r["case"]["boundary_or_refusal_signal"])
        case["case"]["boundary_or_refusal_signal"] = False
        return verdicts

    forged = bundles.read_bundle(_rewrite(data, bundles.VERDICTS, unrefuse))
    assert "agreement.kappa" in {c.name for c in bundles.verify(forged) if not c.ok}


def _checklist_run() -> EvaluationRun:
    challenge = cast(Challenge, ChallengeFactory())
    user = get_user_model().objects.create_user("alice", password="pw")
    team = checklist_team_create(challenge=challenge, name="Deceivers")
    checklist_membership_add(team=team, user=user)
    demo = SAMPLE / "checklist" / "demo"
    files = {
        kind: PaperUpload(name=f"{name}.tex", data=(demo / f"{name}.tex").read_bytes())
        for kind, name in (("G", "genuine"), ("A", "adversarial"), ("T", "truth"))
    }
    submission = checklist_submission_create(
        team=team, user=user, files=files, assess=True, judge="offline"
    )
    run = run_wait(run=submission.runs.order_by("-created_at")[0])
    assert run.status == RunStatus.SUCCEEDED
    return run


def test_checklist_bundle_verifies_and_an_edited_assessment_fails() -> None:
    run = _checklist_run()
    data = run_bundle(run=run)
    checks = bundles.verify(bundles.read_bundle(data))
    assert all(c.ok for c in checks) and {"c_g", "s", "s interval"} <= {c.name for c in checks}

    def flip(verdicts: dict[str, Any]) -> dict[str, Any]:
        row = next(
            r for r in verdicts["assessments"] if r["paper_kind"] == "G" and r["status"] == "ok"
        )
        row["correct"] = 1 - int(row["correct"])
        return verdicts

    forged = bundles.read_bundle(_rewrite(data, bundles.VERDICTS, flip))
    failed = {c.name for c in bundles.verify(forged) if not c.ok}
    assert "c_g" in failed
    assert any(name.startswith("G question ") and name.endswith(" verdict") for name in failed)


# --- Who may download -----------------------------------------------------------------------


def test_bundle_downloads_follow_the_run_visibility() -> None:
    run = _checklist_run()
    member = Client()
    member.force_login(get_user_model().objects.get(username="alice"))
    stranger = Client()
    stranger.force_login(get_user_model().objects.create_user("mallory", password="pw"))
    for url in (f"/api/runs/{run.pk}/bundle/", f"/runs/{run.pk}/bundle/"):
        got = member.get(url)
        assert got.status_code == 200, url
        assert got["Content-Type"] == "application/zip"
        assert bundles.read_bundle(got.content).manifest.run_id == run.pk
        # Another participant and an anonymous visitor do not learn the team's entry exists.
        assert stranger.get(url).status_code == 404, url
        assert Client().get(url).status_code == 404, url


def test_public_run_downloads_anonymously_and_active_runs_wait(
    public_audit_run: EvaluationRun,
) -> None:
    got = Client().get(f"/api/runs/{public_audit_run.pk}/bundle/")
    assert got.status_code == 200
    assert bundles.read_bundle(got.content).manifest.benchmark == "audit"
    page = Client().get(f"/runs/{public_audit_run.pk}/")
    assert f"/runs/{public_audit_run.pk}/bundle/" in page.content.decode()

    EvaluationRun.objects.filter(pk=public_audit_run.pk).update(status=RunStatus.RUNNING)
    refused = Client().get(f"/api/runs/{public_audit_run.pk}/bundle/")
    assert refused.status_code == 409 and "running" in refused.json()["detail"]


def test_a_hidden_phase_entry_downloads_for_its_entrant_and_staff_only() -> None:
    from datetime import timedelta

    from django.utils import timezone

    from benchmarks_app.models import Phase, ResponseSubmission

    run = _xstest_run()
    users = get_user_model().objects
    owner = users.create_user("entrant", password="pw")
    other = users.create_user("rival", password="pw")
    staff = users.create_user("curator", password="pw", is_staff=True)
    now = timezone.now()
    phase = Phase.objects.create(
        benchmark="probes",
        suite=run.probe_submission.suite,  # type: ignore[union-attr]
        name="Final",
        slug="final",
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=1),
        is_hidden=True,
    )
    ResponseSubmission.objects.filter(runs=run).update(owner=owner, phase=phase)
    EvaluationRun.objects.filter(pk=run.pk).update(phase=phase)
    url = f"/api/runs/{run.pk}/bundle/"

    def status(user: Any) -> int:
        client = Client()
        if user is not None:
            client.force_login(user)
        return client.get(url).status_code

    assert (status(owner), status(staff)) == (200, 200)
    assert (status(other), status(None)) == (404, 404)
    # Once revealed, the board and its bundles are public.
    Phase.objects.filter(pk=phase.pk).update(revealed_at=now)
    assert (status(other), status(None)) == (200, 200)
