"""The database-backed column of the audit speed bench (see :mod:`.audit_speed`).

The concurrent schedule through the real service path: the bundled data imported into a
throw-away SQLite database, an ``openai`` audit run created by ``audit_run_create`` and its
pieces (one per repo) claimed and processed (``piece_run``) side by side, one thread per piece as
queue workers would, under their leases, with the verdict cache, single flight and the call
ledger in the database. Every call is asked of the bench's fake judge.
"""

from __future__ import annotations

import io
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, connections
from django.test.utils import override_settings

from benchmarks_app.bench.api import _scratch_database

# Outcome, scan finding index, explanation and votes of one truth finding (finding id).
Verdicts = dict[tuple[str, str], tuple[Any, ...]]


@dataclass
class DbColumn:
    seconds: float
    calls: int
    verdicts: Verdicts
    statuses: dict[str, int] = field(default_factory=dict)
    run_status: str = ""
    queries: int = 0
    query_kinds: dict[str, int] = field(default_factory=dict)


_TABLE = re.compile(r'(?:FROM|INTO|UPDATE)\s+"benchmarks_app_(\w+)"')


def _statement_kind(sql: str) -> str:
    """``INSERT judgecall``, ``BEGIN`` ...: what the database was asked, by verb and table."""
    verb = sql.split(None, 1)[0].upper() if sql.strip() else "?"
    table = _TABLE.search(sql)
    return f"{verb} {table.group(1)}" if table else verb


def _settings(base_url: str, concurrency: int) -> dict[str, Any]:
    return {
        "OPENAI_API_KEY": "bench",
        "OPENAI_BASE_URL": base_url,
        "JUDGE_MODEL": "o4-mini",
        "JUDGE_MODELS": ["o4-mini"],
        "JUDGE_CONCURRENCY": concurrency,
        "JUDGE_MAX_RETRIES": 2,
        "JUDGE_PROBE": False,
    }


def run_db_column(base_url: str, concurrency: int, data: Any) -> DbColumn:
    """Import ``data``, run ``openai`` on the ``baseline`` scanner, one thread per repo."""
    from benchmarks_app.models import AuditTruthResult, EvaluationRun, JudgeCall, RunPiece, Scanner
    from benchmarks_app.services.audit import audit_run_create
    from benchmarks_app.services.leases import piece_claim
    from benchmarks_app.services.piece_running import piece_run
    from benchmarks_app.services.piece_sending import run_pieces_prepare

    with _scratch_database(), override_settings(**_settings(base_url, concurrency)):
        from django.core.management import call_command

        call_command("import_audit", str(data), stdout=io.StringIO(), stderr=io.StringIO())
        scanner = Scanner.objects.get(name="baseline")
        run = audit_run_create(scanner=scanner, judge="openai", enqueue=False)
        pieces = [p.pk for p in run_pieces_prepare(run=run)]
        connections.close_all()
        errors: list[BaseException] = []
        counted = [0]
        lock = threading.Lock()

        kinds: dict[str, int] = {}

        def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            kind = _statement_kind(sql)
            with lock:
                counted[0] += 1
                kinds[kind] = kinds.get(kind, 0) + 1
            return execute(sql, params, many, context)

        def work(piece_id: int) -> None:
            try:
                with connection.execute_wrapper(count):
                    # One piece per thread, each counted (a queue task would claim several).
                    piece = piece_claim(piece_id=piece_id)
                    if piece is not None:
                        piece_run(piece)
            except BaseException as exc:  # reported below, with the run's status
                errors.append(exc)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=work, args=(pk,), daemon=True) for pk in pieces]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - start
        run = EvaluationRun.objects.get(pk=run.pk)
        if errors:
            raise RuntimeError(f"run #{run.pk} ({run.status}): {errors[0]!r}") from errors[0]
        statuses: dict[str, int] = {}
        for status in JudgeCall.objects.filter(run=run).values_list("status", flat=True):
            statuses[status] = statuses.get(status, 0) + 1
        verdicts: Verdicts = {}
        rows = AuditTruthResult.objects.filter(run=run).select_related(
            "repo", "truth_finding", "scan_finding"
        )
        for row in rows.order_by("pk"):
            verdicts[(row.repo.project_id, row.truth_finding.finding_id)] = (
                row.outcome,
                row.scan_finding.index if row.scan_finding else None,
                row.explanation,
                row.votes,
            )
        assert not RunPiece.objects.filter(run=run).exclude(status="done").exists()
        return DbColumn(
            seconds,
            statuses.get("ok", 0),
            verdicts,
            statuses,
            run.status,
            counted[0],
            kinds,
        )


def memory_verdicts(results: dict[str, Any]) -> Verdicts:
    """The same shape from the in-memory columns' :class:`RepoMatch` results."""
    out: Verdicts = {}
    for repo, match in results.items():
        for o in match.outcomes:
            out[(repo, o.finding_id)] = (
                o.outcome,
                o.scan_index,
                o.explanation,
                [v.as_dict() for v in o.votes],
            )
    return out
