"""A run's pieces claimed and processed, several at a time (cut and sent to the queue by
:mod:`.piece_sending`).

A run is split into pieces (:class:`~benchmarks_app.models.RunPiece`): one per repo for the
audit benchmark, one for the whole run otherwise. Each piece is held under a lease of its own
(:mod:`.leases`), so no task comes near ``Q_TIMEOUT``, a crash redoes one piece at most, and
another machine can take any piece nobody holds. The run ends when its last piece does; the
sweeper (:mod:`.sweeper`) hands out again what nobody is doing.

A process that takes a run's piece (a queue worker's task, or ``run_wait`` with no worker)
also claims up to ``RUN_PIECES_PER_PROCESS - 1`` more queued pieces of the same run and drives
them side by side, one thread each: a run's chain of dependent judge rounds is then its
longest repo's, not the sum of its repos'. Their judge calls share the process's one gate per
endpoint (``JUDGE_CONCURRENCY``; :class:`scoring.judges.limits.CallGate`).

Imports point one way: :mod:`.runs` → :mod:`.sweeper` → this module → :mod:`.piece_running`
(one piece's attempt) → :mod:`.run_recovery` → :mod:`.piece_sending` (cutting and queueing
pieces) → :mod:`.run_state` → :mod:`.leases`.
"""

from __future__ import annotations

import functools
import gc
import logging
import os
import sys
import threading
from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError, connections, transaction

from benchmarks_app.db_pool import connection_release
from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.run_queue import queued_pieces_fair_order
from benchmarks_app.services.leases import piece_claim, worker_clock_record
from benchmarks_app.services.piece_running import piece_run
from benchmarks_app.services.piece_sending import run_pieces_prepare
from benchmarks_app.services.run_state import run_piece_weights
from scoring.judges.llm import client_warm_up

logger = logging.getLogger(__name__)


def pieces_per_process() -> int:
    return max(1, int(getattr(settings, "RUN_PIECES_PER_PROCESS", 16)))


def piece_claim_fair() -> RunPiece | None:
    """Claim the queued piece to take first across submitters
    (:func:`~benchmarks_app.selectors.run_queue.queued_pieces_fair_order`); None when
    nothing is queued (or others took it all meanwhile)."""
    for pk in queued_pieces_fair_order():
        piece = piece_claim(piece_id=pk)
        if piece is not None:
            return piece
    return None


def piece_process(*, piece_id: int) -> None:
    """The queue task: a worker slot for queued pieces, not for this one alone.

    Up to ``RUN_PIECES_PER_PROCESS`` pieces are driven side by side (each under its own
    lease); each slot, as it frees, takes the queued piece of the least-served submitter
    (:func:`piece_claim_fair`), this task's own piece among them: one user's large runs no
    longer hold every worker while another's one-repo run waits behind all their pieces. A
    piece taken out of turn keeps its own task, which later finds it held or done and takes
    another (or returns); one left queued by this task is another task's, or the sweeper's
    to send again. A piece's error is recorded on the run and raised here (django-q2
    records the task as failed).
    """
    first = None
    if not RunPiece.objects.filter(
        pk=piece_id, status=PieceStatus.QUEUED, run__status__in=ACTIVE_STATUSES
    ).exists():
        # Parked, held under a lease that expired, or left queued by a run that has ended
        # (driven to its end, not left queued for ever): this task's own piece to take up
        # again (a held or ended one is not claimed, and the task's slots take queued ones).
        first = piece_claim(piece_id=piece_id)
    slots = pieces_per_process() - (1 if first is not None else 0)
    # No slot (a thread, a connection) for pieces that are not there.
    queued = RunPiece.objects.filter(status=PieceStatus.QUEUED, run__status__in=ACTIVE_STATUSES)
    slots = min(slots, queued[: max(0, slots)].count())
    _drive(first, [], raise_errors=True, fair_slots=slots)


def run_process_here(*, run: EvaluationRun, raise_errors: bool = False, processes: int = 1) -> None:
    """Process every piece of ``run`` that nobody holds, here (no queue needed),
    ``RUN_PIECES_PER_PROCESS`` at a time per process.

    ``processes`` above 1 (``run_wait`` with no worker: ``RUN_PROCESSES_HERE``) forks helpers
    that take their share of the pieces, each piece still claimed under its own lease: one
    Python process holds one GIL, and eleven pieces' judge calls kept one core busy while the
    other idled (a default cluster runs two workers). A helper that dies leaves its pieces'
    leases to expire, and the caller takes them up again. A piece's error is recorded on the
    run by :func:`piece_run`; ``raise_errors`` passes it on too (a queue task, so that
    django-q2 records the task as failed).
    """
    pieces = list(
        RunPiece.objects.filter(
            run=run, status__in=[PieceStatus.QUEUED, PieceStatus.WAITING]
        ).values_list("pk", "key")
    )
    weights = run_piece_weights(run) if len(pieces) > 1 else {}
    weighed = [(pk, weights.get(key, 1)) for pk, key in pieces]
    helpers = min(processes, len(pieces)) - 1
    if helpers < 1 or not hasattr(os, "fork") or transaction.get_connection().in_atomic_block:
        _drive(None, shares_by_weight(weighed, 1)[0], raise_errors=raise_errors)
        return
    shares = shares_by_weight(weighed, helpers + 1)
    process_warm_up()  # once, before the fork: the helpers start with it done
    # No connection crosses the fork (each process opens its own); unwritten output neither.
    connections.close_all()
    sys.stdout.flush()
    sys.stderr.flush()
    children = []
    for helper in range(1, helpers + 1):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the helper's exit status is checked by the caller
            status = 0
            try:
                _drive(None, shares[helper], raise_errors=False)
            except BaseException:
                logger.exception("run #%s: a helper process failed", run.pk)
                status = 1
            finally:
                connections.close_all()
                os._exit(status)
        children.append(pid)
    try:
        _drive(None, shares[0], raise_errors=raise_errors)
    finally:
        for pid in children:
            _, status = os.waitpid(pid, 0)
            if status:
                logger.warning(
                    "run #%s: helper process %s ended with status %s", run.pk, pid, status
                )


