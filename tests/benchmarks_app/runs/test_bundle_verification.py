"""What ``verify_run`` and ``judge_add --from-bundle`` make of bundles that are not what they
claim: a hostile one ends in exit 2 with one line naming its member, a bundle missing a figure
its version promises fails (exit 1 for a mismatch, 2 for a malformed member, as
``python -m scoring.bundles``), and the audit board's F1+ interval travels and is checked."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchmarks_app.models import EvaluationRun, JudgeRecord, Repo
from benchmarks_app.selectors.run_bundles import run_bundle
from scoring import bundles
from scoring.audit.board import BOARD_LEVEL, BOARD_RESAMPLES, BOARD_SEED
from tests.benchmarks_app.runs.test_bundles import REPOS, _members, _offline_audit_run, _rewrite
from tests.scoring.hostile_bundles import HOSTILE, with_raw_member

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]


def _verify_run(path: Path) -> tuple[int, str]:
    """verify_run's exit code and what it printed, in this process."""
    out = io.StringIO()
    try:
        call_command("verify_run", str(path), stdout=out)
    except CommandError as exc:
        return exc.returncode, str(exc)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_verify_run_and_judge_add_exit_2_naming_the_member(
    kind: str, tmp_path: Path, settings: Any
) -> None:
    settings.MEDIA_ROOT = str(tmp_path / "media")
    build, named = HOSTILE[kind]
    path = tmp_path / "hostile.zip"
    path.write_bytes(build())
    code, message = _verify_run(path)
    assert code == 2 and named in message and "\n" not in message, message
    with pytest.raises(CommandError) as raised:
        call_command("judge_add", "hostile", "--from-bundle", str(path), stdout=io.StringIO())
    assert raised.value.returncode == 2 and named in str(raised.value)
    assert not JudgeRecord.objects.filter(name="hostile").exists()
    assert not any(tmp_path.rglob("*_results.json")) and not Path("/tmp/x_results.json").exists()


def test_verify_run_exits_2_as_a_process_with_one_line(tmp_path: Path) -> None:
    build, named = HOSTILE["deep nesting"]
    path = tmp_path / "deep.zip"
    path.write_bytes(build())
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings_test"}
    done = subprocess.run(
        [sys.executable, "manage.py", "verify_run", str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "Traceback" not in done.stderr


@pytest.fixture
def audit_bundle(tmp_path: Path) -> tuple[EvaluationRun, bytes]:
    run = _offline_audit_run()
    Repo.objects.filter(project_id__in=REPOS).update(is_public=True)
    return run, run_bundle(run=run)


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "edited.zip"
    path.write_bytes(data)
    return path


def test_the_board_interval_travels_and_is_checked(
    audit_bundle: tuple[EvaluationRun, bytes], tmp_path: Path
) -> None:
    _, data = audit_bundle
    metrics = json.loads(_members(data)[bundles.METRICS])
    interval = metrics["interval"]
    assert interval is not None
    assert (interval["resamples"], interval["level"], interval["seed"]) == (
        BOARD_RESAMPLES,
        BOARD_LEVEL,
        BOARD_SEED,
    )
    f1_plus = metrics["overall"]["f1_with_partial"]
    assert interval["low"] <= f1_plus <= interval["high"]
    checks = bundles.verify(bundles.read_bundle(data))
    assert any(c.name == "F1+ interval" and c.ok for c in checks)

    def widen(value: dict[str, Any]) -> dict[str, Any]:
        value["interval"]["high"] += 0.05
        return value

    code, text = _verify_run(_write(tmp_path, _rewrite(data, bundles.METRICS, widen)))
    assert code == 1 and "MISMATCH F1+ interval" in text

    def drop(value: dict[str, Any]) -> dict[str, Any]:
        del value["interval"]
        return value

    code, text = _verify_run(_write(tmp_path, _rewrite(data, bundles.METRICS, drop)))
    assert code == 2 and "metrics.json: interval: Field required" in text


def test_a_bundle_missing_what_its_version_promises_fails(
    audit_bundle: tuple[EvaluationRun, bytes], tmp_path: Path
) -> None:
    _, data = audit_bundle
    assert _verify_run(_write(tmp_path, data))[0] == 0
    repo = REPOS[0]

    def drop_metric(value: dict[str, Any]) -> dict[str, Any]:
        del value["repos"][repo]["metrics"]["f1"]
        return value

    def drop_repo(value: dict[str, Any]) -> dict[str, Any]:
        del value["repos"][repo]
        return value

    def drop_overall_key(value: dict[str, Any]) -> dict[str, Any]:
        del value["overall"]["recall"]
        return value

    def null_overall(value: dict[str, Any]) -> dict[str, Any]:
        value["overall"] = None
        return value

    for edit, expected in (
        (drop_metric, f"MISMATCH {repo} f1: stored null"),
        (drop_repo, f"MISMATCH {repo} metrics"),
        (drop_overall_key, "MISMATCH overall recall: stored null"),
        (null_overall, "MISMATCH overall: stored null"),
    ):
        code, text = _verify_run(_write(tmp_path, _rewrite(data, bundles.METRICS, edit)))
        assert code == 1 and expected in text, (edit.__name__, text)
    # An empty metrics.json is malformed, not a bundle with nothing to check.
    for raw in (b"{}", b""):
        code, text = _verify_run(_write(tmp_path, with_raw_member(bundles.METRICS, raw, data=data)))
        assert code == 2 and text.startswith("bundle: metrics.json: "), text
