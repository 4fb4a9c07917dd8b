"""``make demo`` for the audit benchmark: import the bundled data, score ``baseline`` offline."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from benchmarks_app.demo import SAMPLE_DATA
from benchmarks_app.models import Scanner
from benchmarks_app.selectors.audit import audit_report
from benchmarks_app.selectors.runs import ended_run_failure_causes
from benchmarks_app.services.audit import audit_import_path, audit_run_create
from benchmarks_app.services.runs import run_wait
from scoring.audit.metrics import overview_table
from scoring.judges import failures

AUDIT_DATA = SAMPLE_DATA / "audit"


def run_demo(out: TextIO) -> None:
    report = audit_import_path(path=AUDIT_DATA)
    out.write(f"Imported {AUDIT_DATA}: {report.summary()}\n")
    expected = [p for p in report.problems if _expected(p)]
    for problem in report.problems:
        note = " (expected, see below)" if problem in expected else ""
        out.write(f"  skipped {_relative(problem.path)}: {problem.reason}{note}\n")
    if expected:
        out.write(
            f"  The {len(expected)} empty files are expected: the upstream sample data ships the "
            "'auditagent' scanner's results for these repos empty; the demo scores 'baseline', "
            "which has results for every repo.\n"
        )
    # The demo's reference scanner: ranked like any other, shown with the baseline badge
    # (participants are refused its name).
    Scanner.objects.filter(name="baseline", owner=None).update(is_baseline=True)
    scanner = Scanner.objects.get(name="baseline")
    run = audit_run_create(scanner=scanner, judge="offline")
    run = run_wait(run=run)
    out.write(
        f"Run #{run.pk} ({run.judge} judge) {run.status}: {run.progress_done}/"
        f"{run.progress_total} truth findings judged on {run.repos.count()} repos\n"
    )
    if causes := ended_run_failure_causes(run=run):
        out.write(f"{run.error}\n{failures.details(causes)}\n")
    out.write("\n")
    out.write(overview_table(audit_report(scanner_name=scanner.name, run_id=run.pk)) + "\n")
    out.write(f"\nScanner leaderboard: /audit/ · this run: /audit/runs/{run.pk}/\n")


def _relative(path: object) -> str:
    try:
        return str(Path(str(path)).relative_to(AUDIT_DATA))
    except ValueError:
        return str(path)


def _expected(problem: object) -> bool:
    """An empty file of the bundled ``auditagent`` scanner: skipped on purpose, not a fault."""
    path = Path(str(getattr(problem, "path", "")))
    return getattr(problem, "reason", "") == "empty file" and path.parent.name == "auditagent"
