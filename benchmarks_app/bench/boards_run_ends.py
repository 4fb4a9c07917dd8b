"""What one run's end costs a board (:mod:`benchmarks_app.bench.boards_scale`): audit, probe
and checklist run ends made in bulk and each board's refresh for the run timed (wall and CPU
ms, queries, rows written), and what a bare commit costs on the database."""

from __future__ import annotations

import random
import time
from typing import Any

from django.db import connection

from benchmarks_app.bench.boards_seed import random_counts, repo_metrics

RUN_ENDS = 10


def audit_run_ends(release: Any, count: int, *, seed: int = 5) -> list[dict[str, Any]]:
    """``count`` run ends on the board: half new scanners, half existing ones with new
    results; for each, wall and CPU ms of ``audit_board_refresh_for_run``, queries, rows."""
    from benchmarks_app.models import AuditRepoResult, Benchmark, EvaluationRun, RunStatus, Scanner
    from benchmarks_app.services.audit.boards import audit_board_refresh_for_run

    rng = random.Random(seed)
    repos = list(release.repos.order_by("project_id"))
    existing = list(Scanner.objects.order_by("pk").values_list("pk", flat=True)[:100_000])
    out = []
    for k in range(count):
        if k % 2 == 0:
            scanner = Scanner.objects.create(name=f"new-scanner-{seed}-{k:03d}")
        else:
            scanner = Scanner.objects.get(pk=rng.choice(existing))
        run = EvaluationRun.objects.create(
            benchmark=Benchmark.AUDIT,
            status=RunStatus.SUCCEEDED,
            is_complete=True,
            scanner=scanner,
            release=release,
            judge="offline",
        )
        AuditRepoResult.objects.bulk_create(
            AuditRepoResult(
                run=run,
                repo=repo,
                scanner=scanner,
                is_complete=True,
                judge="offline",
                metrics=repo_metrics(repo.project_id, random_counts(rng)),
            )
            for repo in repos
        )
        executed: list[str] = []

        def count_query(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            executed.append(sql)  # noqa: B023 - one list per run end
            return execute(sql, params, many, context)

        with connection.execute_wrapper(count_query):
            wall, cpu = time.perf_counter(), time.process_time()
            written = audit_board_refresh_for_run(run=run)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        out.append(
            {
                "kind": "new" if k % 2 == 0 else "rerun",
                "wall": wall * 1000,
                "cpu": cpu * 1000,
                "queries": len(executed),
                "written": written,
            }
        )
    return out


def _timed(fn: Any) -> dict[str, Any]:
    """Wall and CPU ms of ``fn()``, its queries, and what it returned."""
    executed: list[str] = []

    def count_query(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        executed.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count_query):
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall": wall * 1000, "cpu": cpu * 1000, "queries": len(executed), "result": result}


def probe_run_ends(count: int, *, seed: int = 5) -> list[dict[str, Any]]:
    """``count`` run ends on the probe board ``bench-board`` (seeded by ``boards_probes``):
    half new models, half new reports of existing ones; each timed like the audit ones."""
    from benchmarks_app.models import (
        Benchmark,
        ProbeBoardRow,
        ProbeRunReport,
        ProbeSuite,
        ResponseSubmission,
        RunStatus,
    )
    from benchmarks_app.models import EvaluationRun as Run
    from benchmarks_app.services.probes.boards import probe_board_refresh_for_run

    rng = random.Random(seed)
    suite = ProbeSuite.objects.get(name="bench-board")
    existing = list(ResponseSubmission.objects.filter(suite=suite).values_list("pk", flat=True))
    out = []
    for k in range(count):
        if k % 2 == 0:
            sub = ResponseSubmission.objects.create(
                suite=suite, model_name=f"new-model-{seed}-{k:03d}"
            )
        else:
            sub = ResponseSubmission.objects.get(pk=rng.choice(existing))
        run = Run.objects.create(
            benchmark=Benchmark.PROBES,
            status=RunStatus.SUCCEEDED,
            is_complete=True,
            probe_submission=sub,
        )
        value = rng.random()
        ProbeRunReport.objects.create(
            run=run,
            submission=sub,
            metrics={"suite_version": "benchv1", "counts": {"evaluated": 40}},
            resilience_index=value,
            pass_rate=rng.random(),
            ci={"metric": "resilience_index", "low": max(0, value - 0.05), "high": value + 0.05},
        )
        before = ProbeBoardRow.objects.count()
        timed = _timed(lambda run=run: probe_board_refresh_for_run(run=run))
        assert ProbeBoardRow.objects.count() == before + (k % 2 == 0)
        out.append({**timed, "kind": "new" if k % 2 == 0 else "rerun"})
    return out


def checklist_run_ends(count: int, *, seed: int = 5) -> list[dict[str, Any]]:
    """``count`` run ends on the checklist board ``bench-board`` (seeded by
    ``boards_checklist``): half new teams, half new submissions of existing ones; each timed
    like the audit ones (``checklist_board_refresh_for_run``)."""
    from benchmarks_app.models import (
        Benchmark,
        Challenge,
        ChecklistBoardRow,
        ChecklistScore,
        ChecklistSubmission,
        RunStatus,
        SubmissionKind,
        SubmissionStatus,
        Team,
    )
    from benchmarks_app.models import EvaluationRun as Run
    from benchmarks_app.services.checklist.boards import checklist_board_refresh_for_run

    rng = random.Random(seed)
    challenge = Challenge.objects.get(slug="bench-board")
    existing = list(Team.objects.filter(challenge=challenge).values_list("pk", flat=True))
    out = []
    for k in range(count):
        if k % 2 == 0:
            team = Team.objects.create(challenge=challenge, name=f"new-team-{seed}-{k:03d}")
        else:
            team = Team.objects.get(pk=rng.choice(existing))
        sub = ChecklistSubmission.objects.create(
            challenge=challenge,
            team=team,
            kind=SubmissionKind.TRIPLET,
            status=SubmissionStatus.SCORED,
        )
        run = Run.objects.create(
            benchmark=Benchmark.CHECKLIST,
            status=RunStatus.SUCCEEDED,
            is_complete=True,
            checklist_submission=sub,
        )
        c_g, c_a, c_t, r = rng.random(), rng.random(), rng.random(), rng.random()
        s = c_g * c_a * (1 - r) * c_t
        ChecklistScore.objects.create(
            run=run,
            submission=sub,
            c_g=c_g,
            c_a=c_a,
            c_t=c_t,
            r=r,
            s=s,
            ci={"metric": "s", "low": max(0.0, s - 0.03), "high": s + 0.03},
        )
        before = ChecklistBoardRow.objects.count()
        timed = _timed(lambda run=run: checklist_board_refresh_for_run(run=run))
        assert ChecklistBoardRow.objects.count() == before + (k % 2 == 0)
        out.append({**timed, "kind": "new" if k % 2 == 0 else "rerun"})
    return out


def commit_flush_ms(release: Any, count: int = RUN_ENDS) -> list[float]:
    """Wall ms of ``count`` commits of a one-row update, each its own transaction: what a
    run end's commit costs before any of its work (PostgreSQL waits for its write-ahead
    log to reach the disk; on a slow disk that, not the board update, is most of the time)."""
    from django.db import transaction

    from benchmarks_app.models.audit import AuditBoardRow

    row = AuditBoardRow.objects.filter(release=release).order_by("pk").first()
    assert row is not None
    out = []
    for _ in range(count):
        started = time.perf_counter()
        with transaction.atomic():
            AuditBoardRow.objects.filter(pk=row.pk).update(tied_with_above=row.tied_with_above)
        out.append((time.perf_counter() - started) * 1000)
    return out