def shares_by_weight(pieces: list[tuple[int, int]], count: int) -> list[list[int]]:
    """``pieces`` (id, weight) shared out between ``count`` processes: heaviest first, each to
    the share that weighs least so far (the longest-processing-time rule), each share
    heaviest first. On the bundled audit data the round-robin split it replaced put
    bakerfi (43% of the calls, the run's longest chain) in one process with five other repos
    and 70% of the work; now it has its process nearly to itself, and the ``--wait`` path's
    run took 10.3-10.4 s instead of 11.0-11.3 s (2 CPUs, the audit_paths fake, 2026-12-07)."""
    shares: list[list[int]] = [[] for _ in range(max(1, count))]
    loads = [0] * len(shares)
    for pk, weight in sorted(pieces, key=lambda piece: -piece[1]):
        lightest = loads.index(min(loads))
        shares[lightest].append(pk)
        loads[lightest] += max(1, weight)
    return shares


def run_process_all(*, run_id: int) -> None:
    """Process a whole run in this process (tasks queued before runs were cut into pieces)."""
    run = EvaluationRun.objects.get(pk=run_id)
    if run.status in ACTIVE_STATUSES:
        run_pieces_prepare(run=run)
        run_process_here(run=run, raise_errors=True)


_warmed = threading.Event()
GIL_SWITCH_S = 0.001


def process_warm_up() -> None:
    """Once per process, before it drives pieces: hand the GIL over sooner, load the judges'
    client library, then take what start-up allocated out of the cyclic garbage collector's
    sight (``gc.freeze``).

    Every piece's judge imports the client library (openai: about 0.4 CPU-s) when it is
    built; eleven pieces building theirs at once queue on the import lock and on the GIL while
    no call goes out. And a full collection walks every object alive (Django, the client
    library's types: about 0.15 s each under load, five per audit run) while every piece's
    loop stands still; start-up objects live for the process anyway. Frozen objects are still
    freed when nothing refers to them; only cycles made before the freeze are kept.
    """
    if _warmed.is_set():
        return
    try:
        worker_clock_record()  # once per process, as it starts working
    except DatabaseError:
        logger.warning("could not measure this host's clock against the database", exc_info=True)
    # The pieces' loops, their database threads and lease keepers are many threads that
    # mostly wait; one that wakes (an answer came, a write committed) waited up to the
    # default 5 ms for the GIL at each hand-over, four or more per judge call on a repo's
    # chain. A shorter interval costs the process a little throughput, not latency.
    sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_S))
    # Frozen first too: the import's own collections then walk only what it creates.
    gc.freeze()
    client_warm_up()
    gc.freeze()
    _warmed.set()


def _drive(
    first: RunPiece | None, piece_ids: list[int], *, raise_errors: bool, fair_slots: int = 0
) -> None:
    """Process ``first`` (claimed already) and claim and process ``piece_ids``, side by side;
    and ``fair_slots`` more pieces, each claimed when its slot starts as the queue's fair
    order says (:func:`piece_claim_fair`; a slot with nothing queued ends).

    One thread per piece, each with its own database connection, at most
    ``RUN_PIECES_PER_PROCESS`` at once. Inside a transaction (a test, a script that has not
    committed) the pieces run one after another on this thread: another connection would not
    see the rows they need.
    """
    errors: list[BaseException] = []
    if first is not None or piece_ids or fair_slots:
        process_warm_up()

    def claim_and_run(piece_id: int) -> None:
        piece = piece_claim(piece_id=piece_id)
        if piece is not None:
            piece_run(piece)

    def claim_fair_and_run() -> None:
        piece = piece_claim_fair()
        if piece is not None:
            piece_run(piece)

    jobs: list[Callable[[], None]] = []
    if first is not None:
        jobs.append(functools.partial(piece_run, first))
    jobs += [functools.partial(claim_and_run, pk) for pk in piece_ids]
    jobs += [claim_fair_and_run] * max(0, fair_slots)

    def guarded(job: Callable[[], None], *, own_connection: bool) -> None:
        try:
            job()
        except Exception as exc:
            errors.append(exc)
            logger.debug("a run piece failed", exc_info=True)
        finally:
            if own_connection:
                connections.close_all()

    if len(jobs) == 1 or transaction.get_connection().in_atomic_block:
        for job in jobs:
            guarded(job, own_connection=False)
    else:
        width = min(pieces_per_process(), len(jobs))
        pending = list(jobs)
        lock = threading.Lock()

        def worker() -> None:
            while True:
                with lock:
                    if not pending:
                        return
                    job = pending.pop(0)
                guarded(job, own_connection=False)

        def thread_main() -> None:
            try:
                worker()
            finally:
                connections.close_all()

        # The task's thread only waits from here: its connection goes back to the pool.
        connection_release()
        threads = [
            threading.Thread(target=thread_main, name=f"run-piece-{i}", daemon=True)
            for i in range(width)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors and raise_errors:
        raise errors[0]
