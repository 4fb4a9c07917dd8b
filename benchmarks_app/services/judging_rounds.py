"""The judge layer's database work, gathered into few round trips (issue 14).

Inside a run's event loop every cache read, single-flight claim, ledger row and cache write
goes to the processor's one ORM thread (``sync_to_async(thread_sensitive=True)``). One trip
per operation made that thread the bottleneck once the judge ran 32 calls side by side: a call
cost about seven trips and five commits. :class:`DbRounds` queues the operations of one event
loop and runs everything queued in one trip, one query (or one transaction) per kind:

* ``read``: the cache entries of every key asked, in one ``SELECT ... WHERE key IN``;
* ``claim``: the in-flight rows of every question about to be asked, inserted together (a
  conflict is another asker's row), then who holds each, expired rows taken over one by one,
  and the cache re-read for those keys; one transaction;
* ``begin``: the ``pending`` ledger rows of every request about to go out, in one insert,
  with the prompts they ask that are not stored yet (one :class:`JudgePrompt` per distinct
  text, an insert that ignores the ones already there), fenced by the piece's lease (a
  worker whose lease was taken over asks nothing more). Each
  caller gets its row's id back only once the insert has committed, and only then sends its
  request: a request is on record before it goes out, as before;
* ``end``: every completion in one transaction: the rows still ``pending`` updated in one
  statement, the valid answers' cache writes in one insert (``DbJudgeCache.put_many``), so
  an answer is never cached without its ``ok`` row nor ``ok`` without its answer, and the
  in-flight rows of those questions deleted (the claim ends with its answer: no trip of its
  own);
* ``renew`` and ``release`` of in-flight rows.

A trip starts as soon as the loop has run the callers that are ready (nothing waits on a
timer); while it runs the next trip's operations gather. A kind that fails fails the callers
of that kind in that trip, and only them.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from benchmarks_app.db_pool import orm_trip
from benchmarks_app.models import JudgeCacheEntry, JudgeCall, JudgeInFlight, JudgePrompt
from benchmarks_app.models.judging import JudgeCallStatus
from benchmarks_app.services.leases import lease_fence
from scoring.judges.cache import CacheWrite
from scoring.judges.records import CallRecord, Prompt

try:
    import fcntl
except ImportError:  # not on POSIX: processes take SQLite's own turns
    fcntl = None  # type: ignore[assignment]

# The order in which a trip runs the kinds: completions first, so that a read or claim in the
# same trip sees the answers they cache.
KINDS = ("end", "release", "renew", "begin", "claim", "read")


@dataclass
class _Op:
    kind: str
    args: tuple[Any, ...]
    future: asyncio.Future[Any]


@dataclass
class RoundStats:
    """What a loop's operations cost: trips to the ORM thread and operations carried."""

    trips: int = 0
    operations: int = 0
    by_kind: dict[str, int] = field(default_factory=lambda: defaultdict(int))


class DbRounds:
    """Queues one event loop's judge operations and runs them in few trips (module doc)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: list[_Op] = []
        self.draining: asyncio.Task[None] | None = None
        self.stats = RoundStats()

    async def submit(self, kind: str, *args: Any) -> Any:
        if kind not in KINDS:
            raise ValueError(f"kind: one of {', '.join(KINDS)}, got {kind!r}")
        future: asyncio.Future[Any] = self.loop.create_future()
        self.queue.append(_Op(kind, args, future))
        if self.draining is None or self.draining.done():
            self.draining = self.loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        # Let the callers that are ready in this pass of the loop queue theirs first.
        await asyncio.sleep(0)
        while self.queue:
            ops, self.queue = self.queue, []
            self.stats.trips += 1
            self.stats.operations += len(ops)
            try:
                outcomes = await orm_trip(run_trip)(ops)
            except BaseException as exc:
                for op in ops:
                    if not op.future.done():
                        if isinstance(exc, asyncio.CancelledError):
                            op.future.cancel()
                        else:
                            op.future.set_exception(exc)
                raise
            for op, (ok, value) in zip(ops, outcomes, strict=True):
                self.stats.by_kind[op.kind] += 1
                if op.future.done():  # its caller was cancelled and no longer waits
                    continue
                if ok:
                    op.future.set_result(value)
                else:
                    op.future.set_exception(value)


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, DbRounds] = (
    weakref.WeakKeyDictionary()
)


def rounds() -> DbRounds:
    """The running loop's :class:`DbRounds` (one per loop: one per run piece being processed)."""
    loop = asyncio.get_running_loop()
    found = _by_loop.get(loop)
    if found is None:
        found = _by_loop[loop] = DbRounds(loop)
    return found


