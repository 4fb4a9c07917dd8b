"""Which results stand on an audit board: the board (judge key) a run counts on, the repos a
release covers, and per scanner and repo the result the board counts.

The board writer (:mod:`benchmarks_app.services.audit.boards`) stores these as the board's
rows; :mod:`.audit_boards` reads the stored rows and resolves which board a request means.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Max, Q

from benchmarks_app.models import AuditRepoResult, Benchmark, EvaluationRun, Phase
from benchmarks_app.models.audit import DatasetRelease
from benchmarks_app.selectors.visibility import in_unrevealed_phase
from scoring.audit.judges import parse_judge_spec


def judge_key(judge: str, judge_config: dict[str, Any] | None) -> str:
    """The board a run of ``judge`` counts on: ``offline``, ``openai:MODEL`` or ``replay:DIR``.

    LLM judges of different models never share a board; a run of a curated judge record
    (other than the default ``offline`` and ``openai``) counts on the board of its name.
    """
    board = (judge_config or {}).get("board")
    if board:
        return str(board)
    try:
        spec = parse_judge_spec(judge)
    except ValueError:
        return judge
    if spec.kind == "openai":
        model = (judge_config or {}).get("model")
        return f"openai:{model}" if model else "openai"
    return spec.label


def board_judge_key(run: EvaluationRun) -> str:
    return judge_key(run.judge, run.judge_config)


def default_judge_key() -> str:
    """The board judge of runs that name no judge (``JUDGE_DEFAULT``)."""
    default = str(getattr(settings, "JUDGE_DEFAULT", "offline") or "offline")
    return judge_key(default, {"model": getattr(settings, "JUDGE_MODEL", "")})


def release_repo_ids(release: DatasetRelease) -> set[int]:
    """The repos a release covers: those frozen with it, and those of its truth findings."""
    ids = set(release.repos.values_list("pk", flat=True))
    ids |= set(release.truth_findings.values_list("repo_id", flat=True))
    return ids


def _board_runs(
    *,
    release: DatasetRelease,
    judge: str,
    phase: Phase | None = None,
    scanner_id: int | None = None,
) -> list[EvaluationRun]:
    runs = EvaluationRun.objects.filter(benchmark=Benchmark.AUDIT, release=release)
    if scanner_id is not None:
        runs = runs.filter(scanner_id=scanner_id)
    # The whole board (no phase) is public: runs of a hidden phase join it once it is revealed.
    runs = runs.filter(phase=phase) if phase is not None else runs.exclude(in_unrevealed_phase())
    # Unordered: the runs' default order (newest first) made SQLite walk the run list's
    # index over every run of the benchmark rather than look up one scanner's few runs.
    runs = runs.only("id", "judge", "judge_config", "scanner_id", "board_choice", "phase_id")
    return [run for run in runs.order_by() if board_judge_key(run) == judge]


def board_run_ids(*, release: DatasetRelease, judge: str, phase: Phase | None = None) -> list[int]:
    """The runs a board counts: the release's runs of that judge (of ``phase`` only, if given)."""
    return [run.pk for run in _board_runs(release=release, judge=judge, phase=phase)]


def board_chosen_runs(
    *,
    release: DatasetRelease,
    judge: str,
    phase: Phase | None = None,
    scanner_id: int | None = None,
) -> dict[int, int]:
    """Scanner id → the run its owner chose for this board (the latest choice on a whole
    release's board, where each phase may hold one); of one scanner only with ``scanner_id``."""
    chosen: dict[int, int] = {}
    for run in _board_runs(release=release, judge=judge, phase=phase, scanner_id=scanner_id):
        if run.board_choice and run.scanner_id is not None:
            chosen[run.scanner_id] = max(run.pk, chosen.get(run.scanner_id, 0))
    return chosen


def board_repo_results(
    *,
    release: DatasetRelease,
    judge: str,
    phase: Phase | None = None,
    scanner_id: int | None = None,
) -> list[AuditRepoResult]:
    """Per scanner and repo of the release, the result the board counts.

    A scanner whose owner chose a run: that run's complete results (the owner chose them,
    even if newer versions were uploaded since). Any other scanner: per repo, the latest
    complete result of the board's runs whose judged version is still the current one.
    With ``scanner_id``, that scanner's results only (what one run's end changes).
    """
    runs = _board_runs(release=release, judge=judge, phase=phase, scanner_id=scanner_id)
    chosen = board_chosen_runs(release=release, judge=judge, phase=phase, scanner_id=scanner_id)
    repo_ids = release_repo_ids(release)
    others = [r.pk for r in runs if r.scanner_id not in chosen]
    qs = AuditRepoResult.objects.filter(
        run_id__in=others, is_complete=True, repo_id__in=repo_ids
    ).filter(Q(scan_result__isnull=True) | Q(scan_result__is_current=True))
    latest = qs.values("scanner_id", "repo_id").annotate(latest=Max("id")).values("latest")
    picked = AuditRepoResult.objects.filter(
        run_id__in=list(chosen.values()), is_complete=True, repo_id__in=repo_ids
    )
    latest_picked = (
        picked.values("scanner_id", "repo_id").annotate(latest=Max("id")).values("latest")
    )
    return list(
        AuditRepoResult.objects.filter(Q(id__in=latest) | Q(id__in=latest_picked)).order_by(
            "scanner_id", "repo_id"
        )
    )
