"""The audit board of :mod:`benchmarks_app.bench.boards_scale` seeded in bulk: one scanner per
entry on a two-repo release, a succeeded run and its repo results (one in ten evaluated on one
repo only: incomplete), and the board's stored rows with their order columns and ties as a
rebuild writes them. The rows' intervals are their F1+ ± a random half-width, not bootstraps
(100,000 bootstraps would take half an hour). The board page tests seed with it too."""

from __future__ import annotations

import random
from typing import Any

REPOS = 2


def random_counts(rng: random.Random) -> tuple[int, int, int, int]:
    truth = 20
    tp, partial = rng.randint(0, 15), rng.randint(0, 3)
    return truth, tp, partial, rng.randint(0, 30)


def repo_metrics(project_id: str, counts: tuple[int, int, int, int]) -> dict[str, Any]:
    truth, tp, partial, fp = counts
    return {
        "repo": project_id,
        "truth": truth,
        "scan": tp + partial + fp,
        "qa": 0,
        "tp": tp,
        "partial": partial,
        "fp": fp,
        "fn": truth - tp - partial,
        "truth_severity_counts": {},
        "scan_severity_counts": {},
    }


def seed_audit(entries: int, *, seed: int = 11) -> Any:
    """``entries`` scanners with a run and results on release ``bench@1``, and the board's
    rows, all in bulk. Returns the release."""
    from benchmarks_app.models import (
        AuditDataset,
        AuditRepoResult,
        Benchmark,
        EvaluationRun,
        Repo,
        RunStatus,
        Scanner,
    )
    from benchmarks_app.models.audit import (
        AuditBoardRow,
        audit_board_sort_fields,
        audit_metric_columns,
    )
    from benchmarks_app.selectors.board_marks import AUDIT_SHAPE, ties_all
    from benchmarks_app.services.audit import audit_release_create, audit_release_publish
    from scoring.audit.board import BOARD_LEVEL, BOARD_RESAMPLES, BOARD_SEED
    from scoring.audit.metrics import overall

    rng = random.Random(seed)
    repos = [
        Repo.objects.create(project_id=f"bench_{i}_2025_01", name=f"Bench {i}")
        for i in range(REPOS)
    ]
    dataset = AuditDataset.objects.create(slug="bench", name="Bench")
    dataset.repos.add(*repos)
    release = audit_release_publish(release=audit_release_create(dataset=dataset))
    scanners = Scanner.objects.bulk_create(
        (Scanner(name=f"scanner-{i:06d}", is_baseline=i % 500 == 0) for i in range(entries)),
        batch_size=5_000,
    )
    runs = EvaluationRun.objects.bulk_create(
        (
            EvaluationRun(
                benchmark=Benchmark.AUDIT,
                status=RunStatus.SUCCEEDED,
                is_complete=True,
                progress_done=REPOS,
                progress_total=REPOS,
                scanner=scanner,
                release=release,
                judge="offline",
            )
            for scanner in scanners
        ),
        batch_size=5_000,
    )
    results = []
    for i, (run, scanner) in enumerate(zip(runs, scanners, strict=True)):
        for repo in repos[: 1 if i % 10 == 3 else REPOS]:
            results.append(
                AuditRepoResult(
                    run=run,
                    repo=repo,
                    scanner=scanner,
                    is_complete=True,
                    judge="offline",
                    metrics=repo_metrics(repo.project_id, random_counts(rng)),
                )
            )
    results = AuditRepoResult.objects.bulk_create(results, batch_size=5_000)
    by_run: dict[int, list[Any]] = {}
    for result in results:
        by_run.setdefault(result.run_id, []).append(result)
    rows = []
    for run, scanner in zip(runs, scanners, strict=True):
        mine = by_run[run.pk]
        totals = overall([r.metrics for r in mine])
        for key in ("repo", "truth_severity_counts", "scan_severity_counts"):
            totals.pop(key, None)
        value = totals.get("f1_with_partial")
        half = rng.uniform(0.01, 0.08)
        rows.append(
            AuditBoardRow(
                release=release,
                judge="offline",
                scanner=scanner,
                run_ids=[run.pk],
                repo_result_ids=sorted(r.pk for r in mine),
                repos_evaluated=len(mine),
                repos_total=REPOS,
                is_complete=len(mine) == REPOS,
                metrics=totals,
                **audit_metric_columns(totals),
                f1_with_partial=value,
                f1=totals.get("f1"),
                ci_low=None if value is None else max(0.0, value - half),
                ci_high=None if value is None else min(1.0, value + half),
                ci_level=BOARD_LEVEL,
                ci_resamples=BOARD_RESAMPLES,
                ci_seed=BOARD_SEED,
            )
        )
    for row, scanner in zip(rows, scanners, strict=True):
        for name, value in audit_board_sort_fields(
            scanner_name=scanner.name,
            is_complete=row.is_complete,
            repos_evaluated=row.repos_evaluated,
            f1_with_partial=row.f1_with_partial,
            f1=row.f1,
            ci_low=row.ci_low,
            ci_high=row.ci_high,
        ).items():
            setattr(row, name, value)
    ties_all(AUDIT_SHAPE, rows)
    AuditBoardRow.objects.bulk_create(rows, batch_size=5_000)
    return release