async def settled(coroutine: Any) -> Any:
    """Await an operation that a cancellation of the caller does not abandon half-way.

    Returns its result; when the caller is cancelled meanwhile, waits for it all the same and
    then re-raises the cancellation (the caller undoes what it must, e.g. releases a claim).
    """
    task = asyncio.ensure_future(coroutine)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            await asyncio.wait([task])
        raise


# --- one trip (runs on the ORM thread) -------------------------------------------------------


def run_trip(ops: list[_Op]) -> list[tuple[bool, Any]]:
    """Run ``ops`` kind by kind; per op, ``(True, result)`` or ``(False, exception)``.

    The writing kinds share one transaction (one commit, one turn at SQLite's lock), each in
    a savepoint of its own: a kind that fails is undone alone and fails only its callers.
    Every caller hears back once the transaction has committed.
    """
    results: dict[int, tuple[bool, Any]] = {}
    grouped: dict[str, list[int]] = defaultdict(list)
    for i, op in enumerate(ops):
        grouped[op.kind].append(i)

    def run(kind: str, *, savepoint: bool) -> None:
        members = grouped[kind]
        args = [ops[i].args for i in members]
        try:
            if savepoint:
                with transaction.atomic():
                    values = _RUNNERS[kind](args)
            else:
                values = _RUNNERS[kind](args)
        except Exception as exc:
            for i in members:
                results[i] = (False, exc)
        else:
            for i, value in zip(members, values, strict=True):
                results[i] = (True, value)

    writing = [kind for kind in KINDS if kind != "read" and grouped.get(kind)]
    if len(writing) == 1:
        with sqlite_writer_turn():
            run(writing[0], savepoint=False)
    elif writing:
        with sqlite_writer_turn(), transaction.atomic():
            for kind in writing:
                run(kind, savepoint=True)
    if grouped.get("read"):
        run("read", savepoint=False)
    return [results[i] for i in range(len(ops))]


_sqlite_writer = threading.Lock()
# The lock file this process holds its turns with (reopened after a fork: a lock taken
# through a descriptor a parent and its child share would not keep them apart).
_writer_file: dict[str, tuple[int, int]] = {}


@contextmanager
def sqlite_writer_turn() -> Iterator[None]:
    """On SQLite, judge writes take turns on a lock before they begin: this process's
    threads on a lock of the process, and processes (a cluster's workers, a ``--wait``
    command's helper) on a lock file beside the database.

    SQLite lets one transaction write at a time, and one that finds the database locked
    sleeps between tries (1, 2, 5, 10 ... 100 ms): with a dozen pieces writing, a trip waited
    5 ms on average for its ``BEGIN``, and up to 230 ms; two processes writing at once made a
    run take up to twice as long now and then. Waiting on a lock wakes at once. Not taken
    inside a transaction (which may hold SQLite's lock already: waiting here for a thread
    that waits for that lock would deadlock), nor on other databases (row locks).
    """
    connection = transaction.get_connection()
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        yield
        return
    with _sqlite_writer:
        fd = _lock_file(connection)
        if fd is None:
            yield
            return
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


def _lock_file(connection: Any) -> int | None:
    """This process's descriptor of the database's writer lock file (None: in memory)."""
    name = str(connection.settings_dict.get("NAME") or "")
    if fcntl is None or not name or connection.is_in_memory_db():
        return None
    held = _writer_file.get(name)
    if held is not None and held[0] == os.getpid():
        return held[1]
    try:
        fd = os.open(f"{name}.writer-lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:  # a read-only folder: SQLite's own retries it is
        return None
    _writer_file[name] = (os.getpid(), fd)
    return fd


def _read(args: list[tuple[Any, ...]]) -> list[dict[str, Any] | None]:
    keys = {a[0] for a in args}
    found = dict(JudgeCacheEntry.objects.filter(key__in=keys).values_list("key", "response"))
    return [_answer(found.get(a[0])) for a in args]


def _answer(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _claim(args: list[tuple[Any, ...]]) -> list[tuple[bool, dict[str, Any] | None]]:
    """Each ``(key, holder, ttl_s)``: whether it is held here now, and the cached answer."""
    now = timezone.now()
    with transaction.atomic():
        JudgeInFlight.objects.bulk_create(
            [
                JudgeInFlight(key=key, holder=holder[:100], expires_at=now + timedelta(seconds=ttl))
                for key, holder, ttl in args
            ],
            ignore_conflicts=True,
        )
        keys = {a[0] for a in args}
        owners = dict(JudgeInFlight.objects.filter(key__in=keys).values_list("key", "holder"))
        claimed = []
        for key, holder, ttl in args:
            mine = owners.get(key) == holder[:100]
            if not mine:
                # Its asker is gone (it renews before every attempt): take the question
                # over. The conditional update lets exactly one of several takers win.
                mine = (
                    JudgeInFlight.objects.filter(key=key, expires_at__lt=now).update(
                        holder=holder[:100], expires_at=now + timedelta(seconds=ttl)
                    )
                    == 1
                )
            claimed.append(mine)
        # An answer cached between the caller's first look and its claim is used, not paid
        # for again; a question held elsewhere may be answered already.
        found = dict(JudgeCacheEntry.objects.filter(key__in=keys).values_list("key", "response"))
    return [(mine, _answer(found.get(a[0]))) for a, mine in zip(args, claimed, strict=True)]


def _renew(args: list[tuple[Any, ...]]) -> list[None]:
    expires = timezone.now()
    for key, holder, ttl in args:
        JudgeInFlight.objects.filter(key=key, holder=holder[:100]).update(
            expires_at=expires + timedelta(seconds=ttl)
        )
    return [None] * len(args)


def _release(args: list[tuple[Any, ...]]) -> list[None]:
    # Holders are unique per claim, so a row with one of these holders and keys is one of
    # these claims.
    JudgeInFlight.objects.filter(
        key__in={a[0] for a in args}, holder__in={a[1][:100] for a in args}
    ).delete()
    return [None] * len(args)


def _begin(args: list[tuple[Any, ...]]) -> list[int]:
    """Each ``(row,)`` or ``(row, prompt)``: an unsaved ``pending`` :class:`JudgeCall` and the
    :class:`Prompt` it asks, when it may not be stored yet; returns the ids."""
    rows = [a[0] for a in args]
    prompts: dict[str, Prompt] = {}
    for a in args:
        prompt = a[1] if len(a) > 1 else None
        if prompt is not None:
            prompts.setdefault(prompt.key, prompt)
    with transaction.atomic():
        lease_fence()
        if prompts:
            # Written once per text: a prompt stored already (another vote, run or worker)
            # is left as it is.
            JudgePrompt.objects.bulk_create(
                [JudgePrompt(key=k, system=p.system, user=p.user) for k, p in prompts.items()],
                ignore_conflicts=True,
            )
        JudgeCall.objects.bulk_create(rows)
    return [int(r.pk) for r in rows]


_FIELDS = [
    "status",
    "latency_ms",
    "tokens_in",
    "tokens_out",
    "tokens_reasoning",
    "tokens_cached",
    "error",
    "raw_response",
]


def _end(args: list[tuple[Any, ...]]) -> list[bool]:
    """Each ``(ticket, record, then, release)``: complete the row; ``then`` (a cache write)
    and the release of the question's in-flight row (``(key, holder)`` or ``None``) with it.

    Returns, per completion, whether its in-flight row was released here.
    """
    releases = [a[3] for a in args if a[3] is not None]
    with transaction.atomic():
        # Ledger rows are append-only (save() refuses to change one). This update is the one
        # transition a row may make: pending -> how its request ended. A row already marked
        # lost stays lost: its holder had been given up for dead. One UPDATE per row, not
        # bulk_update: its CASE per field and row cost 3 ms of CPU for one row and 16 ms for
        # eight, against 0.6 and 3.5 ms, all of it inside SQLite's one writer turn; and that
        # one statement's SQL built once, its rows sent together (``executemany``): the ORM
        # compiled it again for every row, most of those 0.6 ms.
        connection = transaction.get_connection()
        fields = _ledger_fields()
        rows = [
            [f.get_db_prep_save(getattr(r, f.name), connection) for f in fields]
            + [ticket, JudgeCallStatus.PENDING.value]
            for ticket, r, _, _ in args
        ]
        with connection.cursor() as cursor:
            cursor.executemany(_complete_sql(connection), rows)
        cache_writes(a[2] for a in args)
        if releases:
            # The answer is cached in this transaction: the claim ends with it, and whoever
            # waits for the question finds the answer as the row disappears.
            _release(releases)
    return [a[3] is not None for a in args]


# Per database vendor (its quoting): the statement of :func:`_complete_sql`.
_complete_statements: dict[str, str] = {}


def _complete_sql(connection: Any) -> str:
    """``UPDATE`` of a pending ledger row's outcome fields, by id (parameters: the fields of
    ``_FIELDS`` in order, the id, the pending status)."""
    found = _complete_statements.get(connection.vendor)
    if found is None:
        quote = connection.ops.quote_name
        meta = JudgeCall._meta
        fields = _ledger_fields()
        columns = ", ".join(f"{quote(f.column)} = %s" for f in fields)
        status = quote(next(f.column for f in fields if f.name == "status"))
        found = _complete_statements[connection.vendor] = (
            f"UPDATE {quote(meta.db_table)} SET {columns} "
            f"WHERE {quote(meta.pk.column)} = %s AND {status} = %s"
        )
    return found


def _ledger_fields() -> list[Any]:
    """The model fields of ``_FIELDS``, in its order."""
    by_name = {f.name: f for f in JudgeCall._meta.concrete_fields}
    return [by_name[name] for name in _FIELDS]


def cache_writes(thens: Any) -> None:
    """Run the cache writes: each cache's writes in one ``put_many`` where it has one."""
    batched: dict[int, tuple[Any, list[CacheWrite]]] = {}
    for then in thens:
        if then is None:
            continue
        if isinstance(then, CacheWrite) and hasattr(then.cache, "put_many"):
            batched.setdefault(id(then.cache), (then.cache, []))[1].append(then)
        else:
            then()
    for cache, writes in batched.values():
        cache.put_many(writes)


_RUNNERS: dict[str, Callable[[list[tuple[Any, ...]]], list[Any]]] = {
    "read": _read,
    "claim": _claim,
    "renew": _renew,
    "release": _release,
    "begin": _begin,
    "end": _end,
}


def pending_row(record: CallRecord, *, run_id: int | None, holder: str) -> JudgeCall:
    """The unsaved ``pending`` ledger row of a request about to go out."""
    return JudgeCall(
        run_id=run_id,
        judge=record.judge[:300],
        model=record.model[:200],
        prompt_hash=record.prompt_hash[:64],
        vote_number=record.vote_number,
        attempt=record.attempt,
        latency_ms=record.latency_ms,
        tokens_in=record.tokens_in,
        tokens_out=record.tokens_out,
        request=record.request,
        status=JudgeCallStatus.PENDING,
        error=record.error,
        prompt_key=record.prompt.key if record.prompt is not None else "",
        holder=holder[:100],
    )
